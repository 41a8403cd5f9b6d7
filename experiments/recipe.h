// --recipe: a published training recipe's optimizer settings, applied under the flags the user gave.
#pragma once
#include <functional>
#include <string>

#include "core/config/run_config.h"

namespace ptdp {

// "default": ptdp's own defaults, nothing changes. "llama": Touvron et al. 2023 (Sec. 2.2, Table 2):
// AdamW beta1 0.9, beta2 0.95, weight decay 0.1, gradient clipping 1.0, 2,000 warm-up iterations,
// cosine decay over the whole run (--iters) to 10% of the peak learning rate, and the peak learning
// rate of Table 2 for llama-7b/13b (3e-4) and llama-33b/65b (1.5e-4). A flag the user gave
// (`given(flag)`) wins over the recipe. UsageError naming --recipe on an unknown name or a run too
// short for the recipe's warm-up.
void apply_recipe(const std::string& name, const std::string& model_preset,
                  const std::function<bool(const char*)>& given, RunConfig& r);

}  // namespace ptdp
