// Test helper for the simulator: a Megatron-core run of a model preset as NVIDIA's recipes set it
// (bf16, the distributed optimizer, no recomputation, b = 1, sequence parallelism with t > 1, the
// interleaved schedule with v > 1), checked with validate_run.
#pragma once
#include <string>

#include "core/config/run_config.h"
#include "core/model/config.h"

namespace ptdp::sim::testing {

// layers: the preset's when 0. Not validated: for settings to add before validate_run.
inline RunConfig mcore_settings(const std::string& preset, int tp, int cp, int pp, int dp, int vpp, int global_batch,
                                int layers = 0) {
  RunConfig c;
  c.experiment = "simulate";
  c.model = preset_config(preset);
  if (layers > 0) c.model.layers = layers;
  c.par.tp = tp, c.par.cp = cp, c.par.pp = pp, c.par.dp = dp, c.par.vpp = vpp;
  c.par.micro_batch = 1, c.par.global_batch = global_batch;
  c.par.schedule = vpp > 1 ? ScheduleKind::Interleaved : ScheduleKind::OneFOneB;
  c.par.recompute = Recompute::None;
  c.par.sequence_parallel = tp > 1;
  c.par.zero = 1;
  c.stack = StackKind::Mcore;
  c.backend = BackendKind::Cuda;
  c.precision = Precision::Bf16;
  return c;
}

inline RunConfig mcore_run(const std::string& preset, int tp, int cp, int pp, int dp, int vpp, int global_batch,
                           int layers = 0) {
  RunConfig c = mcore_settings(preset, tp, cp, pp, dp, vpp, global_batch, layers);
  validate_run(c);
  return c;
}

}  // namespace ptdp::sim::testing
