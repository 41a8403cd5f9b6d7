// run_config_fields lists every field of RunConfig (what MPI ranks compare at start): changing any
// field changes the list, and a field added to RunConfig without being listed fails here.
#include <gtest/gtest.h>

#include <set>

#include "core/config/run_config_fields.h"

namespace ptdp {
namespace {

TEST(RunConfigFields, FlagsAreUniqueAndValuesExact) {
  RunConfig c;
  c.opt.lr.max_lr = 0.1;  // not exact in binary: printed to 17 digits
  std::set<std::string> names;
  for (const auto& [name, value] : run_config_fields(c)) EXPECT_TRUE(names.insert(name).second) << name;
  for (const auto& [name, value] : run_config_fields(c))
    if (name == "--lr") {
      EXPECT_EQ(value, "0.10000000000000001");
    }
}

TEST(RunConfigFields, EveryFieldChangesTheList) {
  const RunConfig base;
  const auto before = run_config_fields(base);
  std::vector<std::function<void(RunConfig&)>> changes = {
      [](RunConfig& c) { c.model.name = "tiny"; },      [](RunConfig& c) { c.model.layers = 3; },
      [](RunConfig& c) { c.model.hidden = 3; },         [](RunConfig& c) { c.model.heads = 3; },
      [](RunConfig& c) { c.model.seq_length = 3; },     [](RunConfig& c) { c.model.vocab_size = 3; },
      [](RunConfig& c) { c.model.make_vocab_size_divisible_by = 3; },
      [](RunConfig& c) { c.model.query_groups = 3; },  [](RunConfig& c) { c.model.ffn_hidden_size = 3; },
      [](RunConfig& c) { c.model.layernorm_eps = 3; },  [](RunConfig& c) { c.model.init_std = 3; },
      [](RunConfig& c) { c.model.arch = Arch::Llama; }, [](RunConfig& c) { c.model.rope_theta = 3; },
      [](RunConfig& c) { c.par.tp = 3; },               [](RunConfig& c) { c.par.pp = 3; },
      [](RunConfig& c) { c.par.dp = 3; },               [](RunConfig& c) { c.par.vpp = 3; },
      [](RunConfig& c) { c.par.first_stage_layers = 3; }, [](RunConfig& c) { c.par.last_stage_layers = 3; },
      [](RunConfig& c) { c.par.embedding_in_split = true; }, [](RunConfig& c) { c.par.loss_in_split = true; },
      [](RunConfig& c) { c.par.pipeline_layout = "Et|tL"; },
      [](RunConfig& c) { c.par.micro_batch = 3; },      [](RunConfig& c) { c.par.global_batch = 3; },
      [](RunConfig& c) { c.par.schedule = "gpipe"; },   [](RunConfig& c) { c.par.recompute = Recompute::Full; },
      [](RunConfig& c) { c.par.scatter_gather = false; }, [](RunConfig& c) { c.par.zero = 1; },
      [](RunConfig& c) { c.par.sequence_parallel = true; },
      [](RunConfig& c) { c.experiment = "x"; },         [](RunConfig& c) { c.backend = "cuda"; },
      [](RunConfig& c) { c.comm = "mpi"; },             [](RunConfig& c) { c.ranks = 3; },
      [](RunConfig& c) { c.precision = "bf16"; },       [](RunConfig& c) { c.iters = 3; },
      [](RunConfig& c) { c.warmup = 3; },               [](RunConfig& c) { c.seed = 3; },
      [](RunConfig& c) { c.opt.lr.max_lr = 3; },        [](RunConfig& c) { c.opt.lr.min_lr = 3; },
      [](RunConfig& c) { c.opt.lr.warmup_iters = 3; },  [](RunConfig& c) { c.opt.lr.decay_iters = 3; },
      [](RunConfig& c) { c.opt.weight_decay = 3; },     [](RunConfig& c) { c.opt.beta1 = 3; },
      [](RunConfig& c) { c.opt.beta2 = 3; },            [](RunConfig& c) { c.opt.eps = 3; },
      [](RunConfig& c) { c.opt.clip_grad = 3; },        [](RunConfig& c) { c.data = "x"; },
      [](RunConfig& c) { c.data_order = "megatron"; }, [](RunConfig& c) { c.split = "1,0,0"; },
      [](RunConfig& c) { c.data_cache = "x"; },
      [](RunConfig& c) { c.csv = "x"; },                [](RunConfig& c) { c.log_interval = 3; },
      [](RunConfig& c) { c.eval_iters = 3; },           [](RunConfig& c) { c.eval_interval = 3; },
      [](RunConfig& c) { c.log_format = "megatron"; },
      [](RunConfig& c) { c.overlap_grad_reduce = true; }, [](RunConfig& c) { c.grad_bucket_elems = 3; },
      [](RunConfig& c) { c.comm_timeout_s = 3; },       [](RunConfig& c) { c.save_dir = "x"; },
      [](RunConfig& c) { c.load_dir = "x"; },           [](RunConfig& c) { c.save_interval = 3; },
      [](RunConfig& c) { c.skip_nonfinite = true; },    [](RunConfig& c) { c.loss_log = "x"; },
      [](RunConfig& c) { c.gemm_rate = true; },         [](RunConfig& c) { c.stack = "mcore"; },
      [](RunConfig& c) { c.save_init_dir = "x"; },      [](RunConfig& c) { c.loss_scale = 3; },
      [](RunConfig& c) { c.initial_loss_scale = 3; },   [](RunConfig& c) { c.min_loss_scale = 3; },
      [](RunConfig& c) { c.loss_scale_window = 3; },    [](RunConfig& c) { c.hysteresis = 3; },
  };
  EXPECT_EQ(changes.size(), before.size()) << "one change per listed field";
  for (size_t i = 0; i < changes.size(); ++i) {
    RunConfig c = base;
    changes[i](c);
    const auto after = run_config_fields(c);
    ASSERT_EQ(after.size(), before.size());
    int differing = 0;
    for (size_t f = 0; f < after.size(); ++f) differing += after[f].second != before[f].second;
    EXPECT_EQ(differing, 1) << "change #" << i;
  }
}

// A field added to RunConfig (or its parts) changes these sizes: list it in run_config_fields.cpp
// (and in EveryFieldChangesTheList), then update the sizes here.
TEST(RunConfigFields, EveryFieldOfRunConfigIsListed) {
  EXPECT_EQ(sizeof(ModelConfig), 104u);
  EXPECT_EQ(sizeof(ParallelConfig), 144u);  // with layout_chunks, read from pipeline_layout (not a field)
  EXPECT_EQ(sizeof(OptimizerConfig), 72u);
  EXPECT_EQ(sizeof(RunConfig), 920u);
}

}  // namespace
}  // namespace ptdp
