#include "core/tensor/tensor.h"

#include <cstring>

#include "core/tensor/allocator.h"

namespace ptdp {

std::string_view device_name(Device d) { return d == Device::CPU ? "cpu" : "cuda"; }

Storage::~Storage() {
  if (allocator) allocator->deallocate(ptr, bytes);
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    PTDP_CHECK(d >= 0, "negative dimension in shape {}", shape_str(s));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

Tensor Tensor::empty(Shape shape, DType dtype, Device device) {
  PTDP_CHECK(device == Device::CPU, "Tensor::empty allocates host memory; device tensors come from a backend");
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.dtype_ = dtype;
  t.device_ = device;
  auto st = std::make_shared<Storage>();
  st->bytes = t.nbytes();
  st->allocator = &CachingHostAllocator::instance();
  st->ptr = st->allocator->allocate(st->bytes);
  st->device = device;
  t.storage_ = std::move(st);
  return t;
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  Tensor t = empty(std::move(shape), dtype);
  t.zero_();
  return t;
}

Tensor Tensor::wrap(void* ptr, Shape shape, DType dtype, Device device) {
  Tensor t;
  t.raw_ = ptr;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, Shape shape, DType dtype) {
  PTDP_CHECK(storage != nullptr, "from_storage: no storage");
  Tensor t;
  t.shape_ = std::move(shape);
  t.numel_ = shape_numel(t.shape_);
  t.dtype_ = dtype;
  t.device_ = storage->device;
  PTDP_CHECK(t.nbytes() <= storage->bytes, "from_storage: {} {} needs {} bytes, storage has {}", dtype_name(dtype),
             shape_str(t.shape_), t.nbytes(), storage->bytes);
  t.storage_ = std::move(storage);
  return t;
}

void* Tensor::raw() const {
  char* base = static_cast<char*>(storage_ ? storage_->ptr : raw_);
  return base ? base + offset_ * dtype_size(dtype_) : nullptr;
}

Tensor Tensor::view(int64_t offset, Shape shape) const {
  int64_t n = shape_numel(shape);
  PTDP_CHECK(offset >= 0 && offset + n <= numel_, "view [{}, {}) outside tensor of {} elements",
             offset, offset + n, numel_);
  Tensor t = *this;
  t.offset_ = offset_ + offset;
  t.shape_ = std::move(shape);
  t.numel_ = n;
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  PTDP_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], "bad row slice");
  int64_t row = shape_[0] ? numel_ / shape_[0] : 0;
  Shape s = shape_;
  s[0] = end - begin;
  return view(begin * row, std::move(s));
}

void Tensor::zero_() {
  PTDP_CHECK(device_ == Device::CPU, "zero_ on a device tensor: use the backend");
  if (numel_) std::memset(raw(), 0, nbytes());
}

Tensor Tensor::clone() const {
  PTDP_CHECK(device_ == Device::CPU, "clone of a device tensor: use the backend (empty + copy)");
  Tensor t = empty(shape_, dtype_, device_);
  if (numel_) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

namespace {
double load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::F64: return static_cast<const double*>(p)[i];
    case DType::BF16: return bf16_to_float(static_cast<const bf16*>(p)[i]);
    case DType::F16: return f16_to_float(static_cast<const f16*>(p)[i]);
    case DType::I32: return static_cast<const int32_t*>(p)[i];
  }
  return 0;
}
void store(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::F32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::F64: static_cast<double*>(p)[i] = v; break;
    case DType::BF16: static_cast<bf16*>(p)[i] = float_to_bf16(static_cast<float>(v)); break;
    case DType::F16: static_cast<f16*>(p)[i] = float_to_f16(static_cast<float>(v)); break;
    case DType::I32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
  }
}
}  // namespace

void Tensor::copy_from(const Tensor& src) {
  PTDP_CHECK(src.numel_ == numel_, "copy_from: {} elements into {}", src.numel_, numel_);
  PTDP_CHECK(device_ == Device::CPU && src.device_ == Device::CPU,
             "copy_from on host tensors only (a {} tensor from a {} one): use the backend's copy",
             device_name(device_), device_name(src.device_));
  if (src.dtype_ == dtype_) {
    if (numel_) std::memmove(raw(), src.raw(), nbytes());
    return;
  }
  const void* s = src.raw();
  void* d = raw();
  // Element-wise conversion on every core: a billion-parameter model's f32 weights become bf16 in a
  // fraction of a second instead of several (each element is independent; the result is the same).
  const DType from = src.dtype_, to = dtype_;
#pragma omp parallel for schedule(static) if (numel_ >= (int64_t(1) << 16))
  for (int64_t i = 0; i < numel_; ++i) store(d, to, i, load(s, from, i));
}

}  // namespace ptdp
