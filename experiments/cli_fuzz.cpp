// libFuzzer target: the `ptdp train` command line. The input, split at NUL bytes, is the
// argument list after `ptdp train`; it goes through CLI11 with the flags of
// experiments/cli_flags.h (as experiments/main.cpp declares them), resolve_run_config, then
// what `ptdp train` computes from a valid configuration before it trains (require_supported,
// the preflight memory estimate, the FLOP and parameter counts, the communicators' timeout).
// Expected: CLI::ParseError (main prints it and exits 2) or ptdp::UsageError, one line naming a flag;
// anything else (a crash, a sanitizer report such as a signed overflow, another exception)
// is a finding. Nothing here writes files or trains.
// Build and run: scripts/fuzz.sh (docs/ROBUSTNESS.md); seeds in fuzz/cli_fuzz/.
#include <chrono>
#include <cstdint>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/common/error.h"
#include "core/common/one_line.h"
#include "core/accounting/flops.h"
#include "core/accounting/memory_estimate.h"
#include "experiments/cli_flags.h"
#include "experiments/strict_numbers.h"
#include "fuzz/fuzz_util.h"

using ptdp::fuzz::finding;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> args = {"ptdp", "train"};
  for (size_t at = 0; at < in.size() && args.size() < 66;) {
    size_t nul = in.find('\0', at);
    if (nul == std::string_view::npos) nul = in.size();
    args.emplace_back(in.substr(at, nul - at));
    at = nul + 1;
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // As experiments/main.cpp: the flags belong to the `train` subcommand.
  CLI::App app{"ptdp"};
  app.require_subcommand(1);
  ptdp::RunFlags flags;
  CLI::App* train = app.add_subcommand("train", "train");
  ptdp::add_model_flags(*train, flags);
  ptdp::add_parallel_flags(*train, flags);
  ptdp::add_run_flags(*train, flags);
  ptdp::require_strict_numbers(app);  // as main does
  try {
    app.parse(static_cast<int>(args.size()), argv.data());
  } catch (const CLI::ParseError&) {
    return 0;  // main: "ptdp: error: ..." and exit code 2 (0 for --help)
  } catch (const std::exception& e) {
    finding("unexpected exception from CLI11", e.what());
  }
  try {
    const ptdp::RunConfig c = ptdp::resolve_run_config(*train, flags);
    ptdp::require_supported(c);
    // What cmd_train's preflight and train_log's first lines compute from the configuration.
    const ptdp::MemoryEstimate one = ptdp::estimate_single_rank_f32(c.model, c.par.micro_batch, c.par.recompute);
    (void)one.total();
    (void)ptdp::params_exact(c.model);
    (void)ptdp::flops_eq3(c.model, c.par.global_batch);
    (void)c.model.padded_vocab(c.par.tp);
    (void)c.par.num_microbatches();
    // The communicators' timeout (cmd_train) and a deadline from it (local_group.cpp, mpi_comm.cpp).
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(c.comm_timeout_s * 1000));
    (void)(std::chrono::steady_clock::now() + timeout);
  } catch (const ptdp::UsageError& e) {
    // As main prints it: through one_line (flag values are quoted as given, line breaks included).
    ptdp::fuzz::check_usage_message(ptdp::one_line(e.what()), "--");
  } catch (const std::exception& e) {
    finding("unexpected exception", e.what());
  }
  return 0;
}
