// Test helpers: central finite differences in f64 and random tensors.
#pragma once
#include <cstdint>
#include <functional>

#include "core/tensor/tensor.h"

namespace ptdp::testing {

// Fills an f64/f32 tensor with normal(0, std) values from a seed.
void fill_normal(Tensor& t, uint64_t seed, double std = 1.0);

// A new f64 tensor of normal(0, std) values from a seed.
Tensor randn(Shape shape, uint64_t seed, double std = 1.0);

// Norm-wise relative error ||analytic - numeric|| / ||numeric|| of the gradient of
// `objective` with respect to x, by central differences of step eps on up to `max_checks`
// evenly spread elements of x (all when x is small). x must be f64.
double grad_rel_error(const std::function<double()>& objective, Tensor x, const Tensor& analytic,
                      int64_t max_checks = 4096, double eps = 1e-6);

// sum(a * b) in f64.
double dot(const Tensor& a, const Tensor& b);

}  // namespace ptdp::testing
