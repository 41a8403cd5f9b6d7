// Causal self-attention over a sequence split across a context-parallel group (Megatron-core's
// --context-parallel-size C, --cp-comm-type): the sequence is cut into 2C chunks of s/(2C) tokens
// and rank i holds chunks i and 2C-1-i (each rank then has the same share of the causal work).
// The three exchanges (p2p ring, a2a Ulysses, allgather) give every rank's rows the attention
// that one rank computes over the whole sequence; built on the backend's block-attention ops.
#pragma once
#include <cstdint>

#include "core/backend/backend.h"
#include "core/comm/communicator.h"
#include "core/comm/cp_comm.h"

namespace ptdp {

struct ContextParallel {            // a context-parallel group; size 1: no context parallelism
  Communicator* group = nullptr;    // null when size == 1
  int size = 1, rank = 0;
  CpComm comm = CpComm::P2P;
};

// Positions of this rank's rows within their sequence: for each of b sequences, s/size rows:
// first chunk `rank` (s/(2 size) tokens), then chunk 2 size - 1 - rank. Returned as i32 [b*s/size]
// host tensor. Size 1: 0..s-1 per sequence.
Tensor cp_positions(int b, int s, const ContextParallel& cp);

// What backward needs (kept by the layer between forward and backward; recomputation may drop
// and rebuild it). y: the output; lse: the log-sum-exp of the rows (size 1: [b, a, s]; p2p and
// allgather: [2b, a, s/(2C)], per sequence its two local chunks; a2a: [b, a/C, s], the whole
// sequence for this rank's heads). a2a also keeps its full-sequence q, k, v and y of its heads.
struct CpAttnCache {
  Tensor y, lse;
  Tensor q_full, k_full, v_full, y_full;  // a2a
};

// q [b*sl, a*hd], k, v [b*sl, g*hd] of this rank's rows (sl = s/size, rows ordered as
// cp_positions); y [b*sl, a*hd]. a and g are the heads and query groups this rank computes (of
// its tensor-parallel shard). Needs s divisible by 2 size (size > 1). a2a also needs a divisible
// by size and g and size dividing one another (g < size: each kv head goes, replicated, to the
// size/g ranks whose query heads read it); otherwise RuntimeError naming --cp-comm-type.
void cp_attention_forward(Backend& be, const ContextParallel& cp, const Tensor& q, const Tensor& k, const Tensor& v,
                          Tensor& y, CpAttnCache& cache, int b, int s, int a, int g, int hd);
// dq dk dv overwritten.
void cp_attention_backward(Backend& be, const ContextParallel& cp, const Tensor& dy, const Tensor& q, const Tensor& k,
                           const Tensor& v, const CpAttnCache& cache, Tensor& dq, Tensor& dk, Tensor& dv, int b,
                           int s, int a, int g, int hd);

// Counters of the exchange for tests and the simulator's check: steps and bytes sent by this
// rank (thread-local, reset by the caller). n = b·s/C rows, e the element bytes, B = n·g·hd·e the
// bytes of this rank's K (or V) rows:
//   p2p       forward  C-1 steps, (C-1)·2B         K and V passed to the next rank
//             backward C steps,   (C-1)·2B + C·2B  K and V C-1 times; dK and dV C times, the last
//                                                  bringing each rank the sums for its own rows
//   allgather forward  1 step,    (C-1)·2B         all_gather of K and V (a ring's share)
//             backward 2 steps,   2·(C-1)·2B       K and V gathered again; dK, dV reduce-scattered
//   a2a       forward  2 steps,   (C-1)·n·(2·wq + 2·wk)·e   to each peer q, k, v of its heads, then
//             backward 2 steps,   the same                  y back (backward: dy; dq, dk, dv back)
//   where wq = (a/C)·hd and wk = max(g/C, 1)·hd are the columns of one peer's query and kv heads.
struct CpCommStats {
  int64_t steps = 0, bytes_sent = 0;
};
CpCommStats& cp_comm_stats();  // thread-local, reset by the caller

}  // namespace ptdp
