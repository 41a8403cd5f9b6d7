#include "core/backend/op_check.h"

#include <algorithm>

namespace ptdp {

namespace {

std::string dtype_list(std::span<const DType> dts) {
  std::string s;
  for (size_t i = 0; i < dts.size(); ++i)
    s += (i == 0 ? "" : i + 1 == dts.size() ? " or " : ", ") + std::string(dtype_name(dts[i]));
  return s;
}

std::string wrong_device(const char* what, const Backend& be) {
  if (be.device() == Device::CPU)
    return fmt::format("{} is a device tensor: the {} backend works on host tensors (download with the device "
                       "backend's copy)", what, be.name());
  return fmt::format("{} is a host tensor: the {} backend works on device tensors (upload with Backend::copy)", what,
                     be.name());
}

}  // namespace

DType OpCheck::compute_dtype(const Tensor& t) const {
  PTDP_CHECK(t.defined(), "{}: undefined input", op_);
  const DType dt = t.dtype();
  const std::span<const DType> dts = be_.compute_dtypes();
  PTDP_CHECK(std::find(dts.begin(), dts.end(), dt) != dts.end(), "{}: the {} backend computes in {}, not {}", op_,
             be_.name(), dtype_list(dts), dtype_name(dt));
  return dt;
}

void OpCheck::expect(const Tensor& t, const char* what, std::initializer_list<int64_t> shape, DType dt) const {
  expect_shape(t, what, shape.begin(), shape.size(), dt);
}

void OpCheck::expect(const Tensor& t, const char* what, const Shape& shape, DType dt) const {
  expect_shape(t, what, shape.data(), shape.size(), dt);
}

void OpCheck::expect_shape(const Tensor& t, const char* what, const int64_t* shape, size_t ndim, DType dt) const {
  PTDP_CHECK(t.defined(), "{} is undefined", what);
  PTDP_CHECK(t.device() == device_, "{}", wrong_device(what, be_));
  PTDP_CHECK(t.dtype() == dt, "{} is {}, expected {}", what, dtype_name(t.dtype()), dtype_name(dt));
  PTDP_CHECK(std::equal(t.shape().begin(), t.shape().end(), shape, shape + ndim), "{} has shape {}, expected {}",
             what, shape_str(t.shape()), shape_str(Shape(shape, shape + ndim)));
}

void OpCheck::expect_2d(const Tensor& t, const char* what) const {
  PTDP_CHECK(t.defined() && t.ndim() == 2, "{} must be 2-d, got {}", what, shape_str(t.shape()));
}

void OpCheck::expect_apart(const Tensor& out, const Tensor& in, const char* out_name, const char* in_name) const {
  const char *o = static_cast<const char*>(out.raw()), *i = static_cast<const char*>(in.raw());
  const bool overlap = out.nbytes() && in.nbytes() && o < i + in.nbytes() && i < o + out.nbytes();
  PTDP_CHECK(!overlap, "{}: {} overlaps {} (the CUDA kernels need them apart)", op_, out_name, in_name);
}

}  // namespace ptdp
