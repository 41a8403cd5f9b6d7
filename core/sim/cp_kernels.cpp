// The attention core under context parallelism (--context-parallel-size c > 1): Megatron-core with
// Transformer Engine's fused attention. Each rank holds sl = s/c tokens of every sequence, chunks i
// and 2c-1-i of 2c, so under the causal mask every rank computes 1/c of the sequence's attention
// whatever the variant; what differs is how the keys and values meet the queries
// (docs/SIMULATOR.md, "Context parallelism").
#include "core/sim/kernel_builder.h"

namespace ptdp::sim {

namespace {

// Flash attention's forward of q query rows against k keys for `batch` (micro-batch x heads)
// products; a causal block lists half of them, as the unsharded core does. Returns the index of
// its first kernel (two in all).
int flash_forward(KernelBuilder& x, const LayerShape& d, double q, double k, double batch, bool causal) {
  const int first = int(x.list.size());
  x.attention(causal ? "q k^T causal block (flash)" : "q k^T block (flash)", q, k, d.hd, causal ? batch / 2 : batch);
  x.attention(causal ? "p v causal block (flash)" : "p v block (flash)", q, d.hd, k, causal ? batch / 2 : batch);
  return first;
}

// Its backward: the scores recomputed, dP, dV, dQ, dK (five kernels from the index returned).
int flash_backward(KernelBuilder& x, const LayerShape& d, double q, double k, double batch, bool causal) {
  const int first = int(x.list.size());
  const double n = causal ? batch / 2 : batch;
  x.attention(causal ? "q k^T again causal block (flash)" : "q k^T again block (flash)", q, k, d.hd, n);
  x.attention(causal ? "dP causal block (flash)" : "dP block (flash)", q, k, d.hd, n);
  x.attention(causal ? "dV causal block (flash)" : "dV block (flash)", k, d.hd, q, n);
  x.attention(causal ? "dQ causal block (flash)" : "dQ block (flash)", q, d.hd, k, n);
  x.attention(causal ? "dK causal block (flash)" : "dK block (flash)", k, d.hd, q, n);
  return first;
}

// The bytes of this rank's key and value block: 2 b sl (g/t) hd elements.
double kv_block(const LayerShape& d) { return d.E * d.b * d.sl * d.kvt; }

// p2p (Transformer Engine's AttnFuncWithCPAndKVP2P): c steps; step 0 is the rank's own causal
// block (sl x sl), each later one sl queries against half a block (sl/2 keys: the load-balanced
// chunks make every off-diagonal pair half masked). The block for step i travels from the previous
// rank during step i-1: c-1 transfers, each exposed by what the step's attention does not hide.
void ring_forward(KernelBuilder& x, const LayerShape& d) {
  const double heads = d.b * d.at;
  int step = flash_forward(x, d, d.sl, d.sl, heads, true);
  for (int i = 1; i < d.cp; ++i) {
    x.cp_collective("k v block to the next rank", Collective::SendRecv, kv_block(d), Overlap::UnderKernels, step, 2);
    step = flash_forward(x, d, d.sl, d.sl / 2, heads, false);
  }
}

// The backward passes the key and value blocks around again (the forward kept only its own) and
// each block's dK dV after it, one transfer a step under that step's attention backward
// (Transformer Engine's AttnFuncWithCPAndKVP2P.backward, p2p_comm_buffers): step 0 sends the K V
// block, steps 1 .. c-2 the K V block and the dK dV accumulated so far together, step c-1 the
// dK dV alone: c-1 blocks of each, 2 (c-1) in all.
void ring_backward(KernelBuilder& x, const LayerShape& d) {
  const double heads = d.b * d.at;
  int step = flash_backward(x, d, d.sl, d.sl, heads, true);
  x.cp_collective("k v block to the next rank", Collective::SendRecv, kv_block(d), Overlap::UnderKernels, step, 5);
  for (int i = 1; i < d.cp; ++i) {
    step = flash_backward(x, d, d.sl, d.sl / 2, heads, false);
    const bool last = i == d.cp - 1;
    x.cp_collective(last ? "dk dv block to the next rank" : "k v and dk dv blocks to the next rank",
                    Collective::SendRecv, last ? kv_block(d) : 2 * kv_block(d), Overlap::UnderKernels, step, 5);
  }
}

// a2a (Ulysses, Transformer Engine's AttnFuncWithCPAndQKVOA2A): q, k and v each exchanged from
// sequence-sharded to head-sharded (all-to-alls), attention over the whole sequence on a/(t c) heads,
// the output exchanged back; the backward runs the transposes. None overlapped.
void a2a_forward(KernelBuilder& x, const LayerShape& d) {
  const double q = d.E * d.b * d.sl * d.ht, kv = kv_block(d) / 2;
  x.cp_collective("q to heads", Collective::AllToAll, q);
  x.cp_collective("k to heads", Collective::AllToAll, kv);
  x.cp_collective("v to heads", Collective::AllToAll, kv);
  flash_forward(x, d, d.s, d.s, d.b * d.at / d.cp, true);
  x.cp_collective("output to sequence", Collective::AllToAll, q);
}

void a2a_backward(KernelBuilder& x, const LayerShape& d) {
  const double q = d.E * d.b * d.sl * d.ht, kv = kv_block(d) / 2;
  x.cp_collective("output gradient to heads", Collective::AllToAll, q);
  flash_backward(x, d, d.s, d.s, d.b * d.at / d.cp, true);
  x.cp_collective("dq to sequence", Collective::AllToAll, q);
  x.cp_collective("dk to sequence", Collective::AllToAll, kv);
  x.cp_collective("dv to sequence", Collective::AllToAll, kv);
}

// allgather (AttnFuncWithCPAndKVAllGather): the keys and the values of the whole sequence
// all-gathered (one collective each) before the rank's queries attend to them causally; the
// backward gathers them again and reduce-scatters dK and dV.
void allgather_forward(KernelBuilder& x, const LayerShape& d) {
  const double one = kv_block(d) / 2 * d.cp;  // k (or v) of the whole sequence
  x.cp_collective("k", Collective::AllGather, one);
  x.cp_collective("v", Collective::AllGather, one);
  flash_forward(x, d, d.sl, d.s, d.b * d.at, true);
}

void allgather_backward(KernelBuilder& x, const LayerShape& d) {
  const double one = kv_block(d) / 2 * d.cp;
  x.cp_collective("k again", Collective::AllGather, one);
  x.cp_collective("v again", Collective::AllGather, one);
  flash_backward(x, d, d.sl, d.s, d.b * d.at, true);
  x.cp_collective("dk", Collective::ReduceScatter, one);
  x.cp_collective("dv", Collective::ReduceScatter, one);
}

}  // namespace

void cp_attention_forward(KernelBuilder& x, const LayerShape& d) {
  switch (d.cp_comm) {
    case CpComm::P2P: return ring_forward(x, d);
    case CpComm::A2A: return a2a_forward(x, d);
    case CpComm::AllGather: return allgather_forward(x, d);
  }
}

void cp_attention_backward(KernelBuilder& x, const LayerShape& d) {
  switch (d.cp_comm) {
    case CpComm::P2P: return ring_backward(x, d);
    case CpComm::A2A: return a2a_backward(x, d);
    case CpComm::AllGather: return allgather_backward(x, d);
  }
}

}  // namespace ptdp::sim
