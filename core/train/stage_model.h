// The model chunks one rank holds: for pipeline stage `stage` of p with v chunks each, chunk j
// has Megatron's layers j*(L/v) + stage*(L/(p*v)) ..., or with uneven first and last stages
// Megatron-core's placement (core/model/layer_split.h); the embedding sits on stage 0 chunk 0,
// the head on stage p-1 chunk v-1; each chunk is this rank's tensor-parallel slice.
#pragma once
#include <memory>
#include <vector>

#include "core/model/gpt.h"
#include "core/model/layer_split.h"

namespace ptdp {

struct StageModel {
  std::vector<std::unique_ptr<Gpt>> chunks;
  std::vector<Gpt*> pointers() const;
  int64_t parameters() const;  // on this rank
};

// tp: the tensor-parallel group (size t, may be null when t = 1). Weights are initialised
// from the seed (the same logical weights whatever the layout). The layers of `stage` as `split`
// places them (split.layers must be c.layers); sequence_parallel: t > 1 only.
StageModel build_stage_model(const ModelConfig& c, int t, int tp_rank, int stage, const LayerSplit& split,
                             Backend& be, Communicator* tp, uint64_t seed, DType dtype, bool sequence_parallel);
// The same with the layers split evenly over p stages of v chunks, f32, no sequence parallelism.
StageModel build_stage_model(const ModelConfig& c, int t, int tp_rank, int p, int stage, int v, Backend& be,
                             Communicator* tp, uint64_t seed);

}  // namespace ptdp
