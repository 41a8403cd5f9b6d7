// `ptdp train`: trains with the training core and writes one result row.
#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "core/data/indexed_dataset.h"
#include "core/data/megatron_blend.h"
#include "core/data/megatron_samples.h"
#include "core/data/megatron_split.h"
#include "core/data/samples.h"
#include "core/accounting/model_gemms.h"
#include "core/backend/cpu/gemm_rate.h"
#include "core/backend/cpu/threads.h"
#include "core/comm/agreement.h"
#include "core/comm/local/local_comm.h"
#include "core/common/one_line.h"
#include "core/parallel/topology.h"
#include "core/train/checkpoint.h"
#include "core/accounting/flops.h"
#include "core/accounting/memory_estimate.h"
#include "core/results/provenance.h"
#include "core/results/results_csv.h"
#include "core/tensor/allocator.h"
#include "core/train/stage_model.h"
#include "core/train/trainer.h"
#include "experiments/commands.h"
#include "experiments/interrupt.h"
#include "experiments/rank_device.h"
#include "experiments/result_row.h"
#include "experiments/stats.h"

namespace ptdp {

namespace {

// Medians over the timed iterations; world rank 0's own times (the first stage), the
// bubble and activations of the worst stage.
struct Breakdown {
  double fwd_ms = 0, bwd_ms = 0, p2p_wait_ms = 0, dp_ms = 0, opt_ms = 0, bubble = 0, activation_gb = 0;
  int64_t p2p_bytes = 0;
};

ResultRow make_row(const RunConfig& c, double iter_ms, double loss, double peak_gb, const Breakdown& bd) {
  ResultRow r = make_result_row(c, "run", iter_ms);
  r.set("bubble_fraction", bd.bubble);
  r.set("peak_mem_gb", peak_gb);
  r.set("loss", loss);
  r.set("device", cpu_name());
  r.set("fwd_ms", bd.fwd_ms);
  r.set("bwd_ms", bd.bwd_ms);
  r.set("p2p_wait_ms", bd.p2p_wait_ms);
  r.set("dp_ms", bd.dp_ms);
  r.set("optimizer_ms", bd.opt_ms);
  r.set("p2p_bytes", static_cast<long long>(bd.p2p_bytes));
  r.set("activation_gb", bd.activation_gb);
  return r;
}

}  // namespace

namespace {

// --loss-log FILE: its directory must exist and FILE must not be a directory.
// iteration,loss,grad_norm,lr,loss_scale,skipped: one line per iteration run, values printed
// to round-trip (skipped: 1 when the update was skipped).
std::string loss_log_csv(const std::vector<std::pair<int, IterStats>>& iters) {
  std::string out = "iteration,loss,grad_norm,lr,loss_scale,skipped\n";
  for (const auto& [it, st] : iters)
    out += fmt::format("{},{},{},{},{},{}\n", it, st.loss, st.grad_norm, st.lr, st.loss_scale, st.skipped ? 1 : 0);
  return out;
}

// Refuses, before any work, what cannot succeed: an unwritable result file, a model too big.
void preflight(const RunConfig& c, bool thread_ranks) {
  require_backend_here(c, thread_ranks);
  if (!c.csv.empty()) check_result_csv(c.csv);
  if (!c.loss_log.empty()) check_output_file(c.loss_log, "--loss-log");
  if (!c.save_init_dir.empty() && !c.load_dir.empty())
    usage_error("--save-init {} writes the initial weights; it cannot be combined with --load {}", c.save_init_dir,
                c.load_dir);
  if (!c.save_dir.empty()) check_output_dir(c.save_dir, "--save");
  if (!c.save_init_dir.empty()) check_output_dir(c.save_init_dir, "--save-init");
  const ModelConfig& m = c.model;
  const MemoryEstimate one = estimate_single_rank_f32(m, c.par.micro_batch, c.par.recompute);
  // Ranks of this process: every data-parallel replica holds a whole model, split t ways.
  const int64_t local_ranks = c.comm == "local" ? c.ranks : 1;
  const int64_t need = (one.state_bytes / c.par.tp + one.activation_bytes) * local_ranks;
  const int64_t have = physical_memory_bytes();  // (the CUDA backend's allocator names an out-of-memory GPU)
  if (c.backend == "cpu" && have > 0 && need > have)
    usage_error("--model {} (l={} h={} s={}) with --micro-batch {} on {} rank(s) here needs about {:.1f} GB "
                "({:.1f} GB of weights, gradients and Adam state and {:.1f} GB of activations per model), more than "
                "the {:.1f} GB of memory here",
                m.name, m.layers, m.hidden, m.seq_length, c.par.micro_batch, local_ranks, need / 1e9,
                one.state_bytes / 1e9, one.activation_bytes / 1e9, have / 1e9);
}

// The evaluations of a run (--eval-iters): one every --eval-interval iterations and one after the
// last, each of eval_iters global batches; Megatron-LM's count of valid samples,
// (train_iters // eval_interval + 1) * eval_iters * global_batch_size.
int64_t valid_samples(const RunConfig& c) {
  const int64_t evaluations = (c.eval_interval > 0 ? c.iters / c.eval_interval : 0) + 1;
  return evaluations * c.eval_iters * c.par.global_batch;
}

// --data-order megatron: --data's items (a prefix, or Megatron's list) and its blend.
MegatronDataOptions megatron_data_options(const RunConfig& c, MegatronBlend* blend) {
  MegatronDataOptions o;
  std::istringstream in(c.data);
  for (std::string item; in >> item;) o.data.push_back(item);
  *blend = parse_megatron_blend(o.data);
  o.split = c.split;
  o.which = MegatronSplit::Train;
  o.num_samples = int64_t(c.iters) * c.par.global_batch;  // Megatron's train_samples
  o.seq_len = c.model.seq_length;
  o.seed = c.seed;
  o.cache_dir = c.data_cache;  // empty: Megatron-core's default places beside each dataset
  return o;
}

// A rank that fails outside an agreed phase (in a training step): under MPI it names itself and
// its cause and ends every process at once (MPI_Abort), instead of the others waiting for it
// until --comm-timeout; thread ranks stop each other (run_local_ranks).
void stop_others_if_processes(Communicator& given_world, const std::exception& e) {
  if (given_world.backend() == "mpi" && given_world.size() > 1 && !dynamic_cast<const AgreedError*>(&e))
    given_world.abort(one_line(e.what()));
}

// The iterations since the last progress line, for --log-format megatron: Megatron-LM's
// training_log averages the time over them and the loss over those that updated, and counts the
// skipped and non-finite ones.
struct LogInterval {
  int iterations = 0, advanced = 0, skipped = 0, nan = 0;
  double time_ms = 0, loss = 0, grad_norm = 0, lr = 0;
  void add(const IterStats& st) {
    ++iterations;
    time_ms += st.time_ms;
    lr = st.lr;
    if (!std::isfinite(st.loss)) ++nan;
    if (st.skipped) {
      ++skipped;
      return;
    }
    ++advanced;
    loss += st.loss;
    grad_norm = st.grad_norm;
  }
  // Megatron-LM's line: its keys, order, widths and units (training.py, training_log); the
  // throughput is its model FLOPs (3 passes, recomputation not counted) per second per GPU.
  std::string megatron_line(int it, const RunConfig& c, double model_flops, double loss_scale) const {
    const double per_iter_s = time_ms / std::max(1, iterations) / 1e3;
    const std::time_t now = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
    std::string line = fmt::format(" [{}] iteration {:8d}/{:8d} | consumed samples: {:12d} | elapsed time per "
                                   "iteration (ms): {:.1f} | throughput per GPU (TFLOP/s/GPU): {:.1f} | learning "
                                   "rate: {:.6E} | global batch size: {:5d} |",
                                   stamp, it, c.iters, int64_t(it) * c.par.global_batch, per_iter_s * 1e3,
                                   model_flops / per_iter_s / c.ranks / 1e12, lr, c.par.global_batch);
    if (advanced > 0) line += fmt::format(" lm loss: {:.6E} |", loss / advanced);
    line += fmt::format(" loss scale: {:.1f} |", loss_scale);
    if (advanced > 0) line += fmt::format(" grad norm: {:.3f} |", grad_norm);
    line += fmt::format(" number of skipped iterations: {:3d} | number of nan iterations: {:3d} |", skipped, nan);
    return line;
  }
};

// Each dataset of a Megatron order: its weight, the samples drawn and the epochs they make.
void print_dataset_uses(const MegatronSamples& ms) {
  for (const auto& u : ms.datasets())
    fmt::print("  {}: weight {:.4g}, {} samples drawn of {} built, {:.3g} epochs drawn ({} epochs indexed), index {} {}\n",
               u.prefix, u.weight, u.samples_drawn, u.samples_built, u.epochs_drawn, u.num_epochs,
               u.index_files_found ? "found in" : "built as", u.index_files);
  if (!ms.blend_index_files().empty()) fmt::print("  blend index: {}\n", ms.blend_index_files());
}

// Megatron-LM's evaluation report (training.py, evaluate_and_print_results): the line between two
// rules of its length; its perplexity is exp(min(20, loss)).
std::string megatron_evaluation_lines(const std::string& prefix, double loss) {
  const std::string line = fmt::format(" validation loss at {} | lm loss value: {:.6E} | lm loss PPL: {:.6E} | ",
                                       prefix, loss, std::exp(std::min(20.0, loss)));
  const std::string rule(line.size() + 1, '-');
  return rule + "\n" + line + "\n" + rule + "\n";
}
std::string megatron_validation_lines(int it, bool after_training, double loss) {
  return megatron_evaluation_lines(fmt::format("iteration {}{}", it, after_training ? " on validation set" : ""), loss);
}

// One rank's training run; world rank 0 prints progress and writes the result row. A phase
// that can fail on one rank alone (opening files, loading and saving checkpoints) runs under
// agree(): every rank then ends with the first failing rank's cause, at once.
std::optional<ResultRow> train_rank(const RunConfig& c, Communicator& given_world, bool verbose) {
  // Thread ranks only meet at a barrier: a failing thread marks their world failed (run_local_ranks).
  const bool processes = given_world.backend() == "mpi";
  auto phase = [&](const std::function<void()>& fn) {
    if (processes) return agree(given_world, fn);
    fn();
    given_world.barrier();
  };
  std::unique_ptr<RankDevice> dev_holder;
  if (c.comm == "nccl") dev_holder = std::make_unique<RankDevice>(c, given_world);  // NCCL's bootstrap is collective
  else phase([&] { dev_holder = std::make_unique<RankDevice>(c, given_world); });
  RankDevice& dev = *dev_holder;
  Communicator& world = dev.world();
  const ModelConfig& m = c.model;
  const bool report = world.rank() == 0 && verbose;
  const bool rank0 = world.rank() == 0;
  // One run per checkpoint directory: world rank 0 (one per job, whether ranks are threads or
  // processes) holds its lock for the whole run, so that a second run is refused at start.
  std::vector<std::unique_ptr<DirLock>> dir_locks;
  phase([&] {
    if (!rank0) return;
    std::vector<std::string> locked;
    for (const auto& [dir, flag] : {std::pair{c.save_dir, "--save"}, std::pair{c.save_init_dir, "--save-init"}}) {
      if (dir.empty()) continue;
      std::error_code ec;
      const std::string canon = std::filesystem::weakly_canonical(dir, ec).string();
      if (std::find(locked.begin(), locked.end(), canon) != locked.end()) continue;
      locked.push_back(canon);
      dir_locks.push_back(std::make_unique<DirLock>(dir, flag));
    }
  });
  const Topology topo(c.par.tp, c.par.pp, c.par.dp);
  ParallelGroups g = ParallelGroups::create(world, topo);
  // Ranks as threads share the process's threads (OMP_NUM_THREADS, else every core).
  const int rank_threads = std::max(1, cpu_thread_budget() / c.ranks);
  if (c.comm == "local") set_cpu_threads(rank_threads);

  std::unique_ptr<IndexedDataset> ds;
  std::unique_ptr<SampleSource> samples;
  std::unique_ptr<SampleSource> valid;  // --eval-iters
  std::unique_ptr<SampleSource> test;   // --eval-iters, Megatron order, where the test split holds documents
  std::string data_sources;  // the result row's: SAMPLES:EPOCHS drawn of each dataset, in --data's order
  if (c.data_order == "megatron") {
    // World rank 0 builds the index files first; the others then find them in the cache (or build
    // their own where the cache directory is not shared).
    for (const bool first : {true, false})
      phase([&] {
        MegatronBlend blend;  // parsed inside the phase: a bad list ends every rank with its cause
        const MegatronDataOptions mo = megatron_data_options(c, &blend);
        if (rank0 != first) return;
        for (const auto& prefix : blend.prefixes) check_vocab(IndexedDataset::open(prefix), m.vocab_size, "--vocab-size");
        auto ms = std::make_unique<MegatronSamples>(mo);
        if (report) {
          fmt::print("data: Megatron-core's order, split train of --split {}, {} samples of {} tokens + 1, seed {}\n",
                     c.split, ms->num_samples(), m.seq_length, c.seed);
          print_dataset_uses(*ms);
        }
        for (const auto& u : ms->datasets())
          data_sources += fmt::format("{}{}:{:.6g}", data_sources.empty() ? "" : ";", u.samples_drawn, u.epochs_drawn);
        samples = std::move(ms);
        if (c.eval_iters == 0) return;
        MegatronDataOptions vo = mo;  // the same files and settings, Megatron's valid split
        vo.which = MegatronSplit::Valid;
        vo.num_samples = valid_samples(c);
        auto vs = std::make_unique<MegatronSamples>(vo);
        if (report) {
          fmt::print("valid: split valid of --split {}, {} samples for {} evaluation(s) of {} x {} ({} in its index)\n",
                     c.split, vo.num_samples, vo.num_samples / (int64_t(c.eval_iters) * c.par.global_batch),
                     c.eval_iters, c.par.global_batch, vs->num_samples());
          print_dataset_uses(*vs);
        }
        valid = std::move(vs);
        // Megatron-LM evaluates the test split once, after training: eval_iters global batches
        // from its start. A split that gives it no documents builds none (do_test is false).
        if (parse_megatron_split(c.split)[2] == 0) {
          if (report) fmt::print("test: --split {} gives the test split no share: not evaluated\n", c.split);
          return;
        }
        MegatronDataOptions to = mo;
        to.which = MegatronSplit::Test;
        to.num_samples = int64_t(c.eval_iters) * c.par.global_batch;
        std::unique_ptr<MegatronSamples> ts;
        try {
          ts = std::make_unique<MegatronSamples>(to);
        } catch (const UsageError& e) {
          if (report) fmt::print("test: not evaluated: {}\n", e.what());
          return;
        }
        if (report) {
          fmt::print("test: split test of --split {}, {} samples for one evaluation after training\n", c.split,
                     to.num_samples);
          print_dataset_uses(*ts);
        }
        test = std::move(ts);
      });
  } else {
    phase([&] {
      if (c.data == "synthetic") {
        samples = std::make_unique<SyntheticSamples>(m.vocab_size, m.seq_length, c.seed);
        // Synthetic data has no split: the evaluations read another synthetic stream (seed + 1).
        if (c.eval_iters > 0) valid = std::make_unique<SyntheticSamples>(m.vocab_size, m.seq_length, c.seed + 1);
      } else {
        ds = std::make_unique<IndexedDataset>(IndexedDataset::open(c.data));
        check_vocab(*ds, m.vocab_size, "--vocab-size");
        auto dsamples = std::make_unique<DatasetSamples>(*ds, m.seq_length, c.seed);
        const int64_t drawn = int64_t(c.iters) * c.par.global_batch;
        data_sources = fmt::format("{}:{:.6g}", drawn, double(drawn) / double(dsamples->num_samples()));
        samples = std::move(dsamples);
      }
    });
  }

  Backend* backend = &dev.backend();
  if (rank0) dev.reset_peak();
  world.barrier();
  StageModel model = build_stage_model(m, c.par.tp, g.me.tp, g.me.pp, c.par.layer_split(m.layers), *backend, g.tp.get(),
                                       c.seed, precision_dtype(c.precision), c.par.sequence_parallel);
  TrainConfig tc;
  tc.micro_batch = c.par.micro_batch;
  tc.global_batch = c.par.global_batch;
  tc.recompute = c.par.recompute;
  tc.optimizer = c.opt;
  tc.overlap_grad_reduce = c.overlap_grad_reduce;
  tc.grad_bucket_elems = c.grad_bucket_elems;
  tc.schedule = parse_schedule(c.par.schedule);
  tc.scatter_gather = c.par.scatter_gather;
  tc.skip_nonfinite = c.skip_nonfinite;
  tc.loss_scale = loss_scale_config(c);
  tc.zero = c.par.zero;
  Trainer trainer(model.pointers(), *samples, tc,
                  TrainerGroups{g.dp.get(), g.mp.get(), g.pp.get(), g.tp.get(), g.embedding.get(), &world});
  CheckpointLayout ckpt{c.par.tp, c.par.pp, c.par.vpp, g.me.tp, g.me.pp, m.layers, m.hidden, m.heads, m.seq_length,
                        m.vocab_size, c.seed, c.par.global_batch, c.par.zero, c.par.dp, g.me.dp, m.arch,
                        m.ffn_hidden()};
  ckpt.bucket_elems = c.grad_bucket_elems;
  ckpt.query_groups = m.groups();
  ckpt.norm_eps = m.layernorm_eps, ckpt.rope_theta = m.rope_theta;
  const LayerSplit split = c.par.layer_split(m.layers);
  ckpt.first_stage_layers = stage_layer_count(split, 0);
  ckpt.last_stage_layers = stage_layer_count(split, c.par.pp - 1);
  if (!split.chunks.empty()) ckpt.layout_hash = pipeline_layout_hash(canonical_layout(split.chunks));
  // The id of this run's saves, drawn on world rank 0 and given to every rank: each save's
  // shards and manifest carry it mixed with the iteration (checkpoint.h: a checkpoint is one unit).
  uint64_t run_id = 0;
  if (!c.save_dir.empty() || !c.save_init_dir.empty()) {
    Tensor id = Tensor::zeros({2}, DType::I32);
    if (rank0) std::memcpy(id.raw(), &(run_id = new_save_id()), sizeof run_id);
    given_world.broadcast(id, 0);
    std::memcpy(&run_id, id.raw(), sizeof run_id);
  }
  auto save_id_of = [&](int64_t it) {
    uint64_t x = run_id ^ (0x9E3779B97F4A7C15ull * uint64_t(it + 1));
    x ^= x >> 31;
    return x ? x : 1;
  };
  int start = 0;
  if (!c.load_dir.empty()) {
    int64_t it = 0;
    CheckpointState st;
    phase([&] {
      uint64_t id = 0;
      it = read_latest(c.load_dir, &id);
      if (it >= c.iters)
        usage_error("--load {}: the checkpoint is at iteration {}, not before --iters {}", c.load_dir, it, c.iters);
      st = load_shard(c.load_dir, it, ckpt, model.pointers(), trainer.optimizers(), id);
    });
    if (processes)
      require_same_fields(given_world, {{"the iteration of --load " + c.load_dir, std::to_string(it)}},
                          "every rank must read the same checkpoint (one shared directory, or the same copy on every "
                          "node)");
    trainer.sync_params();  // sharded: each rank loaded its pieces of the weights
    if (trainer.loss_scaler().dynamic()) {
      if (st.loss_scale > 0) {
        trainer.loss_scaler().restore({st.loss_scale, st.scale_growth, st.scale_hysteresis});
      } else if (report) {  // saved without dynamic loss scaling (f32, bf16): its scale of 1 is no f16 state
        fmt::print("note: the checkpoint in {} was saved without dynamic loss scaling; f16 starts at "
                   "--initial-loss-scale {:g}\n",
                   c.load_dir, trainer.loss_scaler().scale());
      }
    }
    trainer.set_iteration(it);
    start = static_cast<int>(it);
    if (report) fmt::print("loaded the checkpoint of iteration {} from {}\n", it, c.load_dir);
  }
  // Data-parallel rank 0 writes its (tp, pp) shard (sharded optimizer state: every data-parallel
  // rank its own); world rank 0 the marker, last.
  const bool writes_shard = g.me.dp == 0 || c.par.zero > 0;
  auto save = [&](int it) {
    const LossScaler::State ls = trainer.loss_scaler().state();
    // A loss scale of 0 in the checkpoint: no dynamic loss-scaler state (f32, bf16, fixed scale).
    const CheckpointState st{it, trainer.loss_scaler().dynamic() ? ls.scale : 0.0, int32_t(ls.growth),
                             int32_t(ls.hysteresis), save_id_of(it)};
    phase([&] {
      if (writes_shard) save_shard(c.save_dir, ckpt, st, model.pointers(), trainer.optimizers());
    });
    phase([&] {
      if (world.rank() == 0) write_latest(c.save_dir, it, st.save_id);
    });
    if (report) fmt::print("saved the checkpoint of iteration {} to {}\n", it, c.save_dir);
  };
  if (!c.save_init_dir.empty()) {  // the initial weights and zero optimizer state, as iteration 0
    phase([&] {
      if (writes_shard)
        save_shard(c.save_init_dir, ckpt, CheckpointState{0, 1.0, 0, 0, save_id_of(0)}, model.pointers(),
                   trainer.optimizers());
    });
    phase([&] {
      if (world.rank() == 0) write_latest(c.save_init_dir, 0, save_id_of(0));
    });
    if (report) fmt::print("saved the initial weights (iteration 0) to {}\n", c.save_init_dir);
  }

  if (report)
    fmt::print("ptdp train: model {} (l={} h={} a={} s={} V={}, {:.3g}M parameters), t={} p={} d={} on {} {} rank(s), "
               "v={} b={} B={} m={}, schedule {}, recompute {}, scatter/gather {}{}{}, backend {} {}{}, {} iterations ({} "
               "untimed), data {}\n",
               m.name, m.layers, m.hidden, m.heads, m.seq_length, m.vocab_size, params_exact(m) / 1e6, c.par.tp,
               c.par.pp, c.par.dp, c.ranks, c.comm, c.par.vpp, c.par.micro_batch, c.par.global_batch,
               trainer.num_microbatches(), c.par.schedule, recompute_name(c.par.recompute),
               c.par.scatter_gather && !c.par.sequence_parallel ? "on" : "off",
               c.par.sequence_parallel ? ", sequence parallel" : "", c.par.zero == 1 ? ", distributed optimizer (--zero 1)" : c.par.zero == 3 ? ", ZeRO-3" : "", c.backend,
               c.precision,
               c.comm == "local" && c.backend == "cpu" ? fmt::format(" ({} CPU thread(s) per rank)", rank_threads) : "",
               c.iters, c.warmup, c.data);
  if (report) {
    const OptimizerConfig& o = c.opt;
    fmt::print("optimizer: AdamW lr {:g}{}, beta1 {:g} beta2 {:g} eps {:g}, weight decay {:g}, clip {:g}\n", o.lr.max_lr,
               o.lr.decay_iters > 0 ? fmt::format(" (warm-up {} iterations, cosine to {:g} at iteration {})",
                                                  o.lr.warmup_iters, o.lr.min_lr, o.lr.decay_iters)
               : o.lr.warmup_iters > 0 ? fmt::format(" (warm-up {} iterations, then constant)", o.lr.warmup_iters)
                                       : std::string(" constant"),
               o.beta1, o.beta2, o.eps, o.weight_decay, o.clip_grad);
    if (valid && c.data == "synthetic")
      fmt::print("valid: another synthetic stream (seed {}), {} x {} samples per evaluation, {}after the last iteration\n",
                 c.seed + 1, c.eval_iters, c.par.global_batch,
                 c.eval_interval > 0 ? fmt::format("every {} iterations and ", c.eval_interval) : "");
  }
  const double flops = flops_eq3(m, c.par.global_batch);
  const double tokens = double(c.par.global_batch) * m.seq_length;
  std::vector<IterStats> timed;
  std::vector<double> bubbles;
  std::vector<std::pair<int, IterStats>> loss_log;  // every iteration, for --loss-log
  double loss = 0;
  // The iteration's time, bubble and activations of the slowest rank, and a stop request
  // (SIGINT/SIGTERM) of any rank: every rank sees it after the same iteration.
  Tensor worst = Tensor::empty({4}, DType::F64);
  int last = start;
  LogInterval interval;
  // Evaluations done before this run (a resumed run continues the valid samples where they were,
  // as Megatron-LM's consumed_valid_samples), and the last one's loss.
  int64_t evaluations = c.eval_interval > 0 ? start / c.eval_interval : 0;
  double valid_loss = NAN;
  bool evaluated = false;
  // The mean loss of eval_iters global batches of `source` from sample `first`; a failing rank
  // ends the others with its cause.
  auto loss_on = [&](const SampleSource& source, int64_t first) {
    try {
      return trainer.evaluate(source, first, c.eval_iters);
    } catch (const std::exception& e) {
      stop_others_if_processes(given_world, e);
      throw;
    }
  };
  auto evaluate = [&](int it, bool after_training) {
    valid_loss = loss_on(*valid, evaluations * c.eval_iters * c.par.global_batch);
    ++evaluations;
    evaluated = true;
    if (!report) return;
    if (c.log_format == "megatron") {
      fmt::print("{}", megatron_validation_lines(it, after_training, valid_loss));
    } else {
      fmt::print(" validation at iteration {:>6}{} | loss {:.6f} | ppl {:.6g} | {} x {} samples of the valid split\n", it,
                 after_training ? " (after training)" : "", valid_loss, std::exp(valid_loss), c.eval_iters,
                 c.par.global_batch);
    }
    std::fflush(stdout);
  };
  for (int it = start + 1; it <= c.iters; ++it) {
    IterStats st;
    try {
      st = trainer.step();
      // An iteration lasts as long as its slowest rank; bubble and activations: the worst stage.
      worst.data<double>()[0] = st.time_ms;
      worst.data<double>()[1] = st.bubble_fraction();
      worst.data<double>()[2] = double(st.peak_activation_bytes);
      worst.data<double>()[3] = double(stop_signal());
      world.all_reduce(worst, ReduceOp::Max);
    } catch (const std::exception& e) {
      stop_others_if_processes(given_world, e);
      throw;
    }
    st.time_ms = worst.data<double>()[0];
    const double bubble = worst.data<double>()[1];
    st.peak_activation_bytes = int64_t(worst.data<double>()[2]);
    const int stop = int(worst.data<double>()[3]);
    last = it;
    if (it - start > c.warmup || it == c.iters) {  // a resumed run times at least its last iteration
      timed.push_back(st);
      bubbles.push_back(bubble);
    }
    if (it - start == c.warmup && it < c.iters) backend->profile_restart();  // PTDP_OP_PROFILE: timed iterations only
    loss = st.loss;
    if (!c.loss_log.empty()) loss_log.emplace_back(it, st);
    if (report && st.skipped) {
      if (trainer.loss_scaler().dynamic())
        fmt::print(" iteration {}: gradients overflowed at loss scale {:g}, update skipped; loss scale now {:g}\n", it,
                   st.loss_scale, trainer.loss_scaler().scale());
      else
        fmt::print(" iteration {}: non-finite loss or gradients, update skipped\n", it);
    }
    interval.add(st);
    if (report && (it % c.log_interval == 0 || it == c.iters)) {
      if (c.log_format == "megatron") {
        fmt::print("{}\n", interval.megatron_line(it, c, flops_model(m, c.par.global_batch),
                                                  trainer.loss_scaler().dynamic() ? trainer.loss_scaler().scale() : 1.0));
      } else {
        // A CPU run's throughput reads in GFLOP/s (0.005 TFLOP/s says little).
        const double flops_per_gpu = flops / (st.time_ms / 1e3) / c.ranks;
        const std::string rate = c.backend == "cpu" ? fmt::format("{:7.2f} GFLOP/s", flops_per_gpu / 1e9)
                                                    : fmt::format("{:7.3f} TFLOP/s", flops_per_gpu / 1e12);
        fmt::print(" iteration {:>6}/{} | loss {:.4f} | {:9.2f} ms | {} | {:9.0f} tokens/s | lr {:.3e} | "
                   "grad norm {:.3f} | fwd {:.1f} bwd {:.1f} p2p-wait {:.1f} dp {:.1f} opt {:.1f} ms | bubble {:.3f}{}\n",
                   it, c.iters, st.loss, st.time_ms, rate, tokens / (st.time_ms / 1e3), st.lr, st.grad_norm, st.fwd_ms,
                   st.bwd_ms, st.p2p_wait_ms, st.dp_ms, st.opt_ms, bubble,
                   trainer.loss_scaler().dynamic() ? fmt::format(" | loss scale {:g}", trainer.loss_scaler().scale())
                                                   : "");
      }
      std::fflush(stdout);
      interval = LogInterval{};
    }
    if (valid && c.eval_interval > 0 && it % c.eval_interval == 0) evaluate(it, false);
    const bool saves = !c.save_dir.empty() && ((c.save_interval > 0 && it % c.save_interval == 0) || it == c.iters);
    if (saves || (stop != 0 && !c.save_dir.empty() && it < c.iters)) save(it);
    if (stop != 0 && it < c.iters) {
      if (rank0) note_stopped_after(it);
      if (report)
        fmt::print("stopped by {} after iteration {} of {}{}; writing what the iterations so far measured\n",
                   stop == SIGINT ? "SIGINT" : stop == SIGTERM ? "SIGTERM" : fmt::format("signal {}", stop), it, c.iters,
                   c.save_dir.empty() ? "" : fmt::format(" (its checkpoint is in {})", c.save_dir));
      break;
    }
  }
  if (valid && last == c.iters) evaluate(last, true);  // not after a stop request
  if (test && last == c.iters) {
    const double test_loss = loss_on(*test, 0);
    if (report && c.log_format == "megatron")
      fmt::print("{}", megatron_evaluation_lines(fmt::format("iteration {} on test set", last), test_loss));
    else if (report)
      fmt::print(" test after iteration {:>6} | loss {:.6f} | ppl {:.6g} | {} x {} samples of the test split\n", last,
                 test_loss, std::exp(test_loss), c.eval_iters, c.par.global_batch);
    std::fflush(stdout);
  }
  phase([&] {  // rank 0 writes the loss log; its failure ends every rank with the cause
    if (rank0 && !c.loss_log.empty()) write_user_file(c.loss_log, loss_log_csv(loss_log));
  });
  if (!rank0) return std::nullopt;
  if (report && !c.loss_log.empty())
    fmt::print("wrote the loss of {} iteration(s) to {}\n", loss_log.size(), c.loss_log);
  if (timed.empty()) {  // stopped inside the warm-up: nothing was timed
    if (report) fmt::print("no timed iteration (stopped within --warmup {}): no result row\n", c.warmup);
    return std::nullopt;
  }
  Breakdown bd;
  auto med = [&](auto field) {
    std::vector<double> v;
    for (const auto& t : timed) v.push_back(field(t));
    return median(v);
  };
  const double iter_ms = med([](const IterStats& t) { return t.time_ms; });
  // A skipped step (f16 overflow) runs no AdamW: a timed window of them measures less than a step.
  const auto skipped = std::count_if(timed.begin(), timed.end(), [](const IterStats& t) { return t.skipped; });
  if (skipped > 0)
    fmt::print(stderr,
               "ptdp: warning: {} of the {} timed iterations skipped the optimizer step (loss-scale overflow or "
               "non-finite gradients), so the timing leaves out their update; time more iterations, or start f16 from "
               "a lower --initial-loss-scale\n",
               skipped, timed.size());
  bd.fwd_ms = med([](const IterStats& t) { return t.fwd_ms; });
  bd.bwd_ms = med([](const IterStats& t) { return t.bwd_ms; });
  bd.p2p_wait_ms = med([](const IterStats& t) { return t.p2p_wait_ms; });
  bd.dp_ms = med([](const IterStats& t) { return t.dp_ms; });
  bd.opt_ms = med([](const IterStats& t) { return t.opt_ms; });
  bd.p2p_bytes = timed.back().p2p_bytes;
  bd.bubble = median(bubbles);
  bd.activation_gb = double(timed.back().peak_activation_bytes) / 1e9;
  // Host memory of this process; with local ranks the mean per rank.
  const int local_ranks = c.comm == "local" ? c.ranks : 1;
  const double peak_gb = dev.peak_gb(local_ranks);
  // Weights, gradients and optimizer state allocated on this rank (--zero shrinks the last).
  const int64_t state_bytes = trainer.state_bytes(), chunk_params = trainer.parameters();
  if (report)
    fmt::print("done: median iteration {:.2f} ms over {} timed iterations, final loss {:.4f}, peak memory {:.3f} GB "
               "per rank, activations {:.4f} GB on the fullest stage, bubble {:.3f}, {} bytes sent per iteration by "
               "rank 0\n",
               iter_ms, timed.size(), loss, peak_gb, bd.activation_gb, bd.bubble, bd.p2p_bytes);
  if (report && c.gemm_rate) {
    // Model FLOPs (recomputation not counted) per second of the median step, against sgemm over
    // the same GEMM shapes on this thread's CPU threads, timed now that training is done.
    const double step_gflops = flops_model(m, c.par.global_batch) / (iter_ms / 1e3) / 1e9;
    const double sgemm = cpu::sgemm_gflops(cpu::model_gemms(m, int64_t(c.par.micro_batch) * m.seq_length), 2.0);
    fmt::print("gemm rate: the step runs {:.1f} GFLOP/s of model FLOPs = {:.0f}% of sgemm at the model's shapes "
               "({:.1f} GFLOP/s, {} CPU thread(s))\n",
               step_gflops, 100.0 * step_gflops / sgemm, sgemm, rank_threads);
  }
  if (report)
    fmt::print("model and optimizer state on rank 0: {} bytes for {} parameters ({:.3f} bytes per parameter: "
               "weights, gradients, master weights and Adam moments{})\n",
               state_bytes, chunk_params, double(state_bytes) / double(chunk_params),
               c.par.zero == 1   ? fmt::format(", the optimizer's sharded over d={}", c.par.dp)
               : c.par.zero == 3 ? fmt::format(", all sharded over d={}; at most {} bytes of gathered layers and their "
                                               "gradients at once",
                                               c.par.dp, trainer.sharded_params()->peak_gathered_bytes())
                                 : std::string());
  RunConfig ran = c;  // a stopped run's row says how many iterations it reached
  ran.iters = last;
  ResultRow row = make_row(ran, iter_ms, loss, peak_gb, bd);
  row.set("data_sources", data_sources);
  if (evaluated) {  // the last evaluation's
    row.set("valid_loss", valid_loss);
    row.set("valid_ppl", std::exp(valid_loss));
  }
  return row;
}

}  // namespace

std::optional<ResultRow> run_training(const RunConfig& c, Communicator* mpi_world, bool verbose) {
  // --comm nccl: one process per GPU under mpirun/srun (bootstrapped over MPI), else thread ranks.
  const bool processes = c.comm == "mpi" || (c.comm == "nccl" && mpi_world);
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(c.comm_timeout_s * 1000));
  if (processes) {
    PTDP_CHECK(mpi_world != nullptr, "--comm {} without an MPI world", c.comm);
    mpi_world->set_timeout(timeout);
    // Every process checks (a directory can be missing on one node); every rank ends with the cause.
    agree(*mpi_world, [&] {
      require_supported(c);
      preflight(c, false);
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
