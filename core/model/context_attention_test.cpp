// Context-parallel attention on groups of local ranks (threads) against one rank's block
// attention over the whole sequences: every variant (p2p, a2a, allgather), group sizes 2 and 4,
// one and two sequences, grouped and multi-head attention, f32 and f64; the exchange counters
// against context_attention.h's formulas.
#include "core/model/context_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "core/comm/device_comm.h"
#include "core/comm/local/local_comm.h"
#include "core/testing/gradcheck.h"
#include "core/testing/host_device_backend.h"

namespace ptdp {
namespace {

using testing::randn;

Tensor cp_cast(const Tensor& t, DType dt) {
  Tensor r = Tensor::empty(t.shape(), dt);
  r.copy_from(t);
  return r;
}

// ||got - want|| / ||want|| in f64.
double cp_rel_diff(const Tensor& got, const Tensor& want) {
  Tensor g = cp_cast(got, DType::F64), w = cp_cast(want, DType::F64);
  double num = 0, den = 0;
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double e = g.data<double>()[i] - w.data<double>()[i];
    num += e * e;
    den += w.data<double>()[i] * w.data<double>()[i];
  }
  return std::sqrt(num / den);
}

// The rows of a [b*s, w] tensor that a rank holds (positions as cp_positions), in its order.
Tensor local_rows(const Tensor& whole, const Tensor& positions, int b, int s) {
  const int64_t sl = positions.numel() / b;
  Tensor r = Tensor::empty({positions.numel(), whole.dim(1)}, whole.dtype());
  for (int j = 0; j < b; ++j)
    for (int64_t i = 0; i < sl; ++i) {
      const int64_t g = int64_t(j) * s + positions.data<int32_t>()[j * sl + i];
      r.slice_rows(j * sl + i, j * sl + i + 1).copy_from(whole.slice_rows(g, g + 1));
    }
  return r;
}

TEST(ContextParallelPositions, RankHoldsChunksIAndTwoCMinusOneMinusI) {
  Tensor p0 = cp_positions(2, 8, ContextParallel{nullptr, 2, 0, CpComm::P2P});
  Tensor p1 = cp_positions(1, 8, ContextParallel{nullptr, 2, 1, CpComm::P2P});
  const int32_t want0[] = {0, 1, 6, 7, 0, 1, 6, 7}, want1[] = {2, 3, 4, 5};
  ASSERT_EQ(p0.numel(), 8);
  ASSERT_EQ(p1.numel(), 4);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(p0.data<int32_t>()[i], want0[i]) << i;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(p1.data<int32_t>()[i], want1[i]) << i;
  Tensor whole = cp_positions(1, 5, ContextParallel{});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(whole.data<int32_t>()[i], i);
}

struct Case {
  int C;
  CpComm comm;
  int b;
  int g;  // of a = 4 heads
  DType dtype;
};

class ContextAttention : public ::testing::TestWithParam<std::tuple<int, CpComm, int, int, DType>> {};

// The counters' formulas (context_attention.h).
CpCommStats expected_stats(const Case& c, int s, int a, int hd, bool backward) {
  const int64_t e = dtype_size(c.dtype), n = int64_t(c.b) * s / c.C, B = n * c.g * hd * e, C = c.C;
  switch (c.comm) {
    case CpComm::P2P: return backward ? CpCommStats{C, (C - 1) * 2 * B + C * 2 * B} : CpCommStats{C - 1, (C - 1) * 2 * B};
    case CpComm::AllGather: return backward ? CpCommStats{2, 2 * (C - 1) * 2 * B} : CpCommStats{1, (C - 1) * 2 * B};
    case CpComm::A2A: {
      const int64_t wq = int64_t(a) / C * hd, wk = std::max<int64_t>(c.g / C, 1) * hd;
      return CpCommStats{2, (C - 1) * n * (2 * wq + 2 * wk) * e};
    }
  }
  return {};
}

TEST_P(ContextAttention, EveryRankEqualsOneRankOnTheWholeSequence) {
  const auto [C, comm, b, g, dt] = GetParam();
  const Case c{C, comm, b, g, dt};
  const int s = 16, a = 4, hd = 4;
  const int64_t rows = int64_t(b) * s;
  const Tensor q = cp_cast(randn({rows, a * hd}, 1), dt), k = cp_cast(randn({rows, g * hd}, 2), dt),
               v = cp_cast(randn({rows, g * hd}, 3), dt), dy = cp_cast(randn({rows, a * hd}, 4), dt);
  auto ref_be = make_cpu_backend();
  Tensor y = Tensor::empty(q.shape(), dt), lse = Tensor::empty({b, a, s}, acc_dtype(dt));
  ref_be->flash_attention_forward(y, lse, q, k, v, b, s, s, a, g, hd, 0, 0, true);
  Tensor dq = Tensor::zeros(q.shape(), dt), dk = Tensor::zeros(k.shape(), dt), dv = Tensor::zeros(v.shape(), dt);
  ref_be->flash_attention_backward(dq, dk, dv, dy, q, k, v, y, lse, b, s, s, a, g, hd, 0, 0, true);

  const double tol = dt == DType::F64 ? 1e-12 : 1e-5;
  run_local_ranks(C, [&](int rank, Communicator& group) {
    auto be = make_cpu_backend();
    const ContextParallel cp{&group, C, rank, comm};
    const Tensor pos = cp_positions(b, s, cp);
    const Tensor lq = local_rows(q, pos, b, s), lk = local_rows(k, pos, b, s), lv = local_rows(v, pos, b, s),
                 ldy = local_rows(dy, pos, b, s);
    Tensor ly = Tensor::empty(lq.shape(), dt);
    CpAttnCache cache;
    cp_comm_stats() = {};
    cp_attention_forward(*be, cp, lq, lk, lv, ly, cache, b, s, a, g, hd);
    const CpCommStats fwd = cp_comm_stats(), want_fwd = expected_stats(c, s, a, hd, false);
    Tensor ldq = Tensor::empty(lq.shape(), dt), ldk = Tensor::empty(lk.shape(), dt),
           ldv = Tensor::empty(lv.shape(), dt);
    cp_comm_stats() = {};
    cp_attention_backward(*be, cp, ldy, lq, lk, lv, cache, ldq, ldk, ldv, b, s, a, g, hd);
    const CpCommStats bwd = cp_comm_stats(), want_bwd = expected_stats(c, s, a, hd, true);
    const std::string what = "rank " + std::to_string(rank);
    EXPECT_LT(cp_rel_diff(ly, local_rows(y, pos, b, s)), tol) << what << " y";
    EXPECT_LT(cp_rel_diff(ldq, local_rows(dq, pos, b, s)), tol) << what << " dq";
    EXPECT_LT(cp_rel_diff(ldk, local_rows(dk, pos, b, s)), tol) << what << " dk";
    EXPECT_LT(cp_rel_diff(ldv, local_rows(dv, pos, b, s)), tol) << what << " dv";
    EXPECT_EQ(fwd.steps, want_fwd.steps) << what << " forward steps";
    EXPECT_EQ(fwd.bytes_sent, want_fwd.bytes_sent) << what << " forward bytes";
    EXPECT_EQ(bwd.steps, want_bwd.steps) << what << " backward steps";
    EXPECT_EQ(bwd.bytes_sent, want_bwd.bytes_sent) << what << " backward bytes";
  });
}

std::string case_name(const ::testing::TestParamInfo<ContextAttention::ParamType>& info) {
  const auto [C, comm, b, g, dt] = info.param;
  return "C" + std::to_string(C) + "_" + std::string(enum_name(comm)) + "_b" + std::to_string(b) + "_g" +
         std::to_string(g) + "_" + std::string(dtype_name(dt));
}

INSTANTIATE_TEST_SUITE_P(Variants, ContextAttention,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values(CpComm::P2P, CpComm::A2A, CpComm::AllGather),
                                            ::testing::Values(1, 2), ::testing::Values(4, 2, 1),
                                            ::testing::Values(DType::F32, DType::F64)),
                         case_name);

