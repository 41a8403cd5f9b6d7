// What a resume (--load) takes from its checkpoint beyond the layout: the learning-rate schedule,
// kept as Megatron-LM keeps it (OptimizerParamScheduler: a changed --lr, --min-lr, warm-up,
// decay or weight decay is refused unless --override-opt_param-scheduler keeps this run's or
// --use-checkpoint-opt_param-scheduler takes the checkpoint's), and the data (--data,
// --data-order, --split: a resume continues the same samples, so another is refused).
#pragma once
#include "core/config/run_config.h"

namespace ptdp {

// The configuration `c` resumes with: c itself, or with the checkpoint's schedule under
// --use-checkpoint-opt_param-scheduler. UsageError, one line naming the flag and both values, for
// a schedule or data setting that differs from the checkpoint's. Without --load: c. A checkpoint
// whose shard is missing, or that does not record a setting, is left to the load to judge.
RunConfig resume_config(const RunConfig& c);

// Whether --load names --save's directory and it holds no checkpoint yet: Megatron-LM's scripts give
// both one directory, and their first run starts from the initial weights.
bool loads_an_empty_save_dir(const RunConfig& c);

}  // namespace ptdp
