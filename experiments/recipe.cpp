#include "experiments/recipe.h"

#include "core/common/error.h"

namespace ptdp {

namespace {

// Table 2 of Touvron et al. 2023.
double llama_peak_lr(const std::string& preset) {
  if (preset == "llama-7b" || preset == "llama-13b") return 3e-4;
  if (preset == "llama-33b" || preset == "llama-65b") return 1.5e-4;
  return 0;  // not a Table 2 model: --lr as given or its default
}

}  // namespace

void apply_recipe(const std::string& name, const std::string& model_preset,
                  const std::function<bool(const char*)>& given, RunConfig& r) {
  if (name == "default") return;
  if (name != "llama") usage_error("--recipe '{}' must be default or llama", name);
  OptimizerConfig& o = r.opt;
  if (!given("--lr") && llama_peak_lr(model_preset) > 0) o.lr.max_lr = llama_peak_lr(model_preset);
  if (!given("--adam-beta1")) o.beta1 = 0.9;
  if (!given("--adam-beta2")) o.beta2 = 0.95;
  if (!given("--weight-decay")) o.weight_decay = 0.1;
  if (!given("--clip-grad")) o.clip_grad = 1.0;
  if (!given("--lr-warmup-iters")) o.lr.warmup_iters = 2000;
  if (!given("--lr-decay-iters")) o.lr.decay_iters = r.iters;
  if (!given("--min-lr")) o.lr.min_lr = 0.1 * o.lr.max_lr;
  if (o.lr.decay_iters <= o.lr.warmup_iters)
    usage_error("--recipe llama: the cosine decay ends at iteration {} (--lr-decay-iters, default --iters) but the "
                "warm-up lasts {} iterations (--lr-warmup-iters, default 2000); give a shorter warm-up or a longer run",
                o.lr.decay_iters, o.lr.warmup_iters);
}

}  // namespace ptdp