// bf16 storage: every variant runs (lse in f32) and stays within bf16's rounding of one rank.
TEST(ContextAttentionBf16, EveryVariantIsCloseToOneRank) {
  const int C = 2, b = 2, s = 8, a = 4, g = 2, hd = 4;
  const DType dt = DType::BF16;
  const int64_t rows = int64_t(b) * s;
  const Tensor q = cp_cast(randn({rows, a * hd}, 8), dt), k = cp_cast(randn({rows, g * hd}, 9), dt),
               v = cp_cast(randn({rows, g * hd}, 10), dt), dy = cp_cast(randn({rows, a * hd}, 11), dt);
  auto ref_be = make_cpu_backend();
  Tensor y = Tensor::empty(q.shape(), dt), lse = Tensor::empty({b, a, s}, DType::F32);
  ref_be->flash_attention_forward(y, lse, q, k, v, b, s, s, a, g, hd, 0, 0, true);
  Tensor dq = Tensor::zeros(q.shape(), dt), dk = Tensor::zeros(k.shape(), dt), dv = Tensor::zeros(v.shape(), dt);
  ref_be->flash_attention_backward(dq, dk, dv, dy, q, k, v, y, lse, b, s, s, a, g, hd, 0, 0, true);
  for (CpComm comm : {CpComm::P2P, CpComm::A2A, CpComm::AllGather})
    run_local_ranks(C, [&](int rank, Communicator& group) {
      auto be = make_cpu_backend();
      const ContextParallel cp{&group, C, rank, comm};
      const Tensor pos = cp_positions(b, s, cp);
      const Tensor lq = local_rows(q, pos, b, s), lk = local_rows(k, pos, b, s), lv = local_rows(v, pos, b, s);
      Tensor ly = Tensor::empty(lq.shape(), dt), ldq = Tensor::empty(lq.shape(), dt),
             ldk = Tensor::empty(lk.shape(), dt), ldv = Tensor::empty(lv.shape(), dt);
      CpAttnCache cache;
      cp_attention_forward(*be, cp, lq, lk, lv, ly, cache, b, s, a, g, hd);
      cp_attention_backward(*be, cp, local_rows(dy, pos, b, s), lq, lk, lv, cache, ldq, ldk, ldv, b, s, a, g, hd);
      const std::string what = std::string(enum_name(comm)) + " rank " + std::to_string(rank);
      EXPECT_LT(cp_rel_diff(ly, local_rows(y, pos, b, s)), 1e-2) << what;
      EXPECT_LT(cp_rel_diff(ldq, local_rows(dq, pos, b, s)), 2e-2) << what;
      EXPECT_LT(cp_rel_diff(ldk, local_rows(dk, pos, b, s)), 2e-2) << what;
      EXPECT_LT(cp_rel_diff(ldv, local_rows(dv, pos, b, s)), 2e-2) << what;
    });
}

