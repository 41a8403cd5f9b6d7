#include "experiments/cli_flags.h"

#include <charconv>
#include <cstdint>

#include "core/common/error.h"
#include "core/common/one_line.h"
#include "experiments/recipe.h"

namespace ptdp {

uint64_t parse_seed(const std::string& text) {
  uint64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size())
    throw CLI::ValidationError(
        fmt::format("--seed {} must be a whole number from 0 to {}", one_line(text), UINT64_MAX));
  return v;
}

void add_model_flags(CLI::App& app, RunFlags& f) {
  app.add_option("--model", f.model,
                 "model preset (tiny, small, gpt-1.7b ... gpt-1t, fig7-1b, ..., llama-tiny, llama-tiny-gqa, llama-7b "
                 "... llama-65b, llama2-70b, llama3-8b, llama3-70b)");
  app.add_option("--arch", f.arch, "gpt | llama (default: the preset's; gpt without --model)");
  app.add_option("--layers,--num-layers", f.layers, "transformer layers (overrides the preset)");
  app.add_option("--hidden,--hidden-size", f.hidden, "hidden size");
  app.add_option("--heads,--num-attention-heads", f.heads, "attention heads");
  app.add_flag("--group-query-attention", f.group_query_attention,
               "grouped-query attention (Megatron's flag): --num-query-groups key/value heads shared by the query "
               "heads (default 1 without a GQA preset)");
  app.add_option("--num-query-groups", f.query_groups,
                 "query groups of grouped-query attention (key/value heads); needs --group-query-attention, as in "
                 "Megatron-LM, and must divide --heads (and be divisible by --tp)");
  app.add_option("--ffn-hidden-size", f.ffn_hidden_size,
                 "MLP hidden size (llama: of gate and up each); default 4h, llama 8h/3 rounded up to 256, or the "
                 "preset's");
  app.add_option("--norm-epsilon", f.norm_eps, "LayerNorm / RMSNorm epsilon (default 1e-5, or the preset's)");
  app.add_option("--seq-length", f.seq_length, "sequence length");
  app.add_option("--vocab-size", f.vocab_size, "vocabulary size");
  app.add_option("--make-vocab-size-divisible-by", f.vocab_divisible,
                 "pad the vocabulary to a multiple of this times --tp")->capture_default_str();
}

void add_parallel_flags(CLI::App& app, RunFlags& f) {
  ParallelConfig& p = f.run.par;
  app.add_option("--tp,--tensor-model-parallel-size", p.tp, "tensor-parallel size t")->capture_default_str();
  app.add_option("--pp,--pipeline-model-parallel-size", p.pp, "pipeline-parallel size p")->capture_default_str();
  app.add_option("--dp", p.dp, "data-parallel size d (default: ranks / (t*p))");
  app.add_option("--vpp,--virtual-pipeline-model-parallel-size,--num-virtual-stages-per-pipeline-rank", p.vpp,
                 "model chunks per stage v (interleaved schedule)")->capture_default_str();
  app.add_option("--decoder-first-pipeline-num-layers", p.first_stage_layers,
                 "layers of the first pipeline stage (Megatron-core's uneven stages; default: an even share)");
  app.add_option("--decoder-last-pipeline-num-layers", p.last_stage_layers,
                 "layers of the last pipeline stage (default: an even share); the other stages share the rest evenly");
  app.add_flag("--account-for-embedding-in-pipeline-split", p.embedding_in_split,
               "count the embedding as a layer when splitting layers over stages: the first chunk of stage 0 holds "
               "one transformer layer fewer (Megatron-core's flag)");
  app.add_flag("--account-for-loss-in-pipeline-split", p.loss_in_split,
               "count the loss (the output layer) as a layer: the last chunk of the last stage holds one "
               "transformer layer fewer");
  app.add_option("--pipeline-model-parallel-layout", p.pipeline_layout,
                 "each virtual stage's layers, Megatron-core's string: E embedding, t transformer layer, L loss, '|' "
                 "between virtual stages (stage i % p, chunk i / p), \"(...)*n\" and \"t*n\" repeat; "
                 "e.g. \"Et*3|(t*4|)*6,t*3L\" (sets --vpp)");
  app.add_option("--micro-batch,--micro-batch-size", p.micro_batch, "micro-batch size b")->capture_default_str();
  app.add_option("--global-batch,--global-batch-size", p.global_batch, "global batch size B (default: b*d)");
  app.add_option("--schedule", p.schedule, "gpipe | 1f1b | interleaved")->capture_default_str();
  app.add_option("--recompute,--recompute-granularity", f.recompute, "activation recomputation: none | full | selective")
      ->capture_default_str();
  app.add_flag("--scatter-gather,!--no-scatter-gather", f.scatter_gather,
               "scatter/gather optimisation of pipeline sends (default on)");
  app.add_flag("--sequence-parallel", p.sequence_parallel,
               "sequence parallelism (Korthikanti et al. 2022): LayerNorms, residuals and the activations between "
               "layers and stages hold 1/t of the b*s rows per tensor-parallel rank; all-gather before and "
               "reduce-scatter after the tensor-parallel GEMMs replace the all-reduces (needs --tp > 1 dividing "
               "--micro-batch x --seq-length)");
  app.add_option("--zero", p.zero,
                 "sharded data parallelism: 0 none, 1 the distributed optimizer (optimizer state sharded over d, "
                 "gradients reduce-scattered), 3 ZeRO-3 (parameters sharded too; t = p = 1)")
      ->capture_default_str();
  app.add_flag_callback("--use-distributed-optimizer", [&p] { p.zero = 1; },
                        "Megatron's name for --zero 1 (the distributed optimizer)");
}

