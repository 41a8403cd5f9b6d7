// The GEMMs of a model's training step, as shapes: what `ptdp train --gemm-rate` and bench_cpu
// time OpenBLAS sgemm over (core/backend/cpu/gemm_rate.h).
#pragma once
#include <cstdint>
#include <vector>

#include "core/backend/cpu/gemm_rate.h"
#include "core/model/config.h"

namespace ptdp::cpu {

// The GEMMs of one layer's forward and backward pass and of the output layer, for `rows` tokens
// of one rank holding 1/tp of each matrix: QKV ((a + 2g) h/a columns with g query groups), projection, the MLP's (gpt: fc, fc2; llama:
// gate|up, down) and the logits, each as forward x w^T, input gradient dy w, weight gradient dy^T x.
std::vector<GemmShape> model_gemms(const ModelConfig& c, int64_t rows, int tp = 1);

}  // namespace ptdp::cpu
