// Internals shared by context_attention.cpp (p2p, allgather) and context_attention_a2a.cpp: the
// sizes and row views of one call, the checks and the exchange counters.
#pragma once
#include <cstdint>
#include <vector>

#include "core/model/context_attention.h"

namespace ptdp::cp_detail {

constexpr int kTagKv = 5701, kTagDkv = 5702, kTagA2a = 5703;

// The sizes of one call: cs tokens per chunk, sl = 2 cs rows per sequence on this rank, n = b sl.
struct Dims {
  int b, s, a, g, hd, C, rank;
  int64_t cs, sl, n;
  Dims(const ContextParallel& cp, int b_, int s_, int a_, int g_, int hd_)
      : b(b_), s(s_), a(a_), g(g_), hd(hd_), C(cp.size), rank(cp.rank), cs(s_ / (2 * cp.size)),
        sl(s_ / cp.size), n(int64_t(b_) * (s_ / cp.size)) {}
  // The chunk that local half h (0 or 1) of rank r holds.
  int64_t chunk(int r, int h) const { return h == 0 ? r : 2 * C - 1 - r; }
  // Rows of sequence j's half h in a [b*sl, w] tensor of rank-local rows.
  Tensor half(const Tensor& t, int j, int h) const { return t.slice_rows(j * sl + h * cs, j * sl + (h + 1) * cs); }
  // lse [2b, a, cs]: sequence j's half h as [1, a, cs].
  Tensor half_lse(const Tensor& lse, int j, int h) const { return lse.view((int64_t(j) * 2 + h) * a * cs, {1, a, cs}); }
  // Rows of chunk c of sequence j in a [b*s, w] tensor in sequence order.
  Tensor chunk_rows(const Tensor& t, int j, int64_t c) const {
    return t.slice_rows(int64_t(j) * s + c * cs, int64_t(j) * s + (c + 1) * cs);
  }
};

// s splits into 2 size chunks; check_group: and the communicator agrees with size and rank.
void check_chunks(const ContextParallel& cp, int s);
void check_group(const ContextParallel& cp, int s);
// Adds to cp_comm_stats(): steps, and elems of dtype dt sent.
void count(int64_t steps, int64_t elems, DType dt);

inline void wait_all(std::vector<CommHandle>& hs) {
  for (auto& h : hs) h.wait();
  hs.clear();
}

// a2a (context_attention_a2a.cpp)
void a2a_forward(Backend& be, const ContextParallel& cp, const Dims& d, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& y, CpAttnCache& cache);
void a2a_backward(Backend& be, const ContextParallel& cp, const Dims& d, const Tensor& dy, const CpAttnCache& cache,
                  Tensor& dq, Tensor& dk, Tensor& dv);

}  // namespace ptdp::cp_detail
