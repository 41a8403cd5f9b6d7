// OptimizerConfig's fields: AdamW and its learning-rate schedule.
#include <fmt/format.h>

#include "core/config/config_fields.h"

namespace ptdp {

namespace {

// Megatron-core's precision-aware optimizer (Transformer Engine's FusedAdam): the dtypes the
// optimizer keeps its master weights, gradients and Adam moments in. Each changes the memory of a
// step, so each is in the key; the state's dtypes are recorded in checkpoints (a resume across them
// is refused).
void add_precision_aware_fields(std::vector<Field>& v) {
  const FieldGroup g = FieldGroup::Optimizer;
  v.push_back(Field(PTDP_MEMBER(opt.precision_aware), "use_precision_aware_optimizer", g)
                  .flags("--use-precision-aware-optimizer")
                  .help("keep the optimizer's master weights, gradients and Adam moments in the dtypes "
                        "--main-params-dtype, --main-grads-dtype, --exp-avg-dtype, --exp-avg-sq-dtype give "
                        "(Megatron-core's flag; needs --zero 1 or 3)")
                  .column()
                  .key("0")
                  .in_specs());
  struct StateDtype {
    DType& (*ref)(RunConfig&);
    const char *name, *flag, *what, *choices;
  };
  const StateDtype dtypes[] = {
      {PTDP_MEMBER(opt.main_params_dtype), "main_params_dtype", "--main-params-dtype", "the master weights",
       "f32 | f16"},
      {PTDP_MEMBER(opt.main_grads_dtype), "main_grads_dtype", "--main-grads-dtype",
       "the gradients the optimizer reads", "f32 | bf16"},
      {PTDP_MEMBER(opt.exp_avg_dtype), "exp_avg_dtype", "--exp-avg-dtype", "Adam's first moment",
       "f32 | bf16 | f16"},
      {PTDP_MEMBER(opt.exp_avg_sq_dtype), "exp_avg_sq_dtype", "--exp-avg-sq-dtype", "Adam's second moment",
       "f32 | bf16 | f16"},
  };
  for (const StateDtype& d : dtypes)
    v.push_back(Field(d.ref, d.name, g)
                    .flags(d.flag)
                    .help(fmt::format("{}: the dtype of {} with --use-precision-aware-optimizer (Megatron-core's "
                                      "flag); each step reads it, computes in f32 and rounds back",
                                      d.choices, d.what))
                    .column()
                    .key("f32")
                    .in_specs()
                    .checkpoint());
}

}  // namespace

const std::vector<Field>& optimizer_fields() {
  static const std::vector<Field> fields = [] {
    const FieldGroup g = FieldGroup::Optimizer;
    std::vector<Field> v;
    // The optimizer's numbers change the weights a step computes, not its work.
    v.push_back(Field(PTDP_MEMBER(opt.lr.max_lr), "lr", g).flags("--lr").help("peak learning rate").finite().positive());
    v.push_back(
        Field(PTDP_MEMBER(opt.lr.min_lr), "min_lr", g).flags("--min-lr").help("learning rate at the end of the decay").finite());
    v.push_back(Field(PTDP_MEMBER(opt.lr.warmup_iters), "lr_warmup_iters", g)
                    .flags("--lr-warmup-iters")
                    .help("linear warm-up iterations")
                    .non_negative());
    v.push_back(Field(PTDP_MEMBER(opt.lr.warmup_fraction), "lr_warmup_fraction", g)
                    .flags("--lr-warmup-fraction")
                    .help("the warm-up as a fraction of --lr-decay-iters (Megatron's; instead of --lr-warmup-iters)")
                    .finite()
                    .rule({.lo = 0.0, .hi = 1.0, .hi_open = true, .must = "must be in [0, 1)"}));
    v.push_back(Field(PTDP_MEMBER(opt.lr.decay_iters), "lr_decay_iters", g)
                    .flags("--lr-decay-iters")
                    .help("the decay ends here (0: no decay; with --lr-decay-style or --lr-warmup-fraction given, "
                          "--iters, as Megatron)")
                    .non_negative());
    v.push_back(Field(PTDP_MEMBER(opt.lr.style), "lr_decay_style", g)
                    .flags("--lr-decay-style")
                    .help(enum_choices<LrDecayStyle>(true) +
                          ": Megatron's OptimizerParamScheduler (ptdp's default cosine; Megatron's linear)"));
    v.push_back(Field(PTDP_MEMBER(opt.lr.wsd_decay_iters), "lr_wsd_decay_iters", g)
                    .flags("--lr-wsd-decay-iters")
                    .help("--lr-decay-style WSD: the last iterations of the decay, annealed by --lr-wsd-decay-style")
                    .non_negative());
    v.push_back(Field(PTDP_MEMBER(opt.lr.wsd_style), "lr_wsd_decay_style", g)
                    .flags("--lr-wsd-decay-style")
                    .help(enum_choices<WsdDecayStyle>(true) + ": the anneal of --lr-decay-style WSD"));
    v.push_back(Field(PTDP_MEMBER(opt.weight_decay), "weight_decay", g)
                    .flags("--weight-decay")
                    .help("AdamW weight decay")
                    .finite()
                    .non_negative());
    v.push_back(Field(PTDP_MEMBER(opt.clip_grad), "clip_grad", g)
                    .flags("--clip-grad")
                    .help("global gradient-norm clip (0: off)")
                    .finite()
                    .non_negative(" (0 disables clipping)"));
    const FieldRule unit{.lo = 0.0, .hi = 1.0, .hi_open = true, .must = "must be in [0, 1)"};
    v.push_back(Field(PTDP_MEMBER(opt.beta1), "adam_beta1", g).flags("--adam-beta1").help("Adam beta1").finite().rule(unit));
    v.push_back(Field(PTDP_MEMBER(opt.beta2), "adam_beta2", g).flags("--adam-beta2").help("Adam beta2").finite().rule(unit));
    v.push_back(Field(PTDP_MEMBER(opt.eps), "adam_eps", g).flags("--adam-eps").help("Adam epsilon").finite().positive());
    for (Field& f : v) f.not_key("the optimizer's settings change the values a step computes, not its work");
    // Megatron's OptimizerParamScheduler state: a resume keeps it unless told otherwise.
    for (Field& f : v)
      if (f.name() == "lr" || f.name() == "min_lr" || f.name() == "lr_warmup_iters" || f.name() == "lr_decay_iters" ||
          f.name() == "weight_decay")
        f.checkpoint().resume_check(ResumeCheck::Schedule);
    add_precision_aware_fields(v);
    return v;
  }();
  return fields;
}

}  // namespace ptdp
