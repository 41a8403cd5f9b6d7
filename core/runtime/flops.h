// The paper's accounting: parameters by Eq. (2), FLOPs per iteration by Eq. (3) (with
// activation recomputation, factor 96) and model FLOPs without recomputation (factor 72).
#pragma once
#include <cstdint>

#include "core/model/config.h"

namespace ptdp {

// Eq. (2): P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)).
double params_eq2(const ModelConfig& c);
// Parameters the model really holds (unpadded vocabulary): Eq. (2) plus the final LayerNorm.
int64_t params_exact(const ModelConfig& c);
// Eq. (3): F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)); counts the recomputed forward pass.
double flops_eq3(const ModelConfig& c, int64_t global_batch);
// Model FLOPs, no recomputation: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).
double flops_model(const ModelConfig& c, int64_t global_batch);

}  // namespace ptdp
