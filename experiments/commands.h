// The ptdp subcommands. Each returns the process exit code; bad input throws UsageError.
#pragma once
#include <string>

#include "core/runtime/run_config.h"

namespace ptdp {

int cmd_train(const RunConfig& cfg);
int cmd_preprocess(const std::string& input, const std::string& output_prefix);

}  // namespace ptdp
