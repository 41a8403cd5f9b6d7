// Context-parallel attention: the p2p ring, the a2a (Ulysses) head exchange and the allgather of
// keys and values, each over the backend's block-attention ops (context_attention.h).
#include "core/model/context_attention.h"

#include <limits>
#include <utility>
#include <vector>

#include "core/common/error.h"
#include "core/model/context_attention_detail.h"

namespace ptdp {

CpCommStats& cp_comm_stats() {
  thread_local CpCommStats stats;
  return stats;
}

namespace cp_detail {

void check_chunks(const ContextParallel& cp, int s) {
  PTDP_CHECK(cp.size >= 1 && cp.rank >= 0 && cp.rank < cp.size, "context parallelism: rank {} of a group of {}",
             cp.rank, cp.size);
  PTDP_CHECK(cp.size == 1 || s % (2 * cp.size) == 0,
             "--context-parallel-size {}: the sequence length {} must be divisible by 2 x {} (the chunks)", cp.size,
             s, cp.size);
}

void check_group(const ContextParallel& cp, int s) {
  check_chunks(cp, s);
  PTDP_CHECK(cp.size == 1 || (cp.group && cp.group->size() == cp.size && cp.group->rank() == cp.rank),
             "context parallelism: the group's communicator must have size {} and rank {}", cp.size, cp.rank);
}

void count(int64_t steps, int64_t elems, DType dt) {
  cp_comm_stats().steps += steps;
  cp_comm_stats().bytes_sent += elems * int64_t(dtype_size(dt));
}

}  // namespace cp_detail

namespace {

using cp_detail::check_group;
using cp_detail::count;
using cp_detail::Dims;
using cp_detail::kTagDkv;
using cp_detail::kTagKv;
using cp_detail::wait_all;

// K and V stacked: [2n, g*hd], K rows first.
Tensor pack_kv(Backend& be, const Tensor& k, const Tensor& v) {
  const int64_t n = k.dim(0);
  Tensor kv = be.empty({2 * n, k.dim(1)}, k.dtype());
  Tensor top = kv.slice_rows(0, n), bottom = kv.slice_rows(n, 2 * n);
  be.copy(top, k);
  be.copy(bottom, v);
  return kv;
}

Tensor neg_inf_lse(Backend& be, Shape shape, DType dt) {
  Tensor lse = be.empty(std::move(shape), acc_dtype(dt));
  be.fill(lse, -std::numeric_limits<double>::infinity());
  return lse;
}

// ---- p2p: key/value blocks around the ring --------------------------------------------------

// One step of the ring posted: `out` to the next rank of the group, `in` from the previous one.
void ring_shift(const ContextParallel& cp, const Dims& d, const Tensor& out, Tensor& in, int tag,
                std::vector<CommHandle>& hs) {
  hs.push_back(cp.group->isend(out, (d.rank + 1) % d.C, tag));
  hs.push_back(cp.group->irecv(in, (d.rank + d.C - 1) % d.C, tag));
}

// The (local q half, kv half) pairs of a step whose kv comes from rank src: causal on the diagonal,
// whole where the kv chunk precedes, skipped where it follows.
template <class F>
void for_each_visible_pair(const Dims& d, int src, F&& f) {
  for (int qh = 0; qh < 2; ++qh)
    for (int kh = 0; kh < 2; ++kh) {
      const int64_t qc = d.chunk(d.rank, qh), kc = d.chunk(src, kh);
      if (kc <= qc) f(qh, kh, qc * d.cs, kc * d.cs, kc == qc);
    }
}

void p2p_forward(Backend& be, const ContextParallel& cp, const Dims& d, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& y, CpAttnCache& cache) {
  const DType dt = q.dtype();
  Tensor kv = pack_kv(be, k, v), incoming = be.empty(kv.shape(), dt);
  cache.lse = neg_inf_lse(be, {2 * d.b, d.a, d.cs}, dt);
  be.fill(y, 0);
  Tensor yb = be.empty({d.cs, int64_t(d.a) * d.hd}, dt), lb = be.empty({1, d.a, d.cs}, acc_dtype(dt));
  std::vector<CommHandle> hs;
  for (int t = 0; t < d.C; ++t) {
    if (t < d.C - 1) {  // the next step's block travels while this one is computed
      ring_shift(cp, d, kv, incoming, kTagKv, hs);
      count(1, kv.numel(), dt);
    }
    const int src = (d.rank - t + d.C) % d.C;
    for (int j = 0; j < d.b; ++j)
      for_each_visible_pair(d, src, [&](int qh, int kh, int64_t q_pos, int64_t k_pos, bool causal) {
        const Tensor kb = d.half(kv.slice_rows(0, d.n), j, kh), vb = d.half(kv.slice_rows(d.n, 2 * d.n), j, kh);
        be.flash_attention_forward(yb, lb, d.half(q, j, qh), kb, vb, 1, d.cs, d.cs, d.a, d.g, d.hd, q_pos, k_pos,
                                   causal);
        Tensor yh = d.half(y, j, qh), lh = d.half_lse(cache.lse, j, qh);
        be.attention_merge(yh, lh, yb, lb, 1, d.cs, d.a, d.hd);
      });
    wait_all(hs);
    std::swap(kv, incoming);
  }
}

// Megatron-core's ring backward: K and V go around again, and with them the dK, dV accumulated for
// that block; after the last step each block's sums arrive at its owner.
void p2p_backward(Backend& be, const ContextParallel& cp, const Dims& d, const Tensor& dy, const Tensor& q,
                  const Tensor& k, const Tensor& v, const CpAttnCache& cache, Tensor& dq, Tensor& dk, Tensor& dv) {
  const DType dt = q.dtype();
  Tensor kv = pack_kv(be, k, v), kv_in = be.empty(kv.shape(), dt);
  Tensor dkv = be.empty(kv.shape(), dt), dkv_in = be.empty(kv.shape(), dt);
  be.fill(dkv, 0);
  be.fill(dq, 0);
  std::vector<CommHandle> hs;
  for (int t = 0; t < d.C; ++t) {
    if (t < d.C - 1) {
      ring_shift(cp, d, kv, kv_in, kTagKv, hs);
      count(0, kv.numel(), dt);
    }
    const int src = (d.rank - t + d.C) % d.C;
    for (int j = 0; j < d.b; ++j)
      for_each_visible_pair(d, src, [&](int qh, int kh, int64_t q_pos, int64_t k_pos, bool causal) {
        const Tensor kb = d.half(kv.slice_rows(0, d.n), j, kh), vb = d.half(kv.slice_rows(d.n, 2 * d.n), j, kh);
        Tensor dkb = d.half(dkv.slice_rows(0, d.n), j, kh), dvb = d.half(dkv.slice_rows(d.n, 2 * d.n), j, kh);
        Tensor dqh = d.half(dq, j, qh);
        be.flash_attention_backward(dqh, dkb, dvb, d.half(dy, j, qh), d.half(q, j, qh), kb, vb,
                                    d.half(cache.y, j, qh), d.half_lse(cache.lse, j, qh), 1, d.cs, d.cs, d.a, d.g,
                                    d.hd, q_pos, k_pos, causal);
      });
    ring_shift(cp, d, dkv, dkv_in, kTagDkv, hs);
    count(1, dkv.numel(), dt);
    wait_all(hs);
    std::swap(kv, kv_in);
    std::swap(dkv, dkv_in);
  }
  be.copy(dk, dkv.slice_rows(0, d.n));
  be.copy(dv, dkv.slice_rows(d.n, 2 * d.n));
}

// ---- allgather: every rank's K and V, in sequence order -------------------------------------

// K and V of the whole sequences [b*s, g*hd] each, from the group's all-gather.
std::pair<Tensor, Tensor> gather_kv(Backend& be, const ContextParallel& cp, const Dims& d, const Tensor& k,
                                    const Tensor& v) {
  const DType dt = k.dtype();
  Tensor kv = pack_kv(be, k, v), all = be.empty({d.C * kv.dim(0), kv.dim(1)}, dt);
  cp.group->all_gather(kv, all);
  count(1, (d.C - 1) * kv.numel(), dt);
  Tensor ks = be.empty({int64_t(d.b) * d.s, k.dim(1)}, dt), vs = be.empty(ks.shape(), dt);
  for (int p = 0; p < d.C; ++p) {
    const Tensor from = all.slice_rows(p * 2 * d.n, (p + 1) * 2 * d.n);
    for (int j = 0; j < d.b; ++j)
      for (int h = 0; h < 2; ++h) {
        Tensor kc = d.chunk_rows(ks, j, d.chunk(p, h)), vc = d.chunk_rows(vs, j, d.chunk(p, h));
        be.copy(kc, d.half(from.slice_rows(0, d.n), j, h));
        be.copy(vc, d.half(from.slice_rows(d.n, 2 * d.n), j, h));
      }
  }
  return {ks, vs};
}

void allgather_forward(Backend& be, const ContextParallel& cp, const Dims& d, const Tensor& q, const Tensor& k,
                       const Tensor& v, Tensor& y, CpAttnCache& cache) {
  const auto [ks, vs] = gather_kv(be, cp, d, k, v);
  cache.lse = be.empty({2 * d.b, d.a, d.cs}, acc_dtype(q.dtype()));
  for (int j = 0; j < d.b; ++j)
    for (int h = 0; h < 2; ++h) {  // the keys up to this chunk's end
      const int64_t c = d.chunk(d.rank, h), sk = (c + 1) * d.cs;
      Tensor yh = d.half(y, j, h), lh = d.half_lse(cache.lse, j, h);
      be.flash_attention_forward(yh, lh, d.half(q, j, h), ks.slice_rows(j * d.s, j * d.s + sk),
                                 vs.slice_rows(j * d.s, j * d.s + sk), 1, d.cs, sk, d.a, d.g, d.hd, c * d.cs, 0, true);
    }
}

void allgather_backward(Backend& be, const ContextParallel& cp, const Dims& d, const Tensor& dy, const Tensor& q,
                        const Tensor& k, const Tensor& v, const CpAttnCache& cache, Tensor& dq, Tensor& dk,
                        Tensor& dv) {
  const DType dt = q.dtype();
  const auto [ks, vs] = gather_kv(be, cp, d, k, v);
  Tensor dks = be.empty(ks.shape(), dt), dvs = be.empty(vs.shape(), dt);
  be.fill(dks, 0);
  be.fill(dvs, 0);
  be.fill(dq, 0);
  for (int j = 0; j < d.b; ++j)
    for (int h = 0; h < 2; ++h) {
      const int64_t c = d.chunk(d.rank, h), sk = (c + 1) * d.cs;
      Tensor dqh = d.half(dq, j, h), dkj = dks.slice_rows(j * d.s, j * d.s + sk),
             dvj = dvs.slice_rows(j * d.s, j * d.s + sk);
      be.flash_attention_backward(dqh, dkj, dvj, d.half(dy, j, h), d.half(q, j, h),
                                  ks.slice_rows(j * d.s, j * d.s + sk), vs.slice_rows(j * d.s, j * d.s + sk),
                                  d.half(cache.y, j, h), d.half_lse(cache.lse, j, h), 1, d.cs, sk, d.a, d.g, d.hd,
                                  c * d.cs, 0, true);
    }
  // Each rank's rows, rank after rank (dK then dV), reduce-scattered: this rank's sums.
  Tensor all = be.empty({d.C * 2 * d.n, ks.dim(1)}, dt), mine = be.empty({2 * d.n, ks.dim(1)}, dt);
  for (int p = 0; p < d.C; ++p) {
    const Tensor to = all.slice_rows(p * 2 * d.n, (p + 1) * 2 * d.n);
    for (int j = 0; j < d.b; ++j)
      for (int h = 0; h < 2; ++h) {
        Tensor kh = d.half(to.slice_rows(0, d.n), j, h), vh = d.half(to.slice_rows(d.n, 2 * d.n), j, h);
        be.copy(kh, d.chunk_rows(dks, j, d.chunk(p, h)));
        be.copy(vh, d.chunk_rows(dvs, j, d.chunk(p, h)));
      }
  }
  cp.group->reduce_scatter(all, mine, ReduceOp::Sum);
  count(1, (d.C - 1) * mine.numel(), dt);
  be.copy(dk, mine.slice_rows(0, d.n));
  be.copy(dv, mine.slice_rows(d.n, 2 * d.n));
}

}  // namespace

Tensor cp_positions(int b, int s, const ContextParallel& cp) {
  cp_detail::check_chunks(cp, s);
  const int64_t sl = s / cp.size, cs = s / (2 * cp.size);
  Tensor pos = Tensor::empty({int64_t(b) * sl}, DType::I32);
  int32_t* p = pos.data<int32_t>();
  for (int j = 0; j < b; ++j)
    for (int64_t i = 0; i < sl; ++i) {
      if (cp.size == 1) {
        p[j * sl + i] = int32_t(i);
        continue;
      }
      const int64_t h = i / cs, c = h == 0 ? cp.rank : 2 * cp.size - 1 - cp.rank;
      p[j * sl + i] = int32_t(c * cs + i % cs);
    }
  return pos;
}

void cp_attention_forward(Backend& be, const ContextParallel& cp, const Tensor& q, const Tensor& k, const Tensor& v,
                          Tensor& y, CpAttnCache& cache, int b, int s, int a, int g, int hd) {
  check_group(cp, s);
  cache = CpAttnCache{};
  if (cp.size == 1) {
    cache.lse = be.empty({b, a, s}, acc_dtype(q.dtype()));
    be.flash_attention_forward(y, cache.lse, q, k, v, b, s, s, a, g, hd, 0, 0, true);
  } else {
    const Dims d(cp, b, s, a, g, hd);
    switch (cp.comm) {
      case CpComm::P2P: p2p_forward(be, cp, d, q, k, v, y, cache); break;
      case CpComm::AllGather: allgather_forward(be, cp, d, q, k, v, y, cache); break;
      case CpComm::A2A: cp_detail::a2a_forward(be, cp, d, q, k, v, y, cache); break;
    }
  }
  cache.y = y;
}

void cp_attention_backward(Backend& be, const ContextParallel& cp, const Tensor& dy, const Tensor& q, const Tensor& k,
                           const Tensor& v, const CpAttnCache& cache, Tensor& dq, Tensor& dk, Tensor& dv, int b,
                           int s, int a, int g, int hd) {
  check_group(cp, s);
  if (cp.size == 1) {  // one block: its gradients are the whole
    be.flash_attention_backward(dq, dk, dv, dy, q, k, v, cache.y, cache.lse, b, s, s, a, g, hd, 0, 0, true, false);
    return;
  }
  const Dims d(cp, b, s, a, g, hd);
  switch (cp.comm) {
    case CpComm::P2P: p2p_backward(be, cp, d, dy, q, k, v, cache, dq, dk, dv); break;
    case CpComm::AllGather: allgather_backward(be, cp, d, dy, q, k, v, cache, dq, dk, dv); break;
    case CpComm::A2A: cp_detail::a2a_backward(be, cp, d, dy, cache, dq, dk, dv); break;
  }
}

}  // namespace ptdp
