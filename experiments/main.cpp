// ptdp: the command line of the PTD-P training and reproduction suite.
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/common/error.h"
#include "experiments/cli_flags.h"
#include "experiments/commands.h"

int main(int argc, char** argv) {
  using namespace ptdp;
  CLI::App app{"ptdp: PTD-P (pipeline, tensor and data parallel) GPT training and reproduction suite"};
  app.require_subcommand(1);

  RunFlags train_flags;
  CLI::App* train = app.add_subcommand("train", "train a GPT and append one result row");
  add_model_flags(*train, train_flags);
  add_parallel_flags(*train, train_flags);
  add_run_flags(*train, train_flags);

  std::string pre_input, pre_prefix;
  CLI::App* pre = app.add_subcommand("preprocess", "text file -> Megatron .bin/.idx dataset (byte-level tokens)");
  pre->add_option("--input", pre_input, "text file")->required();
  pre->add_option("--output-prefix", pre_prefix, "writes PREFIX.bin and PREFIX.idx")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "ptdp: error: %s\n", e.what());
    return 2;
  }
  try {
    if (*train) return cmd_train(resolve_run_config(*train, train_flags));
    if (*pre) return cmd_preprocess(pre_input, pre_prefix);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "ptdp: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ptdp: failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
