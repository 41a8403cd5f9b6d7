// Tensor: a typed, shaped, contiguous view into reference-counted storage on a device.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/common/error.h"
#include "core/tensor/dtype.h"

namespace ptdp {

enum class Device : uint8_t { CPU, CUDA };
std::string_view device_name(Device d);

class Allocator;

// A block of memory owned by an allocator; freed back to it when the last tensor goes.
struct Storage {
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device = Device::CPU;
  Allocator* allocator = nullptr;
  ~Storage();
};

using Shape = std::vector<int64_t>;
int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  // Allocates uninitialised host memory from the caching host allocator.
  static Tensor empty(Shape shape, DType dtype, Device device = Device::CPU);
  static Tensor zeros(Shape shape, DType dtype);
  // A non-owning tensor over memory that outlives it.
  static Tensor wrap(void* ptr, Shape shape, DType dtype, Device device = Device::CPU);
  // A tensor over the whole of `storage` (e.g. device memory from a backend's allocator).
  static Tensor from_storage(std::shared_ptr<Storage> storage, Shape shape, DType dtype);

  bool defined() const { return storage_ != nullptr || raw_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return numel_ * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }

  void* raw() const;
  template <class T> T* data() const {
    PTDP_CHECK(dtype_of<T>() == dtype_, "tensor is {}, accessed as {}", dtype_name(dtype_),
               dtype_name(dtype_of<T>()));
    return static_cast<T*>(raw());
  }

  // Contiguous sub-range [offset, offset + numel(shape)) of this tensor's elements, reshaped.
  Tensor view(int64_t offset, Shape shape) const;
  Tensor reshape(Shape shape) const { return view(0, std::move(shape)); }
  // Rows [begin, end) of the first dimension.
  Tensor slice_rows(int64_t begin, int64_t end) const;

  // Host tensors only: device tensors are filled and copied by their backend.
  void zero_();
  Tensor clone() const;
  void copy_from(const Tensor& src);  // same numel; converts between float dtypes

 private:
  std::shared_ptr<Storage> storage_;
  void* raw_ = nullptr;  // non-owning base when storage_ is null
  int64_t offset_ = 0;   // in elements
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
};

}  // namespace ptdp