// Device tensors (host memory labelled CUDA, every op refusing host tensors) through a staging
// communicator: no variant touches a device tensor from the host.
TEST(ContextAttentionOnADevice, EveryVariantKeepsItsTensorsOnTheDevice) {
  const int C = 2, b = 1, s = 8, a = 4, g = 2, hd = 4;
  const int64_t rows = int64_t(b) * s;
  const Tensor q = randn({rows, a * hd}, 12), k = randn({rows, g * hd}, 13), v = randn({rows, g * hd}, 14),
               dy = randn({rows, a * hd}, 15);
  auto ref_be = make_cpu_backend();
  Tensor y = Tensor::empty(q.shape(), DType::F64), lse = Tensor::empty({b, a, s}, DType::F64);
  ref_be->flash_attention_forward(y, lse, q, k, v, b, s, s, a, g, hd, 0, 0, true);
  Tensor dq = Tensor::zeros(q.shape(), DType::F64), dk = Tensor::zeros(k.shape(), DType::F64),
         dv = Tensor::zeros(v.shape(), DType::F64);
  ref_be->flash_attention_backward(dq, dk, dv, dy, q, k, v, y, lse, b, s, s, a, g, hd, 0, 0, true);
  for (CpComm comm : {CpComm::P2P, CpComm::A2A, CpComm::AllGather})
    run_local_ranks(C, [&](int rank, Communicator& host_group) {
      auto be = testing::make_host_device_backend();
      auto group = make_device_comm(host_group, *be, Device::CPU);
      const ContextParallel cp{group.get(), C, rank, comm};
      const Tensor pos = cp_positions(b, s, cp);
      auto up = [&](const Tensor& t) { return to_backend(*be, local_rows(t, pos, b, s)); };
      const Tensor lq = up(q), lk = up(k), lv = up(v), ldy = up(dy);
      Tensor ly = be->empty(lq.shape(), DType::F64), ldq = be->empty(lq.shape(), DType::F64),
             ldk = be->empty(lk.shape(), DType::F64), ldv = be->empty(lv.shape(), DType::F64);
      CpAttnCache cache;
      cp_attention_forward(*be, cp, lq, lk, lv, ly, cache, b, s, a, g, hd);
      cp_attention_backward(*be, cp, ldy, lq, lk, lv, cache, ldq, ldk, ldv, b, s, a, g, hd);
      const std::string what = std::string(enum_name(comm)) + " rank " + std::to_string(rank);
      EXPECT_LT(cp_rel_diff(to_host(*be, ly), local_rows(y, pos, b, s)), 1e-12) << what;
      EXPECT_LT(cp_rel_diff(to_host(*be, ldq), local_rows(dq, pos, b, s)), 1e-12) << what;
      EXPECT_LT(cp_rel_diff(to_host(*be, ldk), local_rows(dk, pos, b, s)), 1e-12) << what;
      EXPECT_LT(cp_rel_diff(to_host(*be, ldv), local_rows(dv, pos, b, s)), 1e-12) << what;
    });
}