void add_run_flags(CLI::App& app, RunFlags& f) {
  RunConfig& r = f.run;
  OptimizerConfig& o = r.opt;
  app.add_option("--backend", r.backend, "cpu | cuda")->capture_default_str();
  app.add_option("--comm", r.comm, "local | mpi | nccl")->capture_default_str();
  app.add_option("--ranks", r.ranks, "ranks (default t*p*d)");
  app.add_option("--precision", r.precision, "f32 | bf16 | f16")->capture_default_str();
  app.add_flag_callback("--fp16", [&r] { r.precision = "f16"; }, "Megatron's name for --precision f16");
  app.add_flag_callback("--bf16", [&r] { r.precision = "bf16"; }, "Megatron's name for --precision bf16");
  app.add_option("--iters,--train-iters", r.iters, "training iterations in all")->capture_default_str();
  app.add_option("--warmup", r.warmup, "first iterations left out of the timing")->capture_default_str();
  app.add_option_function<std::string>(
         "--seed", [&r](const std::string& v) { r.seed = parse_seed(v); }, "seed of initialisation and data order")
      ->default_str(std::to_string(r.seed));
  app.add_option("--recipe", f.recipe,
                 "optimizer recipe: default | llama (Touvron et al.: beta2 0.95, weight decay 0.1, clip 1.0, 2000 "
                 "warm-up iterations, cosine to 10% of the peak lr at --iters, Table 2's lr for llama-7b..65b); "
                 "flags given explicitly win")
      ->capture_default_str();
  app.add_option("--lr", o.lr.max_lr, "peak learning rate")->capture_default_str();
  app.add_option("--min-lr", o.lr.min_lr, "learning rate at the end of the decay")->capture_default_str();
  app.add_option("--lr-warmup-iters", o.lr.warmup_iters, "linear warm-up iterations")->capture_default_str();
  app.add_option("--lr-decay-iters", o.lr.decay_iters, "cosine decay ends here (0: no decay)")
      ->capture_default_str();
  app.add_option("--weight-decay", o.weight_decay, "AdamW weight decay")->capture_default_str();
  app.add_option("--clip-grad", o.clip_grad, "global gradient-norm clip (0: off)")->capture_default_str();
  app.add_option("--adam-beta1", o.beta1, "Adam beta1")->capture_default_str();
  app.add_option("--adam-beta2", o.beta2, "Adam beta2")->capture_default_str();
  app.add_option("--adam-eps", o.eps, "Adam epsilon")->capture_default_str();
  app.add_option("--data,--data-path", r.data,
                 "synthetic | PREFIX of a Megatron .bin/.idx dataset | with --data-order megatron, Megatron's list "
                 "'W1 PREFIX1 W2 PREFIX2 ...' (a weighted blend) or 'PREFIX1 PREFIX2 ...' (blended by size)")
      ->capture_default_str();
  app.add_option("--data-order", r.data_order,
                 "ptdp (fixed windows over the token stream, seeded Fisher-Yates per epoch) | megatron "
                 "(Megatron-core's GPTDataset/BlendedDataset order: the same samples as Megatron-LM for the same "
                 "files, --seed and --split)")
      ->capture_default_str();
  app.add_option("--split", r.split, "with --data-order megatron: train,valid,test shares of the documents")
      ->capture_default_str();
  app.add_option("--data-cache-path", r.data_cache,
                 "with --data-order megatron: where the index files (.npy, named as Megatron-core names them) "
                 "are built and reused, Megatron's own among them (default: Megatron-core's, "
                 "PREFIX/cache/GPTDataset_indices)");
  app.add_option("--csv", r.csv, "append the result row to this CSV file");
  app.add_option("--experiment", r.experiment, "experiment name in the result row")->capture_default_str();
  app.add_flag("--overlap-grad-reduce", r.overlap_grad_reduce,
               "overlap each data-parallel gradient bucket's all-reduce with the backward pass");
  app.add_option("--grad-bucket-size,--ddp-bucket-size", r.grad_bucket_elems, "data-parallel all-reduce bucket, in elements")
      ->capture_default_str();
  app.add_option("--comm-timeout", r.comm_timeout_s,
                 "seconds a rank waits for another in a collective or receive before the run stops")
      ->capture_default_str();
  app.add_option("--save", r.save_dir, "write checkpoints to this directory");
  app.add_option("--save-interval", r.save_interval, "checkpoint every N iterations (0: at the end only)")
      ->capture_default_str();
  app.add_option("--load", r.load_dir, "resume from the latest checkpoint in this directory");
  app.add_flag("--skip-nonfinite", r.skip_nonfinite, "skip steps whose loss or gradients are not finite");
  app.add_option("--loss-scale", r.loss_scale, "f16: a constant loss scale (0: dynamic)")->capture_default_str();
  app.add_option("--initial-loss-scale", r.initial_loss_scale, "f16: the dynamic loss scale to start from")
      ->capture_default_str();
  app.add_option("--min-loss-scale", r.min_loss_scale, "f16: the dynamic loss scale's floor")->capture_default_str();
  app.add_option("--loss-scale-window", r.loss_scale_window, "f16: clean steps before the scale doubles")
      ->capture_default_str();
  app.add_option("--hysteresis", r.hysteresis, "f16: overflows tolerated before the scale halves")
      ->capture_default_str();
  app.add_option("--log-format", r.log_format,
                 "the progress line: ptdp, or megatron (Megatron-LM's training_log line: its keys, units and "
                 "averages over the interval, so that its log parsers read it)")
      ->capture_default_str();
  app.add_option("--log-interval", r.log_interval, "print a progress line every N iterations")
      ->capture_default_str();
  app.add_option("--eval-iters", r.eval_iters,
                 "evaluate the loss and perplexity over N global batches of the valid split (--data-order megatron; "
                 "synthetic data: another synthetic stream) after the last iteration, and with the Megatron order N "
                 "batches of the test split once after training (0: no evaluation)")
      ->capture_default_str();
  app.add_option("--eval-interval", r.eval_interval,
                 "with --eval-iters: also evaluate every N iterations, each time on the next N x B valid samples, as "
                 "Megatron-LM (0: after the last iteration only)")
      ->capture_default_str();
  app.add_option("--loss-log", r.loss_log,
                 "write iteration,loss,grad_norm,lr of every iteration to this CSV at the end (atomically)");
  app.add_flag("--gemm-rate", r.gemm_rate,
               "after the run, time OpenBLAS sgemm at this model's GEMM shapes (one layer's and the logits', "
               "forward and backward) and print the step's model FLOP/s against it (cpu backend, one rank)");
  app.add_option("--save-init", r.save_init_dir,
                 "before training, write the initial weights to DIR as the checkpoint of iteration 0");
}

