// Software stacks (--stack) and sequence parallelism in the performance model: what each stack
// changes, Korthikanti et al.'s activation formula with sequence parallelism, and that the
// paper's stack leaves every existing prediction as it was.
#include "core/sim/stack.h"

#include <gtest/gtest.h>

#include "core/common/error.h"
#include "core/sim/memory_model.h"
#include "core/sim/network.h"
#include "core/sim/paper_setups.h"
#include "core/sim/simulator.h"
#include "core/sim/testing/paper_data.h"

namespace ptdp::sim {
namespace {

using testing::selene;

TEST(SimStack, NamesAndWhatEachHas) {
  EXPECT_EQ(enum_choices<StackKind>(), "megatron-2021, megatron-2022, mcore, megatron-deepspeed or ptdp");
  const SoftwareStack old = software_stack(StackKind::Megatron2021);
  EXPECT_FALSE(old.tp_backward_overlap || old.fused_grad_accumulation || old.flash_attention || old.tp_comm_overlap ||
               old.dp_overlap || old.param_gather_overlap || old.free_pipeline_outputs);
  const SoftwareStack k22 = software_stack(StackKind::Megatron2022);
  EXPECT_TRUE(k22.tp_backward_overlap && k22.fused_grad_accumulation && k22.free_pipeline_outputs);
  EXPECT_FALSE(k22.flash_attention || k22.tp_comm_overlap || k22.dp_overlap);
  EXPECT_EQ(k22.grad_bytes, 4);  // fused accumulation runs only on fp32 main gradients
  EXPECT_EQ(old.grad_bytes, 0);  // the simulator's default: fp16, as Megatron v2.5
  const SoftwareStack mc = software_stack(StackKind::Mcore);
  EXPECT_TRUE(mc.flash_attention && mc.tp_comm_overlap && mc.dp_overlap && mc.param_gather_overlap);
  EXPECT_EQ(mc.grad_bytes, 4);
  const SoftwareStack own = software_stack(StackKind::Ptdp);  // ptdp's executor: its kernels, f32 gradients, no overlap
  EXPECT_TRUE(own.ptdp_kernels && own.fused_grad_accumulation && own.free_pipeline_outputs && own.sequence_parallel);
  EXPECT_FALSE(own.tp_backward_overlap || own.flash_attention || own.tp_comm_overlap || own.dp_overlap ||
               own.deepspeed_engine || own.fused_causal_softmax_max_seq > 0);
  EXPECT_EQ(own.grad_bytes, 4);
  try {
    parse_enum<StackKind>("megatron-2023", "--stack");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--stack 'megatron-2023' must be megatron-2021, megatron-2022, mcore, megatron-deepspeed or ptdp");
  }
}

// Korthikanti et al. 2022, Table 2 (E = 2 bytes): sequence parallelism divides the replicated
// 10 sbh by t: sbh(34/t + 5as/(ht)) without recomputation, 34 sbh/t selective, 2 sbh/t full.
TEST(SimStack, SequenceParallelActivationsAreKorthikantisFormula) {
  RunConfig c = paper_run(80, 12288, 96, 8, 16, 1, 1, 16);
  c.par.sequence_parallel = true;
  const double sbh = 2048.0 * 12288, t = 8, a = 96, s = 2048, h = 12288;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(c, Recompute::None), sbh * (34 / t + 5 * a * s / (h * t)));
  EXPECT_DOUBLE_EQ(layer_activation_bytes(c, Recompute::Selective), sbh * 34 / t);
  EXPECT_DOUBLE_EQ(layer_activation_bytes(c, Recompute::Full), 2 * sbh / t);
  // Flash attention (mcore) keeps 4 bytes of softmax statistics per (row, head) instead of the scores.
  c.stack = StackKind::Mcore;
  EXPECT_DOUBLE_EQ(layer_activation_bytes(c, Recompute::None), sbh * 34 / t + 4 * a * s / t);
}

// Sequence parallelism moves the same bytes (an all-reduce is a reduce-scatter plus an
// all-gather), divides the replicated element-wise work by t, and sends 1/t of the activation
// between stages with nothing to gather after.
TEST(SimStack, SequenceParallelismSplitsTheReplicatedWorkAndThePipelineSends) {
  RunConfig c = paper_run(96, 12288, 96, 8, 8, 1, 1, 64);
  const CostModel off(c, selene());
  c.par.sequence_parallel = true;
  const CostModel on(c, selene());
  EXPECT_LT(on.layer.forward.membound, off.layer.forward.membound);
  EXPECT_NEAR(on.layer.forward.tp_comm, off.layer.forward.tp_comm, 0.1 * off.layer.forward.tp_comm);
  EXPECT_DOUBLE_EQ(on.layer.forward.gemm, off.layer.forward.gemm);
  EXPECT_EQ(on.gather, 0.0);
  EXPECT_GT(off.gather, 0.0);  // scatter/gather's all-gather after each receive
  EXPECT_DOUBLE_EQ(on.send_cross, off.send_cross);  // both send b*s*h/t per rank
}

// The 2022 code hides the backward's tensor-parallel all-reduces behind the weight-gradient GEMMs
// and accumulates gradients in the GEMM; the forward is unchanged.
TEST(SimStack, The2022CodeOverlapsTheBackwardAllReduce) {
  RunConfig c = paper_run(96, 12288, 96, 8, 8, 1, 1, 64);
  const CostModel old(c, selene());
  c.stack = StackKind::Megatron2022;
  const CostModel now(c, selene());
  EXPECT_DOUBLE_EQ(now.layer.forward.total(), old.layer.forward.total());
  EXPECT_LT(now.layer.backward.tp_comm, 0.5 * old.layer.backward.tp_comm);
  EXPECT_LT(now.layer.backward.membound, old.layer.backward.membound);  // no accumulation pass
  EXPECT_DOUBLE_EQ(now.layer.backward.gemm, old.layer.backward.gemm);
}

// The overlap is not free: NCCL's 24 channels hold 24 of the A100's 108 SMs while each backward
// all-reduce runs, and the weight-gradient GEMM beside it loses that SM time. For GPT-3's layer at
// t = 8 each all-reduce (25 MB) is shorter than its GEMM, so each exposes c * 24 / 108.
TEST(SimStack, The2022CodesOverlapCostsTheSmsNcclHolds) {
  RunConfig c = paper_run(96, 12288, 96, 8, 8, 1, 1, 64);
  c.stack = StackKind::Megatron2022;
  HardwareProfile free_overlap = selene();
  ASSERT_EQ(free_overlap.nccl_channels, 24);
  ASSERT_EQ(free_overlap.sms, 108);
  free_overlap.nccl_channels = 0;
  const CostModel charged(c, selene()), free(c, free_overlap);
  const double c_ar = Network(selene()).allreduce(2.0 * 2048 * 12288, 8, 8);
  EXPECT_NEAR(charged.layer.backward.tp_comm - free.layer.backward.tp_comm, 2 * c_ar * 24 / 108, 1e-12);
  EXPECT_DOUBLE_EQ(charged.layer.forward.total(), free.layer.forward.total());
  // The 2021 code's all-reduces are synchronous: nothing runs beside them, nothing to charge.
  c.stack = StackKind::Megatron2021;
  EXPECT_DOUBLE_EQ(CostModel(c, selene()).layer.backward.tp_comm, CostModel(c, free_overlap).layer.backward.tp_comm);
}

// Megatron's fused causal softmax reads only the scores on and below the diagonal: forward 3
// bytes a score instead of 4 (read half, write all), backward 4 instead of 6. The 2021 code takes
// s <= 2048, the 2022 code s <= 4096; beyond, PyTorch's softmax reads and writes every score.
TEST(SimStack, TheFusedCausalSoftmaxReadsTheLowerTriangle) {
  RunConfig c = paper_run(96, 12288, 96, 8, 8, 1, 1, 64);
  EXPECT_TRUE(fused_causal_softmax(software_stack(StackKind::Megatron2021), c));
  EXPECT_TRUE(fused_causal_softmax(software_stack(StackKind::Megatron2022), c));
  EXPECT_TRUE(fused_causal_softmax(software_stack(StackKind::MegatronDeepspeed), c));
  EXPECT_FALSE(fused_causal_softmax(software_stack(StackKind::Mcore), c));  // flash attention
  RunConfig odd = c;
  odd.model.heads = 48;  // b * a/t = 6 attention batches: not a multiple of 4
  EXPECT_FALSE(fused_causal_softmax(software_stack(StackKind::Megatron2021), odd));
  RunConfig f32 = c;
  f32.precision = Precision::F32;
  EXPECT_FALSE(fused_causal_softmax(software_stack(StackKind::Megatron2021), f32));
  RunConfig tiny = c;
  tiny.model.seq_length = 128;  // the 2022 kernel's 8 batches a block; 12 is not a multiple
  EXPECT_TRUE(fused_causal_softmax(software_stack(StackKind::Megatron2021), tiny));
  EXPECT_FALSE(fused_causal_softmax(software_stack(StackKind::Megatron2022), tiny));

  c.model.seq_length = 4096;
  const CostModel pytorch(c, selene());  // 2021: s > 2048
  c.stack = StackKind::Megatron2022;
  const CostModel fused(c, selene());
  const HardwareProfile hw = selene();
  const double scores = 1.0 * (96 / 8) * 4096 * 4096, rate = hw.memory_bw * hw.membound_efficiency;
  EXPECT_NEAR(pytorch.layer.forward.membound - fused.layer.forward.membound, 1.0 * scores / rate, 1e-12);
  EXPECT_DOUBLE_EQ(pytorch.layer.forward.gemm, fused.layer.forward.gemm);
}

// Flash attention: no s x s memory traffic, half the attention products under the causal mask.
TEST(SimStack, FlashAttentionHasNoScoreTraffic) {
  RunConfig c = paper_run(96, 12288, 96, 8, 8, 1, 1, 64);
  c.stack = StackKind::Megatron2022;
  const CostModel unfused(c, selene());
  c.stack = StackKind::Mcore;
  const CostModel flash(c, selene());
  EXPECT_LT(flash.layer.forward.attention, unfused.layer.forward.attention);
  EXPECT_LT(flash.layer.forward.membound, unfused.layer.forward.membound);
  EXPECT_LT(memory_verdict(c, selene()).peak, [&] {
    RunConfig u = c;
    u.stack = StackKind::Megatron2022;
    return memory_verdict(u, selene()).peak;
  }());
}

}  // namespace
}  // namespace ptdp::sim
