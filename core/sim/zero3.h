// ZeRO-3 as DeepSpeed's stage-3 engine runs it (the paper's Table 2 / Figure 10 comparison): a
// replay of one iteration module by module. Parameters are sharded over the data-parallel group;
// before a module runs, its shard-gathered weights are fetched (all-gather) and the device is
// synchronised; the next module's weights are prefetched on the communication stream while the
// current one computes; after use they are freed unless used again soon (max_reuse_distance), so
// the recomputed forward and the backward gather them again; weight gradients go into buckets
// that are reduce-scattered on a reduction stream. Gathers and reduce-scatters share the NIC.
#pragma once
#include "core/config/run_config.h"
#include "core/sim/cost_model.h"

namespace ptdp::sim {

struct Zero3Timeline {
  double end_s = 0;            // forward and backward of all micro-batches, reductions done
  double compute_s = 0;        // busy computing (forward, recomputation, backward)
  double forward_s = 0, backward_s = 0;  // the two parts of compute_s (backward with recomputation)
  double comm_s = 0;           // NIC busy gathering and reduce-scattering
  double gathers = 0;          // all-gathers issued in one iteration
  double gather_bytes = 0;     // gathered per device in one iteration (what it receives)
  double reduce_bytes = 0;     // reduce-scattered per device in one iteration
  double exposed_comm_s = 0;   // end_s - compute_s: communication not hidden behind compute
  double peak_gathered = 0;    // most gathered parameter elements resident at once
};

// `cfg` must have zero = 3, tp = pp = 1; `cm` its cost model. UsageError otherwise.
Zero3Timeline replay_zero3(const RunConfig& cfg, const CostModel& cm);

// Elements of the parameters DeepSpeed does not partition (tensors below the persistence
// threshold: biases and LayerNorms of ordinary sizes), on every device in full.
double zero3_persistent_params(const RunConfig& cfg, const Zero3Options& o);

// Bytes of the gathered-parameter working set on a device: the module computing and the one
// prefetched (their full weights), the computing module's weight gradient, and the two reduce
// buckets (DeepSpeed double-buffers them when reduction overlaps).
double zero3_gathered_bytes(const RunConfig& cfg, const Zero3Options& o);

}  // namespace ptdp::sim
