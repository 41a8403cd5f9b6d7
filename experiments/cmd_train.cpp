// `ptdp train`: the command line's edge of a training run (core/train/run.h): the checks before
// any work, the ranks (MPI processes or threads) and their devices, the progress lines
// (experiments/train_log.h), the result row, the interrupt policy and the exit code.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "core/accounting/memory_estimate.h"
#include "core/backend/cpu/threads.h"
#include "core/comm/agreement.h"
#include "core/comm/local/local_comm.h"
#include "core/results/provenance.h"
#include "core/config/results_csv.h"
#include "core/results/distinct_outputs.h"
#include "core/results/output_files.h"
#include "core/train/checkpoint_resume.h"
#include "core/train/rank_phase.h"
#include "core/train/run.h"
#include "experiments/commands.h"
#include "experiments/interrupt.h"
#include "experiments/rank_device.h"
#include "experiments/result_row.h"
#include "experiments/train_log.h"

namespace ptdp {

namespace {

// Refuses, before any work, what cannot succeed: an unwritable result file, a model too big.
void preflight(const RunConfig& c, bool thread_ranks) {
  require_backend_here(c, thread_ranks);
  if (!c.csv.empty()) check_result_csv(c.csv);
  if (!c.loss_log.empty()) check_output_file(c.loss_log, "--loss-log");
  check_distinct_outputs({{"--csv", c.csv}, {"--loss-log", c.loss_log}});
  if (!c.save_init_dir.empty() && !c.load_dir.empty())
    usage_error("--save-init {} writes the initial weights; it cannot be combined with --load {}", c.save_init_dir,
                c.load_dir);
  if (!c.save_dir.empty()) check_output_dir(c.save_dir, "--save");
  if (!c.save_init_dir.empty()) check_output_dir(c.save_init_dir, "--save-init");
  if (!c.tensorboard_dir.empty()) check_output_dir(c.tensorboard_dir, "--tensorboard-dir");
  const ModelConfig& m = c.model;
  const MemoryEstimate one = estimate_single_rank_f32(m, c.par.micro_batch, c.par.recompute);
  // Ranks of this process: every data-parallel replica holds a whole model, split t ways.
  const int64_t local_ranks = c.comm == CommKind::Local ? c.ranks : 1;
  const int64_t need = (one.state_bytes / c.par.tp + one.activation_bytes / c.par.cp) * local_ranks;
  const int64_t have = physical_memory_bytes();  // (the CUDA backend's allocator names an out-of-memory GPU)
  if (c.backend == BackendKind::Cpu && have > 0 && need > have)
    usage_error("--model {} (l={} h={} s={}) with --micro-batch {} on {} rank(s) here needs about {:.1f} GB "
                "({:.1f} GB of weights, gradients and Adam state and {:.1f} GB of activations per model), more than "
                "the {:.1f} GB of memory here",
                m.name, m.layers, m.hidden, m.seq_length, c.par.micro_batch, local_ranks, need / 1e9,
                one.state_bytes / 1e9, one.activation_bytes / 1e9, have / 1e9);
}

// The result row of what the run measured: world rank 0's times (the first stage), the bubble
// and activations of the worst stage.
ResultRow make_row(const RunConfig& c, const RunSummary& s, double peak_gb) {
  RunConfig ran = c;  // a stopped run's row says how many iterations it reached
  ran.iters = s.iterations;
  ResultRow r = make_result_row(ran, "run", s.iter_ms);
  r.set("bubble_fraction", s.bubble);
  r.set("peak_mem_gb", peak_gb);
  r.set("loss", s.loss);
  r.set("device", cpu_name());
  r.set("fwd_ms", s.fwd_ms);
  r.set("bwd_ms", s.bwd_ms);
  r.set("p2p_wait_ms", s.p2p_wait_ms);
  r.set("dp_ms", s.dp_ms);
  r.set("optimizer_ms", s.opt_ms);
  r.set("p2p_bytes", static_cast<long long>(s.p2p_bytes));
  r.set("activation_gb", s.activation_gb);
  r.set("data_sources", s.data_sources);
  if (s.valid_loss) {  // the last evaluation's
    r.set("valid_loss", *s.valid_loss);
    r.set("valid_ppl", std::exp(*s.valid_loss));
  }
  return r;
}

// One rank's training run; world rank 0 prints progress and returns the result row.
std::optional<ResultRow> train_rank(const RunConfig& c, Communicator& launched, bool verbose) {
  std::unique_ptr<RankDevice> dev;
  if (c.comm == CommKind::Nccl) dev = std::make_unique<RankDevice>(c, launched);  // NCCL's bootstrap is collective
  else rank_phase(launched, [&] { dev = std::make_unique<RankDevice>(c, launched); });
  Communicator& world = dev->world();
  const bool rank0 = world.rank() == 0;
  // Ranks as threads share the process's threads (OMP_NUM_THREADS, else every core).
  const int rank_threads = std::max(1, cpu_thread_budget() / c.ranks);
  TrainLog log(c, rank_threads);
  RunOptions o;
  o.log = rank0 && verbose ? &log : nullptr;
  o.stop_signal = stop_signal;
  TrainingRun run(c, dev->backend(), world, launched, o);
  run.lock_checkpoint_dirs();
  if (c.comm == CommKind::Local) set_cpu_threads(rank_threads);
  run.set_up_data();
  if (rank0) dev->reset_peak();
  world.barrier();
  run.build();
  run.restore_or_initialise();
  run.train();
  if (rank0 && run.stopped_by() != 0) note_stopped_after(run.iterations());
  run.evaluate_after_training();
  run.write_loss_log();
  if (!rank0) return std::nullopt;
  if (run.timed_iterations() == 0) {  // stopped inside the warm-up: nothing was timed
    if (o.log) log.no_timed_iteration();
    return std::nullopt;
  }
  const RunSummary s = run.summarise();
  warn_skipped_updates(s);
  // Host memory of this process; with local ranks the mean per rank.
  const double peak_gb = dev->peak_gb(c.comm == CommKind::Local ? c.ranks : 1);
  if (o.log) log.summary(s, peak_gb);
  return make_row(c, s, peak_gb);
}

}  // namespace

std::optional<ResultRow> run_training(const RunConfig& given, Communicator* mpi_world, bool verbose) {
  RunConfig c = given;  // with --load, as it resumes (resume_config)
  // --comm nccl: one process per GPU under mpirun/srun (bootstrapped over MPI), else thread ranks.
  const bool processes = c.comm == CommKind::Mpi || (c.comm == CommKind::Nccl && mpi_world);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(c.comm_timeout_s * 1000));
  if (processes) {
    PTDP_CHECK(mpi_world != nullptr, "--comm {} without an MPI world", c.comm);
    mpi_world->set_timeout(timeout);
    // Every process checks (a directory can be missing on one node); every rank ends with the cause.
    agree(*mpi_world, [&] {
      require_supported(c);
      preflight(c, false);
      c = resume_config(given);
      if (mpi_world->size() != c.ranks)
        usage_error("--comm mpi: the MPI world has {} process(es) but --tp {} x --pp {} x --dp {} = {}",
                    mpi_world->size(), c.par.tp, c.par.pp, c.par.dp, c.ranks);
    });
    try {
      return train_rank(c, *mpi_world, verbose);
    } catch (const std::exception& e) {
      stop_others_if_processes(*mpi_world, e);
      throw;
    }
  }
  require_supported(c);
  preflight(c, true);
  c = resume_config(given);
  std::optional<ResultRow> row;
  run_local_ranks(
      c.ranks,
      [&](int rank, Communicator& world) {
        auto r = train_rank(c, world, verbose);
        if (rank == 0) row = std::move(r);
      },
      timeout);
  return row;
}

int cmd_train(const RunConfig& c, Communicator* mpi_world) {
  install_interrupt_handlers(OnInterrupt::FinishTheIteration);
  std::optional<ResultRow> row = run_training(c, mpi_world, true);
  // World rank 0 alone holds the row (one row per run, MPI or not); under MPI the others wait for
  // its append, so that a failed append ends every rank with its cause.
  auto append = [&] {
    if (row && !c.csv.empty()) append_result_rows(c.csv, {*row});
  };
  if (mpi_world && mpi_world->size() > 1) agree(*mpi_world, append);
  else append();
  if (row && !c.csv.empty()) fmt::print("appended a row to {}\n", c.csv);
  if (const int after = stopped_after(); after >= 0) {
    std::fflush(stdout);
    fmt::print(stderr, "ptdp: stopped by a signal after iteration {} of {}; exit {}\n", after, c.iters,
               128 + stop_signal());
    return 128 + stop_signal();
  }
  return 0;
}

}  // namespace ptdp
