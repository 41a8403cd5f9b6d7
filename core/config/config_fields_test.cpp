// The field tables: every member of the configuration structs is declared once, its flags and
// names are unique, what ranks compare changes with each field, and the result row and key come
// from the tables.
#include "core/config/config_fields.h"

#include <gtest/gtest.h>

#include <set>
#include <type_traits>

#include "core/config/results_csv.h"
#include "core/data/testing/data_test_util.h"

namespace ptdp {
namespace {

// The number of members of an aggregate: the most initializers T{...} takes.
struct AnyValue {
  template <class T>
  operator T() const;  // never defined: only in unevaluated brace-initialisations
};
template <class T, class... A>
constexpr size_t member_count() {
  if constexpr (requires { T{A{}..., AnyValue{}}; }) return member_count<T, A..., AnyValue>();
  else return sizeof...(A);
}

// A field added to a struct without a row in its table fails here: declare it in the table.
TEST(ConfigFields, EveryMemberOfTheConfigurationIsAField) {
  EXPECT_EQ(model_fields().size(), member_count<ModelConfig>());
  // ParallelConfig::layout_chunks is read from --pipeline-model-parallel-layout, not a field.
  EXPECT_EQ(parallel_fields().size() + 1, member_count<ParallelConfig>());
  // LrSchedule::batch is the global batch (--global-batch), set where the run starts.
  EXPECT_EQ(optimizer_fields().size(), member_count<OptimizerConfig>() - 1 + member_count<LrSchedule>() - 1);
  EXPECT_EQ(run_fields().size(), member_count<RunConfig>() - 3);  // less model, par, opt
}

TEST(ConfigFields, NamesAndFlagsAreUnique) {
  std::set<std::string> names, flags;
  for (const Field* f : all_fields()) {
    EXPECT_TRUE(names.insert(f->name()).second) << f->name();
    if (!f->has_flag()) continue;
    EXPECT_TRUE(flags.insert(f->flag()).second) << f->flag();
    for (const auto& a : f->aliases()) EXPECT_TRUE(flags.insert(a).second) << a;
    for (const auto& a : f->alias_flags()) EXPECT_TRUE(flags.insert(a.flag).second) << a.flag;
    if (!f->negation_flag().empty()) {
      EXPECT_TRUE(flags.insert(f->negation_flag()).second) << f->negation_flag();
    }
  }
}

TEST(ConfigFields, ValuesAreExact) {
  RunConfig c;
  c.opt.lr.max_lr = 0.1;  // not exact in binary: printed to 17 digits
  EXPECT_EQ(find_field("--lr")->text(c), "0.10000000000000001");
  EXPECT_EQ(find_field("--precision")->text(c), "f32");
  EXPECT_EQ(find_field("--scatter-gather")->text(c), "true");
}

// Another value of the field's type: what EveryFieldChangesItsOwnEntryOnly sets.
void change(const Field& f, RunConfig& c) {
  std::visit(
      [&](const auto& m) {
        using T = typename std::decay_t<decltype(m)>::Type;
        auto& v = m.ref(c);
        if constexpr (std::is_same_v<T, bool>) v = !v;
        else if constexpr (std::is_arithmetic_v<T>) v = static_cast<T>(v + 3);
        else if constexpr (std::is_same_v<T, std::string>) v += "x";
        else v = EnumNames<T>::values[(size_t(v) + 1) % EnumNames<T>::values.size()].first;
      },
      f.access());
}

// What the ranks of an MPI job compare: each field's change shows in its own entry, no other.
TEST(ConfigFields, EveryFieldChangesItsOwnEntryOnly) {
  const RunConfig base;
  const auto before = run_config_fields(base);
  ASSERT_EQ(before.size(), all_fields().size());
  for (size_t i = 0; i < all_fields().size(); ++i) {
    RunConfig c = base;
    change(*all_fields()[i], c);
    const auto after = run_config_fields(c);
    for (size_t f = 0; f < after.size(); ++f)
      EXPECT_EQ(after[f].second != before[f].second, f == i) << all_fields()[i]->name() << " moved " << after[f].first;
  }
}

TEST(ConfigFields, RulesNameTheFlagAndTheValue) {
  RunConfig tiny;
  tiny.model = preset_config("tiny");
  check_field_rules(tiny);
  RunConfig c = tiny;
  c.par.tp = 0;
  EXPECT_EQ(testing::usage_message([&] { check_field_rules(c); }), "--tp 0 must be positive");
  c = tiny;
  c.par.zero = 4;
  EXPECT_EQ(testing::usage_message([&] { check_field_rules(c); }), "--zero 4 must be 0, 1, 2 or 3");
  c = tiny;
  c.opt.beta2 = 1;
  EXPECT_EQ(testing::usage_message([&] { check_field_rules(c); }), "--adam-beta2 1 must be in [0, 1)");
}

// Every field column is a result column; every key column is a result column of a field in the
// key or one derived from several (mode, gpus, stage_layers).
// Every column of the result row identifies the configuration (the key) or says why a run
// differing only there measured the same configuration: a field's reason (its table), a result,
// provenance, or a value the key's columns determine. A column added without one fails here.
TEST(ConfigFields, EveryResultColumnIsInTheKeyOrSaysWhyNot) {
  const auto& key = config_key_columns();
  auto in_key = [&](const std::string& c) { return std::find(key.begin(), key.end(), c) != key.end(); };
  for (const std::string& c : result_columns()) EXPECT_NE(in_key(c), !not_key_reason(c).empty()) << c;
  // What changes the work of a step or its time is in the key: the layout, the data-parallel
  // reduction (a sweep over --overlap-grad-reduce once kept one row for both points, and compare
  // paired runs with and without it), the placement of the stages, the communication backend.
  for (const char* c : {"overlap_grad_reduce", "grad_bucket_size", "stage_layers", "comm", "gpus", "query_groups",
                        "ffn_hidden_size", "norm_eps", "rope_theta", "make_vocab_size_divisible_by"})
    EXPECT_TRUE(in_key(c)) << c;
  EXPECT_EQ(not_key_reason("overlap_grad_reduce"), "");
  EXPECT_NE(not_key_reason("iters"), "");        // a field's reason, from its table
  EXPECT_NE(not_key_reason("tokens_per_s"), "");  // a result
  EXPECT_NE(not_key_reason("host"), "");          // provenance
  EXPECT_EQ(not_key_reason("no_such_column"), "");
}

TEST(ConfigFields, TheResultRowAndTheKeyComeFromTheTables) {
  const auto& cols = result_columns();
  auto has = [&](const std::string& c) { return std::find(cols.begin(), cols.end(), c) != cols.end(); };
  for (const Field* f : all_fields()) {
    // A field that changes what a run measures is in the key; any other says why not.
    EXPECT_NE(f->in_key(), !f->not_key_reason().empty()) << f->name();
    if (f->row_use() != RowUse::None) {
      EXPECT_TRUE(has(f->name())) << f->name();
    }
    if (f->in_key()) {
      EXPECT_NE(f->row_use(), RowUse::None) << f->name() << " is in the key without a column";
    }
  }
  for (const auto& k : config_key_columns()) {
    const Field* f = find_field(k);
    EXPECT_TRUE((f && f->in_key()) || k == "mode" || k == "gpus" || k == "stage_layers") << k;
  }
  RunConfig c;
  c.model = preset_config("tiny");
  c.par.zero = 1;
  c.ranks = 2;
  validate_run(c);
  const ResultRow r = config_row(c, "simulate");
  EXPECT_EQ(r.get("zero"), "1");
  EXPECT_EQ(r.get("scatter_gather"), "1");
  EXPECT_EQ(r.get("stack"), "megatron-2021");  // simulated rows name the software modelled
  EXPECT_EQ(r.get("data"), "");                 // measured rows name their data
  EXPECT_EQ(config_row(c, "run").get("data"), "synthetic");
}

}  // namespace
}  // namespace ptdp
