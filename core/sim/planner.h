// The planner: searches tensor, context, pipeline and data parallel sizes, interleaving,
// micro-batch size, schedule and recomputation for a model on N devices, drops what does not fit in
// memory, and ranks the rest by simulated throughput; also evaluates the paper's heuristic choice.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/model/config.h"
#include "core/sim/hardware.h"
#include "core/sim/simulator.h"

namespace ptdp::sim {

// Bounds of a plan request: a training run's world bound (validate_run), and a batch that keeps
// every product of the search inside 32 bits.
inline constexpr int kMaxPlanGpus = 1 << 20;
inline constexpr int kMaxPlanGlobalBatch = 1 << 24;

struct PlanRequest {
  ModelConfig model;
  int gpus = 0;
  int global_batch = 0;
  std::optional<Precision> precision;          // none: the profile's default
  std::vector<int> micro_batches = {1, 2, 4, 8, 16};
  int max_vpp = 8;                             // largest interleaving degree tried
  // Largest context-parallel size c tried, in powers of two (under a stack with context
  // parallelism, stack.h; c = 1 only otherwise): c must divide N / t and s / 2.
  int max_cp = 8;
  int top = 10;                                // how many of the best to keep
  bool exhaustive = false;                     // simulate every layout that fits (no pruning)
  // Sharded data parallelism to try (--zero-modes): 0 plain; 1 the distributed optimizer (d > 1);
  // 3 ZeRO-3 (t = p = 1, d > 1).
  std::vector<int> zero_modes = {0};
  // The software (stack.h). Under megatron-2022 and mcore every layout with t > 1 runs sequence
  // parallelism, as those codes' runs do; under megatron-deepspeed only what its engine runs
  // (stack_refusal) is tried.
  StackKind stack = StackKind::Megatron2021;
  // Called after each simulated layout with the count so far and the most it can reach (the
  // layouts that fit); for progress output. May be empty.
  std::function<void(int64_t simulated, int64_t at_most)> progress;
};

struct PlanEntry {
  RunConfig cfg;
  SimResult result;
  // For c > 1: why context parallelism, against the same layout with its c ranks given to d
  // instead (cp_reason); empty for c = 1.
  std::string why;
};

struct PlanResult {
  std::vector<PlanEntry> best;            // the `top` best, fastest first
  std::optional<PlanEntry> heuristic;     // the paper's choice; empty when nothing fits
  std::string heuristic_note;             // why it is what it is (or why there is none)
  long long layouts = 0;                  // configurations enumerated
  long long fit = 0;                      // of them fitting in memory
  long long simulated = 0;                // replayed (the rest were pruned by a lower bound)
};

// UsageError when the request is impossible (no layout divides the model and the batch).
PlanResult plan(const PlanRequest& req, const HardwareProfile& hw, const SimOptions& opt = {});

// Why `e` (c > 1) runs context parallelism: the same t, p, v, b, schedule and recomputation with
// c = 1 and d c data-parallel ranks, as "memory: ..." when that does not fit, "batch: ..." when d c
// does not divide the global batch (or the interleaved schedule's micro-batches), else "compute:
// ..." with both iteration times and bubbles. Empty for c = 1.
std::string cp_reason(const PlanEntry& e, const HardwareProfile& hw, const SimOptions& opt = {});

// The layer placements the planner tries for p stages of v chunks: the even split when p v divides
// the layers; uneven ones (Megatron-core's --decoder-first/last-pipeline-num-layers) with lighter
// first and last stages, which also hold the embedding and the output layer; and the embedding
// and/or the loss counted as a layer (--account-for-embedding/loss-in-pipeline-split). Valid
// splits only, no placement twice; empty when no placement exists.
std::vector<LayerSplit> stage_splits(int layers, int p, int v);

// The paper's heuristic (takeaways #1-#3): t = devices per node (or the largest divisor of the
// heads below it), then the smallest p whose layout fits in memory (1F1B, full recomputation),
// then d = N / (t p), and the best micro-batch size for that layout.
std::optional<PlanEntry> paper_heuristic(const PlanRequest& req, const HardwareProfile& hw, const SimOptions& opt,
                                         std::string* note = nullptr);

}  // namespace ptdp::sim
