// The simulator's context-parallel transfers against the executor's own exchange counters
// (core/model/context_attention.h): the same shapes run on CPU ranks and listed by the cost model.
// The forward volumes agree for every variant; the ring's backward differs by one block, the dK dV
// hop home that ptdp's executor takes and Transformer Engine (which --stack mcore stands for) folds
// into its last step (docs/SIMULATOR.md, "Context parallelism").
#include <gtest/gtest.h>

#include "core/backend/backend.h"
#include "core/comm/local/local_comm.h"
#include "core/model/context_attention.h"
#include "core/sim/kernel_builder.h"
#include "core/sim/stack.h"

namespace ptdp::sim {
namespace {

constexpr int kS = 32, kA = 4, kHd = 16;

// Bytes and messages the simulator lists for one rank's attention of one layer, by pass.
struct Listed {
  int64_t fwd_bytes = 0, bwd_bytes = 0;
  int fwd_items = 0, bwd_items = 0;
};

// Sent bytes of a collective item: a send-recv its block; an all-gather, reduce-scatter or
// all-to-all (c-1)/c of its buffer (what a ring or a pairwise exchange sends from each rank).
int64_t sent(const Kernel& k, int cp) {
  if (k.collective == Collective::SendRecv) return int64_t(k.bytes);
  return int64_t(k.bytes * (cp - 1) / cp);
}

Listed listed(int cp, CpComm comm, int b, int g) {
  RunConfig c;
  c.model = preset_config("llama-tiny");
  c.model.query_groups = g;
  c.model.seq_length = kS;
  c.par.cp = cp, c.par.cp_comm = comm, c.par.micro_batch = b;
  c.precision = Precision::F32;
  SoftwareStack stack = software_stack(StackKind::Mcore);
  stack.cp_comm_types = true;
  const ModelTensors tensors = model_tensors(c.model, c.model.padded_vocab(1));
  KernelList list;
  layer_kernels(list, layer_shape(c, tensors, 4), stack, c);
  Listed out;
  for (const Kernel& k : list) {
    if (k.group != Group::Context) continue;
    (k.phase == Phase::Forward ? out.fwd_bytes : out.bwd_bytes) += sent(k, cp);
    (k.phase == Phase::Forward ? out.fwd_items : out.bwd_items) += 1;
  }
  return out;
}

struct Counted {
  CpCommStats fwd, bwd;
};

// Rank 0's counters over one forward and backward of the executor's attention.
Counted counted(int cp, CpComm comm, int b, int g) {
  Counted out;
  const int64_t rows = int64_t(b) * kS / cp;
  run_local_ranks(cp, [&](int rank, Communicator& group) {
    auto be = make_cpu_backend();
    const ContextParallel ctx{&group, cp, rank, comm};
    Tensor q = Tensor::zeros({rows, kA * kHd}, DType::F32), k = Tensor::zeros({rows, g * kHd}, DType::F32),
           v = Tensor::zeros({rows, g * kHd}, DType::F32), y = Tensor::zeros({rows, kA * kHd}, DType::F32);
    Tensor dq = Tensor::zeros(q.shape(), DType::F32), dk = Tensor::zeros(k.shape(), DType::F32),
           dv = Tensor::zeros(v.shape(), DType::F32);
    CpAttnCache cache;
    cp_comm_stats() = {};
    cp_attention_forward(*be, ctx, q, k, v, y, cache, b, kS, kA, g, kHd);
    const CpCommStats fwd = cp_comm_stats();
    cp_comm_stats() = {};
    cp_attention_backward(*be, ctx, y, q, k, v, cache, dq, dk, dv, b, kS, kA, g, kHd);
    if (rank == 0) out = {fwd, cp_comm_stats()};
  });
  return out;
}

TEST(SimCpExecutor, TheRingsVolumesAndStepsMatchTheExecutorsCounters) {
  for (int cp : {2, 4})
    for (int g : {4, 2}) {
      const Listed sim = listed(cp, CpComm::P2P, 2, g);
      const Counted run = counted(cp, CpComm::P2P, 2, g);
      const int64_t block = int64_t(2) * 2 * kS / cp * g * kHd * 4;  // K and V of this rank's rows, f32
      EXPECT_EQ(sim.fwd_items, run.fwd.steps) << cp << " " << g;
      EXPECT_EQ(sim.fwd_bytes, run.fwd.bytes_sent) << cp << " " << g;
      EXPECT_EQ(sim.bwd_items, run.bwd.steps) << cp << " " << g;
      EXPECT_EQ(sim.bwd_bytes + block, run.bwd.bytes_sent) << cp << " " << g << ": the executor's dK dV hop home";
    }
}

TEST(SimCpExecutor, AllGatherAndA2aSendWhatTheExecutorSends) {
  for (int cp : {2, 4})
    for (CpComm comm : {CpComm::AllGather, CpComm::A2A}) {
      const Listed sim = listed(cp, comm, 1, 4);  // g >= c: no replicated key/value heads
      const Counted run = counted(cp, comm, 1, 4);
      EXPECT_EQ(sim.fwd_bytes, run.fwd.bytes_sent) << cp << " " << enum_name(comm);
      EXPECT_EQ(sim.bwd_bytes, run.bwd.bytes_sent) << cp << " " << enum_name(comm);
    }
}

}  // namespace
}  // namespace ptdp::sim
