// OpCheck: the checks an op's contract is made of (op_contracts.cpp), for one call of one op on
// one backend. Each failure is a RuntimeError naming the op or the operand and the rule it broke;
// a check that passes compares a few integers and allocates nothing.
#pragma once
#include <initializer_list>

#include "core/backend/backend.h"

namespace ptdp {

class OpCheck {
 public:
  OpCheck(const Backend& be, const char* op) : be_(be), op_(op), device_(be.device()) {}

  // The op's compute dtype: t's, t defined and its dtype one the backend computes in.
  DType compute_dtype(const Tensor& t) const;
  // t is defined, on the backend's device, of dtype dt and of the given shape.
  void expect(const Tensor& t, const char* what, std::initializer_list<int64_t> shape, DType dt) const;
  void expect(const Tensor& t, const char* what, const Shape& shape, DType dt) const;
  // t is defined and 2-d (before its dims are read).
  void expect_2d(const Tensor& t, const char* what) const;
  // The output's bytes do not overlap the input's.
  void expect_apart(const Tensor& out, const Tensor& in, const char* out_name, const char* in_name) const;

  const char* op() const { return op_; }

 private:
  void expect_shape(const Tensor& t, const char* what, const int64_t* shape, size_t ndim, DType dt) const;

  const Backend& be_;
  const char* op_;
  Device device_;
};

}  // namespace ptdp
