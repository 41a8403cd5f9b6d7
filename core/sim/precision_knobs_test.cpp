// Megatron-core's precision and overlap knobs in the simulator: bf16 gradient reduction, the
// precision-aware optimizer's state dtypes, the parameter all-gather beside the optimizer step.
#include "core/sim/precision_knobs.h"

#include <gtest/gtest.h>

#include "core/sim/memory_model.h"
#include "core/sim/paper_setups.h"
#include "core/sim/simulator.h"

namespace ptdp::sim {
namespace {

// Nemotron-4 340B (96 layers, h 18432, 96 heads, 8 key/value groups, squared-ReLU MLP of 73728,
// untied 256000-token vocabulary, RoPE, no biases, s 4096) as NVIDIA's DGX Cloud benchmarking
// recipe ran it on H100 (dgxc-benchmarking, nemotron4-340b/README.md: 256 GPUs, TP 8, PP 8, CP 1,
// DP 4, VP 12, MBS 1, GBS 64). ptdp's llama layer with a SwiGLU of 49152 has the same parameters,
// FLOPs and MLP activations (3 * 49152 = 2 * 73728).
RunConfig nemotron340b() {
  RunConfig c = paper_run(96, 18432, 96, 8, 8, 4, 1, 64, 12);
  c.model.arch = Arch::Llama;
  c.model.query_groups = 8;
  c.model.ffn_hidden_size = 49152;
  c.model.vocab_size = 256000;
  c.model.seq_length = 4096;
  c.precision = Precision::Bf16;
  c.stack = StackKind::Mcore;
  c.par.sequence_parallel = true;
  c.par.recompute = Recompute::None;
  c.par.zero = 1;
  validate_run(c);
  return c;
}

// NeMo's settings for it: bf16 gradient reduction, the gather beside the step.
RunConfig with_nemo_knobs(RunConfig c) {
  c.grad_reduce_bf16 = true;
  c.overlap_param_gather_with_optimizer_step = true;
  validate_run(c);
  return c;
}

TEST(SimPrecisionKnobs, TheyAreTheRunsFields) {
  RunConfig c = with_nemo_knobs(nemotron340b());
  c.opt.precision_aware = true;
  c.opt.exp_avg_dtype = DType::BF16;
  c.opt.main_params_dtype = DType::F16;
  const PrecisionKnobs k = precision_knobs(c);
  EXPECT_TRUE(k.grad_reduce_bf16);
  EXPECT_TRUE(k.overlap_param_gather_with_optimizer_step);
  EXPECT_EQ(k.exp_avg_bytes, 2);
  EXPECT_EQ(k.exp_avg_sq_bytes, 4);
  EXPECT_EQ(k.main_param_bytes, 2);
  EXPECT_EQ(k.main_grad_bytes, 4);
}

TEST(SimPrecisionKnobs, Bf16GradientsAndMomentsShrinkTheDistributedOptimizersState) {
  RunConfig c = nemotron340b();
  const StateBytes plain = state_bytes(c);
  EXPECT_DOUBLE_EQ(plain.backward, 6 + 12.0 / 4);  // bf16 parameters, fp32 gradients
  EXPECT_DOUBLE_EQ(plain.step, plain.backward);
  c = with_nemo_knobs(c);
  c.opt.precision_aware = true;
  c.opt.exp_avg_dtype = c.opt.exp_avg_sq_dtype = DType::BF16;
  validate_run(c);
  const StateBytes low = state_bytes(c);
  EXPECT_DOUBLE_EQ(low.backward, 2 + 2 + (4 + 2 + 2) / 4.0);
  EXPECT_DOUBLE_EQ(low.step, low.backward + 4 / 4.0);  // the fp32 master gradient shard, in the step
}

TEST(SimPrecisionKnobs, Bf16ReductionHalvesTheDataParallelBytesAndBf16MomentsTheStepsTraffic) {
  const RunConfig c = nemotron340b();
  const HardwareProfile hw = load_profile("h100-dgx");
  const CostModel fp32(c, hw), bf16(with_nemo_knobs(c), hw);
  EXPECT_EQ(fp32.grad_bytes, 4);
  EXPECT_EQ(bf16.grad_bytes, 2);
  EXPECT_NEAR(bf16.dp_reduce_scatter(1e9) / fp32.dp_reduce_scatter(1e9), 0.5, 0.05);
  RunConfig m = c;
  m.opt.precision_aware = true;
  m.opt.exp_avg_dtype = m.opt.exp_avg_sq_dtype = DType::BF16;
  validate_run(m);
  const CostModel moments(m, hw);
  EXPECT_DOUBLE_EQ(fp32.optimizer_bytes_per_param - moments.optimizer_bytes_per_param, 2 * (2 + 2));
}

// The published layout ran: it must fit; and NeMo's settings hide the step's parameter gather.
TEST(SimPrecisionKnobs, Nemotron340BsPublishedLayoutFitsAndTheGatherHidesBehindTheStep) {
  const RunConfig c = nemotron340b();
  const HardwareProfile hw = load_profile("h100-dgx");
  const SimResult plain = simulate(c, hw), nemo = simulate(with_nemo_knobs(c), hw);
  EXPECT_TRUE(nemo.memory.fits) << nemo.memory.describe(hw.device);
  EXPECT_LT(nemo.dp_allreduce_s, plain.dp_allreduce_s);
  EXPECT_LT(nemo.iter_time_s, plain.iter_time_s);
}

}  // namespace
}  // namespace ptdp::sim