TEST(ContextAttentionSizeOne, IsOneCausalBlockAtPositionZero) {
  const int b = 2, s = 6, a = 2, g = 1, hd = 4;
  auto be = make_cpu_backend();
  const Tensor q = randn({b * s, a * hd}, 5), k = randn({b * s, g * hd}, 6), v = randn({b * s, g * hd}, 7);
  Tensor y = Tensor::empty(q.shape(), DType::F64), lse = Tensor::empty({b, a, s}, DType::F64);
  be->flash_attention_forward(y, lse, q, k, v, b, s, s, a, g, hd, 0, 0, true);
  Tensor y1 = Tensor::empty(q.shape(), DType::F64);
  CpAttnCache cache;
  cp_comm_stats() = {};
  cp_attention_forward(*be, ContextParallel{}, q, k, v, y1, cache, b, s, a, g, hd);
  EXPECT_EQ(cp_rel_diff(y1, y), 0.0);
  EXPECT_EQ(cp_comm_stats().steps, 0);
}

TEST(ContextAttentionA2a, HeadsThatDoNotSplitOverTheGroupAreRefusedNamingTheFlag) {
  run_local_ranks(2, [&](int rank, Communicator& group) {
    auto be = make_cpu_backend();
    const int b = 1, s = 8, a = 6, g = 3, hd = 2;  // g and C = 2 do not divide one another
    const ContextParallel cp{&group, 2, rank, CpComm::A2A};
    Tensor q = Tensor::zeros({b * s / 2, a * hd}, DType::F32), k = Tensor::zeros({b * s / 2, g * hd}, DType::F32);
    Tensor y = Tensor::empty(q.shape(), DType::F32);
    CpAttnCache cache;
    try {
      cp_attention_forward(*be, cp, q, k, k, y, cache, b, s, a, g, hd);
      ADD_FAILURE() << "not refused";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("--cp-comm-type a2a"), std::string::npos) << e.what();
    }
  });
}

}  // namespace
}  // namespace ptdp
