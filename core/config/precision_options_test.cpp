// Megatron-core's precision knobs as flags: their values (f32 | bf16 | f16) and the rules of
// Megatron-core's arguments and OptimizerConfig, each precision_knobs_refusal naming the flag and the rule.
#include <gtest/gtest.h>

#include <functional>

#include "core/common/error.h"
#include "core/config/config_fields.h"

namespace ptdp {
namespace {

RunConfig precision_knobs_run() {
  RunConfig c;
  c.model = preset_config("tiny");
  c.precision = Precision::Bf16;
  c.par.dp = 2;
  c.ranks = 2;
  return c;
}

std::string precision_knobs_refusal(RunConfig c, const std::function<void(RunConfig&)>& edit) {
  edit(c);
  try {
    validate_run(c);
    require_supported(c);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "accepted";
}

void set_precision_knob(RunConfig& c, const char* name, const char* value) { find_field(name)->set_text(c, value); }

TEST(PrecisionOptions, FlagsTakeMegatronCoresNamesAndDtypes) {
  RunConfig c = precision_knobs_run();
  set_precision_knob(c, "exp_avg_dtype", "bf16");
  set_precision_knob(c, "main_params_dtype", "f16");
  set_precision_knob(c, "use_precision_aware_optimizer", "true");
  set_precision_knob(c, "grad_reduce_in_bf16", "true");
  EXPECT_EQ(c.opt.exp_avg_dtype, DType::BF16);
  EXPECT_EQ(c.opt.main_params_dtype, DType::F16);
  EXPECT_TRUE(c.opt.precision_aware);
  EXPECT_TRUE(c.grad_reduce_bf16);
  EXPECT_EQ(find_field("exp_avg_sq_dtype")->flag(), "--exp-avg-sq-dtype");
  EXPECT_EQ(find_field("main_grads_dtype")->flag(), "--main-grads-dtype");
  EXPECT_EQ(find_field("overlap_param_gather_with_optimizer_step")->flag(), "--overlap-param-gather-with-optimizer-step");
  try {
    set_precision_knob(c, "exp_avg_dtype", "fp8");
    ADD_FAILURE() << "fp8 accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--exp-avg-dtype 'fp8' must be f32, bf16 or f16"), std::string::npos)
        << e.what();
  }
}

TEST(PrecisionOptions, MegatronCoresRulesAreRefusedNamingTheFlag) {
  const RunConfig c = precision_knobs_run();
  const std::vector<std::pair<std::function<void(RunConfig&)>, std::string>> cases = {
      {[](RunConfig& r) { r.grad_reduce_bf16 = true, r.precision = Precision::F32; },
       "--grad-reduce-in-bf16 needs --precision bf16"},
      {[](RunConfig& r) { r.opt.exp_avg_dtype = DType::BF16; },
       "--exp-avg-dtype bf16 needs --use-precision-aware-optimizer"},
      {[](RunConfig& r) { r.opt.precision_aware = true; }, "--use-precision-aware-optimizer needs a sharded optimizer"},
      {[](RunConfig& r) { r.opt.precision_aware = true, r.par.zero = 1, r.opt.main_params_dtype = DType::BF16; },
       "--main-params-dtype bf16: the master weights may be f32 or f16"},
      {[](RunConfig& r) { r.opt.precision_aware = true, r.par.zero = 1, r.opt.main_grads_dtype = DType::BF16; },
       "--main-grads-dtype bf16 needs --grad-reduce-in-bf16"},
      {[](RunConfig& r) { r.opt.precision_aware = true, r.par.zero = 1, r.opt.main_grads_dtype = DType::F16; },
       "--main-grads-dtype f16: the gradients the optimizer reads may be f32 or bf16"},
      {[](RunConfig& r) { r.overlap_param_gather_with_optimizer_step = true; },
       "--overlap-param-gather-with-optimizer-step needs the distributed optimizer (--zero 1, or 2)"},
      {[](RunConfig& r) { r.overlap_param_gather_with_optimizer_step = true, r.par.zero = 1; },
       "--overlap-param-gather-with-optimizer-step needs interleaved pipeline parallelism"},
      // What ptdp's optimizer does not implement.
      {[](RunConfig& r) { r.opt.precision_aware = true, r.par.zero = 1, r.opt.exp_avg_sq_dtype = DType::F16; },
       "--exp-avg-sq-dtype f16: ptdp's optimizer keeps 16-bit state in bf16 only"},
  };
  for (const auto& [edit, needle] : cases) {
    const std::string got = precision_knobs_refusal(c, edit);
    EXPECT_NE(got.find(needle), std::string::npos) << needle << " | got: " << got;
  }
  EXPECT_EQ(precision_knobs_refusal(c,
                    [](RunConfig& r) {
                      r.grad_reduce_bf16 = true, r.par.zero = 1, r.opt.precision_aware = true;
                      r.opt.exp_avg_dtype = r.opt.exp_avg_sq_dtype = r.opt.main_grads_dtype = DType::BF16;
                    }),
            "accepted");
}

}  // namespace
}  // namespace ptdp
