// FP8 under Transformer Engine's delayed-scaling recipe (--fp8-format; docs/SIMULATOR.md, "FP8"):
// the memory-bound kernels a linear layer's FP8 GEMM adds, the casts and the amax bookkeeping.
#include <cstring>

#include "core/sim/kernel_builder.h"

namespace ptdp::sim {

namespace {

// TE's fused cast-transpose: reads the 16-bit tensor once, writes its FP8 copy and the FP8
// transpose (Hopper's FP8 GEMMs take only the "TN" layout, so the backward's products need it).
constexpr double kCastTransposeBytes = 2 + 1 + 1;
// Delayed scaling keeps, per FP8 tensor, an fp32 amax history (TE's DelayedScaling default
// amax_history_len = 1024) that each pass rolls and reduces into a new scale; a layer's four
// linear GEMMs have three FP8 tensors each (input, weight, output; gradients in the backward).
constexpr double kAmaxHistory = 1024, kFp8TensorsPerLayer = 4 * 3;

}  // namespace

void fp8_casts(KernelBuilder& x, const Kernel& g) {
  const bool wgrad = g.detail != nullptr && std::strcmp(g.detail, "wgrad") == 0;
  if (wgrad) return;  // it multiplies the transposes made for the forward and the input gradient
  const bool forward = g.detail == nullptr;
  // The activation operand, [m, k]: the layer's input in the forward, the output's gradient in dgrad.
  x.membound(forward ? "fp8 cast-transpose input" : "fp8 cast-transpose grad", kCastTransposeBytes * g.m * g.k);
  // The weight, [k, n], cast on the step's first micro-batch and cached for the others.
  if (forward) x.membound("fp8 cast-transpose weight", kCastTransposeBytes * g.k * g.n * x.weight_cast_share);
}

void fp8_amax_update(KernelBuilder& x) {
  x.membound("fp8 amax history and scale update", 2 * 4 * kAmaxHistory * kFp8TensorsPerLayer);
}

}  // namespace ptdp::sim