RunConfig resolve_run_config(const CLI::App& app, RunFlags& f) {
  RunConfig r = f.run;
  // Whether the user gave FLAG (false for a flag this command does not have).
  auto given = [&](const char* flag) { return app.get_option_no_throw(flag) && app.count(flag) > 0; };
  const char* sizes[] = {"--layers", "--hidden", "--heads", "--seq-length", "--vocab-size"};
  if (given("--model")) {
    r.model = preset_config(f.model);
  } else {
    for (const char* flag : sizes)
      if (!given(flag)) usage_error("{} is required without --model", flag);
  }
  bool custom = false;
  for (const char* flag : sizes) custom = custom || given(flag);
  if (given("--layers")) r.model.layers = f.layers;
  if (given("--hidden")) r.model.hidden = f.hidden;
  if (given("--heads")) r.model.heads = f.heads;
  if (given("--seq-length")) r.model.seq_length = f.seq_length;
  if (given("--vocab-size")) r.model.vocab_size = f.vocab_size;
  if (given("--arch")) {
    const Arch a = parse_arch(f.arch);
    custom = custom || a != r.model.arch;
    r.model.arch = a;
  }
  // Grouped-query attention as Megatron-LM: --num-query-groups takes effect with
  // --group-query-attention only (Megatron ignores it otherwise; ptdp refuses it), and the flag
  // alone means Megatron's default of 1 group, or the preset's groups.
  if (given("--num-query-groups") && !f.group_query_attention)
    usage_error("--num-query-groups {} needs --group-query-attention (as in Megatron-LM, which ignores it without)",
                f.query_groups);
  if (f.group_query_attention) {
    const int groups = given("--num-query-groups") ? f.query_groups : (r.model.query_groups > 0 ? r.model.query_groups : 1);
    if (groups <= 0) usage_error("--num-query-groups {} must be positive", groups);
    custom = custom || groups != r.model.query_groups;
    r.model.query_groups = groups;
  }
  if (given("--ffn-hidden-size")) {
    if (f.ffn_hidden_size <= 0) usage_error("--ffn-hidden-size {} must be positive", f.ffn_hidden_size);
    custom = custom || f.ffn_hidden_size != r.model.ffn_hidden();
    r.model.ffn_hidden_size = f.ffn_hidden_size;
  }
  if (given("--norm-epsilon")) {
    if (!(f.norm_eps > 0)) usage_error("--norm-epsilon {} must be positive", f.norm_eps);
    custom = custom || f.norm_eps != r.model.layernorm_eps;
    r.model.layernorm_eps = f.norm_eps;
  }
  if (custom) r.model.name = given("--model") ? f.model + "-custom" : (r.model.arch == Arch::Llama ? "llama-custom" : "custom");
  r.model.make_vocab_size_divisible_by = f.vocab_divisible;
  r.par.recompute = parse_recompute(f.recompute);
  r.par.scatter_gather = f.scatter_gather;
  // A path flag given an empty value is a mistake (an unset variable in a script), not "none".
  for (const char* flag : {"--csv", "--save", "--load", "--loss-log", "--save-init", "--data", "--experiment"})
    if (given(flag) && app.get_option(flag)->as<std::string>().empty())
      usage_error("{} '': needs a value (leave the flag out for none)", flag);
  for (char ch : r.experiment)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      usage_error("--experiment: control characters (newlines, tabs) are not allowed in a result's name");
  if (f.trains && app.get_option_no_throw("--recipe"))
    apply_recipe(f.recipe, given("--model") ? f.model : std::string(), given, r);
  validate_run(r);
  return r;
}

}  // namespace ptdp
