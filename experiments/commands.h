// The ptdp subcommands. Each returns the process exit code; bad input throws UsageError.
#pragma once
#include <optional>
#include <string>

#include "core/comm/communicator.h"
#include "core/data/preprocess.h"
#include "core/config/results_csv.h"
#include "core/config/run_config.h"

namespace ptdp {

// The whole command line (experiments/cli_main.cpp): what the ptdp executable's main runs.
int cli_main(int argc, char** argv);

// mpi_world: the MPI world when --comm mpi (null otherwise).
int cmd_train(const RunConfig& cfg, Communicator* mpi_world);
// Trains a validated configuration (preflight checks first) on local ranks or the MPI world and
// returns world rank 0's result row (nothing on the other MPI ranks); progress lines when verbose.
std::optional<ResultRow> run_training(const RunConfig& cfg, Communicator* mpi_world, bool verbose);
// The tokenizer flags (byte-level without any), --append-eod and --allow-invalid-utf8 in opts.
int cmd_preprocess(const std::string& input, const std::string& output_prefix, const PreprocessOptions& opts);

}  // namespace ptdp
