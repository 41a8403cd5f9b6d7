// The ptdp subcommands. Each returns the process exit code; bad input throws UsageError.
#pragma once
#include <string>

#include "core/comm/communicator.h"
#include "core/runtime/run_config.h"

namespace ptdp {

// mpi_world: the MPI world when --comm mpi (null otherwise).
int cmd_train(const RunConfig& cfg, Communicator* mpi_world);
int cmd_preprocess(const std::string& input, const std::string& output_prefix);

}  // namespace ptdp
