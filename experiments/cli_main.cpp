// ptdp's command line: the subcommands, MPI start-up, and errors as one line with exit code 2
// (usage) or 1 (failure). experiments/main.cpp calls it.
#include <csignal>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "core/backend/cpu/blas_core.h"
#if defined(PTDP_HAVE_CUDA)
#include "core/backend/cuda/cudnn_attention.h"
#endif
#include "core/comm/agreement.h"
#include "core/common/error.h"
#include "core/common/one_line.h"
#ifdef PTDP_HAVE_MPI
#include "core/comm/mpi/mpi_comm.h"
#endif
#include "experiments/cli_flags.h"
#include "experiments/strict_numbers.h"
#include "core/data/gpt2_pretokenizer.h"
#include "core/data/sentencepiece_tokenizer.h"
#include "core/results/provenance.h"
#include "experiments/commands.h"
#include "experiments/suggest.h"
#include "core/config/config_fields.h"
#include "experiments/rank_device.h"

namespace ptdp {  // experiments/cmd_simulate.cpp, experiments/cmd_plan.cpp
std::pair<CLI::App*, std::function<int()>> add_simulate_command(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> add_plan_command(CLI::App& app);
// experiments/cmd_accept.cpp, experiments/cmd_compare.cpp
std::pair<CLI::App*, std::function<int(Communicator*)>> add_accept_command(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> add_compare_command(CLI::App& app);
// experiments/cmd_reproduce.cpp, experiments/cmd_fields.cpp, experiments/cmd_preprocess.cpp
std::pair<CLI::App*, std::function<int()>> add_reproduce_command(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> add_fields_command(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> add_preprocess_command(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> add_export_hf_command(CLI::App& app);  // experiments/cmd_export_hf.cpp
}  // namespace ptdp

namespace {

// `ptdp --version`: the commit and what this build can run.
std::string version_text() {
  std::string t = "ptdp " + ptdp::git_sha();
#if defined(PTDP_HAVE_CUDA)
  t += ", CUDA backend";
#else
  t += ", no CUDA backend";
#endif
#if defined(PTDP_HAVE_NCCL)
  t += ", NCCL";
#endif
#if defined(PTDP_HAVE_MPI)
  t += ", MPI";
#endif
  t += ptdp::sentencepiece_available() ? ", SentencePiece" : "";
  t += ptdp::gpt2_bpe_available() ? ", GPT-2 BPE" : "";
  t += "\nblas: " + ptdp::cpu::blas_description();
#if defined(PTDP_HAVE_CUDA)
  // cuDNN, loaded here as a run would (libcudnn.so.9): --attention-backend cudnn and auto use it.
  const std::string& why = ptdp::cuda::cudnn_unavailable();
  t += why.empty() ? "\ncudnn: " + ptdp::cuda::cudnn_version_text() + " (fused attention)"
                   : "\ncudnn: none (" + why + ")";
#endif
  return t;
}

}  // namespace

int ptdp::cli_main(int argc, char** argv) {
  // Under a file size limit (ulimit -f) a write past it fails with EFBIG, which each writer reports
  // naming its file, instead of ending the process by SIGXFSZ with no word.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"ptdp: PTD-P (pipeline, tensor and data parallel) GPT training and reproduction suite"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text(), "print the version (git commit) and what this build has");

  RunFlags train_flags;
  CLI::App* train = app.add_subcommand("train", "train a GPT and append one result row");
  add_model_flags(*train, train_flags);
  add_parallel_flags(*train, train_flags);
  add_run_flags(*train, train_flags);

  auto [pre, run_preprocess] = add_preprocess_command(app);
  auto [simulate, run_simulate] = add_simulate_command(app);
  auto [plan, run_plan] = add_plan_command(app);
  auto [accept, run_accept] = add_accept_command(app);
  auto [compare, run_compare] = add_compare_command(app);
  auto [reproduce, run_reproduce] = add_reproduce_command(app);
  auto [fields, run_fields] = add_fields_command(app);
  auto [export_hf, run_export_hf] = add_export_hf_command(app);

  std::string names;  // the commands, for the errors below
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + sub->get_name();
  // Bare `ptdp`: the help, then the usage error (CLI11 would say only "A subcommand is required").
  if (argc == 1) {
    std::fprintf(stderr, "%s\nptdp: error: no command given: name one of %s (`ptdp COMMAND --help` lists its flags)\n",
                 app.help().c_str(), names.c_str());
    return 2;
  }
  // CLI11 says only "A subcommand is required" for a word that is none.
  if (argv[1][0] != '-') {
    bool known = false;
    for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) known = known || sub->check_name(argv[1]);
    if (!known) {
      std::fprintf(stderr, "ptdp: error: unknown command '%s' (commands: %s)\n", one_line(argv[1]).c_str(),
                   names.c_str());
      return 2;
    }
  }
  require_strict_numbers(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::string hint;
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr) {  // the first unknown flag's closest names
      const auto used = app.get_subcommands();
      const CLI::App& cmd = used.empty() ? app : *used.front();
      for (int i = 2; i < argc && hint.empty(); ++i) {
        const std::string a = argv[i];
        const std::string flag = a.substr(0, a.find('='));
        if (a.rfind("--", 0) != 0 || cmd.get_option_no_throw(flag) != nullptr) continue;
        // Another command's flag (simulate is given train's --lr): say whose it is.
        std::string takers;
        for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
          if (sub != &cmd && sub->get_option_no_throw(flag) != nullptr)
            takers += (takers.empty() ? "ptdp " : ", ptdp ") + sub->get_name();
        if (!used.empty() && !takers.empty()) {
          std::fprintf(stderr, "ptdp: error: %s is not a flag of ptdp %s (%s takes it); `ptdp %s --help` lists its flags\n",
                       one_line(flag).c_str(), cmd.get_name().c_str(), takers.c_str(), cmd.get_name().c_str());
          return 2;
        }
        hint = did_you_mean(cmd, a);
      }
    }
    std::fprintf(stderr, "ptdp: error: %s%s\n", one_line(e.what()).c_str(), one_line(hint).c_str());
    return 2;
  }
  // `mpirun -np 4 ptdp train` without --comm mpi would be 4 separate runs: refused, by launcher rank 0.
  if (*train && train_flags.bad_choice.empty() && train_flags.run.comm == CommKind::Local) {
    const LauncherWorld w = launcher_world();
    const std::string why = local_comm_under_launcher(w);
    if (!why.empty()) {
      if (w.rank == 0) std::fprintf(stderr, "ptdp: error: %s\n", why.c_str());
      return 2;
    }
  }
  // Under mpirun (--comm mpi) every process runs this; failures the ranks agreed on (every rank
  // throws the same AgreedError) are printed by world rank 0 alone.
  bool quiet = false;
#ifdef PTDP_HAVE_MPI
  std::unique_ptr<MpiSession> mpi;
  std::unique_ptr<Communicator> mpi_world;
#else
  std::unique_ptr<Communicator> mpi_world;
#endif
  try {
    // nccl bootstraps over MPI when a launcher started the processes (with --backend cuda;
    // otherwise validation refuses it before MPI starts); without one its ranks are threads.
    const bool nccl = train_flags.run.comm == CommKind::Nccl && train_flags.run.backend == BackendKind::Cuda && started_by_launcher();
    if (*train && (train_flags.run.comm == CommKind::Mpi || nccl)) {
#ifdef PTDP_HAVE_MPI
      mpi = std::make_unique<MpiSession>(&argc, &argv);
      mpi_world = mpi->world();
      quiet = mpi_world->rank() != 0;
      if (train->count("--ranks") == 0) train_flags.run.ranks = mpi_world->size();
#else
      usage_error("--comm {}: this build has no MPI (install libopenmpi-dev and configure with -DPTDP_MPI=ON)",
                  train_flags.run.comm);
#endif
    }
    // `ptdp accept` launched over several processes (srun, mpirun): a fleet, one process per node.
    if (*accept && started_by_launcher()) {
#ifdef PTDP_HAVE_MPI
      mpi = std::make_unique<MpiSession>(&argc, &argv);
      mpi_world = mpi->world();
      quiet = mpi_world->rank() != 0;
#else
      usage_error("ptdp accept under a launcher: this build has no MPI to gather the nodes' verdicts over "
                  "(install libopenmpi-dev and configure with -DPTDP_MPI=ON)");
#endif
    }
    if (*train && mpi_world && mpi_world->size() > 1) {
      // Each process parsed its own command line: a flag that fails on one rank only, or differs
      // between ranks (an MPMD launch), ends every rank at once with one line.
      RunConfig cfg;
      agree(*mpi_world, [&] { cfg = resolve_run_config(*train, train_flags); });
      require_same_fields(*mpi_world, run_config_fields(cfg),
                          "every rank of an MPI job must be started with the same flags");
      return cmd_train(cfg, mpi_world.get());
    }
    if (*train) return cmd_train(resolve_run_config(*train, train_flags), mpi_world.get());
    if (*pre) return run_preprocess();
    if (*simulate) return run_simulate();
    if (*plan) return run_plan();
    if (*accept) return run_accept(mpi_world && mpi_world->size() > 1 ? mpi_world.get() : nullptr);
    if (*compare) return run_compare();
    if (*reproduce) return run_reproduce();
    if (*fields) return run_fields();
    if (*export_hf) return run_export_hf();
  } catch (const AgreedError& e) {  // every rank knows it: one line, then every rank exits
    if (!quiet) std::fprintf(stderr, "ptdp: %s: %s\n", e.usage() ? "error" : "failed", one_line(e.what()).c_str());
    return e.usage() ? 2 : 1;
  } catch (const std::exception& e) {
    // This rank's alone: it names itself and its cause, and MPI_Abort ends the others at once.
    if (mpi_world && mpi_world->size() > 1) mpi_world->abort(one_line(e.what()));
    const bool usage = dynamic_cast<const UsageError*>(&e) != nullptr;
    std::fprintf(stderr, "ptdp: %s: %s\n", usage ? "error" : "failed", one_line(e.what()).c_str());
    return usage ? 2 : 1;
  }
  return 0;
}
