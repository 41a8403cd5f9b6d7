// adamw_multi on the CUDA backend (one kernel per bucket) equals scale_, adamw and copy run per
// segment on the same backend, bit for bit: weights, gradients, Adam's moments and the bf16 / f16
// weights; with and without a gradient scale, over more segments than one launch takes.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_CUDA
#include <cstring>
#include <vector>

#include "core/backend/backend.h"
#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_info.h"
#include "core/common/rng.h"
#include "core/backend/cuda/testing/skip_without_gpu.h"

namespace ptdp::adamw_multi_test {
namespace {

Tensor uniform(int64_t n, uint64_t stream, double lo, double hi) {
  Tensor t = Tensor::empty({n}, DType::F32);
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = float(lo + (hi - lo) * uniform01(77, stream, uint64_t(i)));
  return t;
}

struct State {
  Tensor p, g, m, v, low;
};

class CudaAdamWMulti : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    PTDP_SKIP_WITHOUT_GPU();
    gpu = make_cuda_backend(0);
  }
  Tensor up(const Tensor& h) {
    Tensor t = gpu->empty(h.shape(), h.dtype());
    gpu->copy(t, h);
    return t;
  }
  Tensor down(const Tensor& d) {
    Tensor h = Tensor::empty(d.shape(), d.dtype());
    gpu->copy(h, d);
    return h;
  }
  State state(int64_t n, int64_t state_n, DType low) {
    State s{up(uniform(n, 1, -1, 1)), up(uniform(n, 2, -0.5, 0.5)), up(uniform(state_n, 3, -0.1, 0.1)),
            up(uniform(state_n, 4, 0, 0.01)), Tensor()};
    if (low != DType::F32) {
      s.low = gpu->empty({n}, low);
      gpu->fill(s.low, 0.0);
    }
    return s;
  }
  void expect_same(const Tensor& a, const Tensor& b, const char* what) {
    Tensor x = down(a), y = down(b);
    ASSERT_EQ(x.nbytes(), y.nbytes());
    EXPECT_EQ(std::memcmp(x.raw(), y.raw(), x.nbytes()), 0) << what << " differs";
  }
  std::unique_ptr<Backend> gpu;
};

TEST_P(CudaAdamWMulti, EqualsScaleAdamwAndCopyPerSegmentBitForBit) {
  const DType low = GetParam();
  // 40 segments (two launches), sizes 1 to ~3000, alternating weight decay; the weights and
  // gradients at the flat offsets, the state compact (as a sharded optimizer's).
  std::vector<AdamWSegment> segs;
  int64_t at = 0, st = 0;
  for (int k = 0; k < 40; ++k) {
    const int64_t size = 1 + (int64_t(k) * 937) % 3001;
    segs.push_back({.param = at, .grad = at, .state = st, .lowp = at, .size = size,
                    .weight_decay = k % 2 ? 0.0 : 0.1});
    at += size + 3;  // gaps the step must not touch
    st += size;
  }
  AdamWParams p{.lr = 3e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0, .step = 7};
  for (double grad_scale : {1.0, 0.37}) {
    State a = state(at, st, low), b = state(at, st, low);
    gpu->adamw_multi(a.p, a.g, a.m, a.v, low == DType::F32 ? nullptr : &a.low, segs, p, grad_scale);
    for (const AdamWSegment& s : segs) {
      Tensor pw = b.p.view(s.param, {s.size}), g = b.g.view(s.grad, {s.size});
      Tensor m = b.m.view(s.state, {s.size}), v = b.v.view(s.state, {s.size});
      if (grad_scale != 1.0) gpu->scale_(g, grad_scale);
      AdamWParams q = p;
      q.weight_decay = s.weight_decay;
      gpu->adamw(pw, g, m, v, q);
      if (low != DType::F32) {
        Tensor dst = b.low.view(s.lowp, {s.size});
        gpu->copy(dst, pw);
      }
    }
    expect_same(a.p, b.p, "weights");
    expect_same(a.g, b.g, "gradients");
    expect_same(a.m, b.m, "m");
    expect_same(a.v, b.v, "v");
    if (low != DType::F32) expect_same(a.low, b.low, "low-precision weights");
  }
}

INSTANTIATE_TEST_SUITE_P(Cuda, CudaAdamWMulti, ::testing::Values(DType::F32, DType::BF16, DType::F16),
                         [](const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace ptdp::adamw_multi_test
#endif  // PTDP_HAVE_CUDA
