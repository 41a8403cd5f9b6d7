// Simulates one training iteration of a RunConfig on a hardware profile: replays the schedule's
// actions stage by stage with the cost model's durations, then the data-parallel all-reduce and
// the optimizer step; reports iteration time, TFLOP/s per GPU (Eq. 3), bubble and memory.
#pragma once
#include "core/config/run_config.h"
#include "core/sim/cost_model.h"
#include "core/sim/hardware.h"
#include "core/sim/memory_model.h"
#include "core/sim/zero3.h"

namespace ptdp::sim {

struct SimResult {
  double iter_time_s = 0;
  double pipeline_time_s = 0;   // forward/backward of all micro-batches (the replay's makespan)
  double post_time_s = 0;       // after the pipeline: gradient all-reduces, optimizer (worst stage)
  double dp_allreduce_s = 0;    // data-parallel all-reduce of the worst stage (0 when overlapped)
  double optimizer_s = 0;
  // The worst stage's time after its pipeline, part by part (they and model_sync_s sum to
  // post_time_s): its gradient reduction's time past the schedule's end (all of it, or what the
  // backward did not hide), the embedding all-reduce, the parameter all-gather's exposed part
  // (sharded optimizers), and the model-parallel gradient-norm and inf syncs every stage waits on.
  double dp_reduce_exposed_s = 0, embedding_allreduce_s = 0, param_gather_s = 0, model_sync_s = 0;
  bool dp_overlapped = false;  // the reduction ran beside the backward (bucket by bucket)
  double bubble_fraction = 0;   // the paper's t_pb / t_id, p2p waits included in t_pb
  double tflops_per_gpu = 0;    // Eq. (3) FLOPs / (iteration time * GPUs)
  double model_tflops_per_gpu = 0;
  double pct_peak = 0;          // tflops_per_gpu over the profile's peak, in percent
  double tokens_per_s = 0, seq_per_s = 0;
  LayerCosts layer;             // one layer, one micro-batch
  MemoryVerdict memory;
  // The first stage's share, as `ptdp train` reports rank 0's (docs/RESULTS.md).
  struct {
    double forward_s = 0, backward_s = 0;  // compute (backward with recomputation)
    double p2p_wait_s = 0;                 // blocked in receives
    double dp_s = 0;                       // data-parallel and embedding all-reduces after the schedule
    double optimizer_s = 0;
    double p2p_bytes = 0;                  // sent to other stages in one iteration
  } stage0;
  double activation_bytes = 0;  // the most activation bytes kept at once, on the fullest stage
  Zero3Timeline zero3;          // --zero 3: the replay's breakdown (zero3.h); empty otherwise
};

// `cfg` must have passed validate_run. Throws UsageError if the profile lacks the precision.
// The most micro-batches (times model chunks) per pipeline the replay simulates in one iteration
// (time and memory grow with them; 2^16 replays in well under a second).
inline constexpr int64_t kMaxSimMicrobatches = 65536;

// UsageError beyond kMaxSimMicrobatches.
SimResult simulate(const RunConfig& cfg, const HardwareProfile& hw, const SimOptions& opt = {});

// A lower bound on the iteration time (no bubble, no communication waits) for pruning searches.
double iteration_lower_bound(const RunConfig& cfg, const CostModel& cm);

}  // namespace ptdp::sim
