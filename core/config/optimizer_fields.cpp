// OptimizerConfig's fields: AdamW and its learning-rate schedule.
#include "core/config/config_fields.h"

namespace ptdp {

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
    return v;
  }();
  return fields;
}

}  // namespace ptdp
