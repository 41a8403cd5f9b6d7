#include "core/sim/precision_knobs.h"

namespace ptdp::sim {

// RunConfig does not carry these fields yet (they come with the executor's flags): every run reads
// Megatron's defaults. Where the fields exist, this is the one place that reads them.
PrecisionKnobs precision_knobs(const RunConfig&) { return PrecisionKnobs{}; }

}  // namespace ptdp::sim
