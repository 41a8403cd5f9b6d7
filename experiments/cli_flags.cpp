#include "experiments/cli_flags.h"

#include <charconv>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "core/common/error.h"
#include "core/common/one_line.h"
#include "core/config/config_fields.h"
#include "experiments/megatron_flags.h"
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

void check_choices(const RunFlags& f) {
  if (!f.bad_choice.empty()) throw UsageError(f.bad_choice);
}

namespace {

// An enumerated flag: a known name sets `target` as it is parsed; another is kept in
// f.bad_choice for resolve_run_config to refuse (where every rank of an MPI job refuses it at once).
template <NamedEnum E>
CLI::Option* add_choice(CLI::App& app, const std::string& names, E& target, RunFlags& f, const std::string& help) {
  const std::string flag = names.substr(0, names.find(','));
  return app.add_option_function<std::string>(
      names,
      [&target, &f, flag](const std::string& text) {
        try {
          target = parse_enum<E>(text, flag);
        } catch (const UsageError& e) {
          if (f.bad_choice.empty()) f.bad_choice = e.what();
        }
      },
      help);
}

// The option of one field of the table, bound to its member of f.run.
void add_field(CLI::App& app, const Field& field, RunFlags& f) {
  RunConfig& r = f.run;
  std::visit(
      [&](const auto& m) {
        using T = typename std::decay_t<decltype(m)>::Type;
        auto& target = m.ref(r);
        CLI::Option* o = nullptr;
        if constexpr (std::is_same_v<T, bool>) {
          const std::string& no = field.negation_flag();
          app.add_flag(field.flag_names() + (no.empty() ? "" : ",!" + no), target, field.help_text());
        } else if constexpr (NamedEnum<T>) {
          o = add_choice(app, field.flag_names(), target, f, field.help_text());
          if (field.default_in_help()) o->default_str(std::string(enum_name(target)));
        } else if constexpr (std::is_same_v<T, uint64_t>) {  // --seed: the whole uint64 range, nothing else
          o = app.add_option_function<std::string>(
              field.flag_names(), [&target](const std::string& v) { target = parse_seed(v); }, field.help_text());
          o->default_str(std::to_string(target));
        } else {
          o = app.add_option(field.flag_names(), target, field.help_text());
          if (field.default_in_help()) o->capture_default_str();
        }
      },
      field.access());
  for (const Field::AliasFlag& a : field.alias_flags())
    app.add_flag_callback(a.flag, [&field, &r, value = a.value] { field.set_text(r, value); }, a.help);
}

void add_fields(CLI::App& app, const std::vector<Field>& table, RunFlags& f) {
  for (const Field& field : table)
    if (field.has_flag() && !field.is_bound_by_hand()) add_field(app, field, f);
}

}  // namespace

void add_field_flag(CLI::App& app, const std::string& flag, RunFlags& f) { add_field(app, *find_field(flag), f); }

void add_model_flags(CLI::App& app, RunFlags& f) {
  app.add_option("--model", f.model, find_field("--model")->help_text());
  app.add_flag("--group-query-attention", f.group_query_attention,
               "grouped-query attention (Megatron's flag): --num-query-groups key/value heads shared by the query "
               "heads (default 1 without a GQA preset)");
  app.add_option("--num-query-groups", f.query_groups, find_field("--num-query-groups")->help_text());
  add_fields(app, model_fields(), f);
}

void add_parallel_flags(CLI::App& app, RunFlags& f) { add_fields(app, parallel_fields(), f); }

void add_run_flags(CLI::App& app, RunFlags& f) {
  add_fields(app, run_fields(), f);
  app.add_option("--recipe", f.recipe,
                 "optimizer recipe: default | llama (Touvron et al.: beta2 0.95, weight decay 0.1, clip 1.0, 2000 "
                 "warm-up iterations, cosine to 10% of the peak lr at --iters, Table 2's lr for llama-7b..65b); "
                 "flags given explicitly win")
      ->capture_default_str();
  add_fields(app, optimizer_fields(), f);
  add_megatron_flags(app, f);
}

namespace {

// The model: the preset, then every model flag given; grouped-query attention as Megatron-LM
// (--num-query-groups takes effect with --group-query-attention only: Megatron ignores it
// otherwise, ptdp refuses it; the flag alone means Megatron's default of 1 group, or the preset's).
// A tokenizer's vocabulary (`tokenizer_vocab` > 0) sets --vocab-size, as in Megatron-LM.
ModelConfig resolve_model(const RunFlags& f, const std::function<bool(const char*)>& given, int64_t tokenizer_vocab) {
  const char* sizes[] = {"--layers", "--hidden", "--heads", "--seq-length", "--vocab-size"};
  if (!given("--model"))
    for (const char* flag : sizes)
      if (!given(flag) && !(tokenizer_vocab > 0 && std::string_view(flag) == "--vocab-size"))
        usage_error("{} is required without --model", flag);
  RunConfig r;
  r.model = given("--model") ? preset_config(f.model) : ModelConfig{};
  const ModelConfig preset = r.model;
  for (const Field& field : model_fields()) {
    if (!field.has_flag() || field.is_bound_by_hand() || !given(field.flag().c_str())) continue;
    field.copy(f.run, r);
    if (field.unset_value() && field.text(r) == *field.unset_value())
      usage_error("{} {} must be positive", field.flag(), field.text(r));
  }
  if (tokenizer_vocab > 0) {
    if (given("--vocab-size") && f.run.model.vocab_size != tokenizer_vocab)
      usage_error("--vocab-size {} differs from the tokenizer's vocabulary of {} (Megatron-LM sizes the model by its "
                  "tokenizer): give one of them",
                  f.run.model.vocab_size, tokenizer_vocab);
    r.model.vocab_size = tokenizer_vocab;
  }
  if (given("--num-query-groups") && !f.group_query_attention)
    usage_error("--num-query-groups {} needs --group-query-attention (as in Megatron-LM, which ignores it without)",
                f.query_groups);
  if (f.group_query_attention) {
    const int groups = given("--num-query-groups") ? f.query_groups : (preset.query_groups > 0 ? preset.query_groups : 1);
    if (groups <= 0) usage_error("--num-query-groups {} must be positive", groups);
    r.model.query_groups = groups;
  }
  // A model that differs from its preset in any setting (as the run uses it: the MLP width and
  // the query groups as they come out) is the preset's custom variant.
  RunConfig as_preset;
  as_preset.model = preset;
  bool custom = false;
  for (const char* flag : sizes) custom = custom || given(flag);
  custom = custom || (tokenizer_vocab > 0 && r.model.vocab_size != preset.vocab_size);
  for (const Field& field : model_fields()) {
    auto used = [&](const RunConfig& x) { return field.in_checkpoint() ? field.checkpoint_text(x).value_or("") : field.text(x); };
    if (field.name() != "model" && field.in_key()) custom = custom || used(r) != used(as_preset);
  }
  if (custom) r.model.name = given("--model") ? f.model + "-custom" : (r.model.arch == Arch::Llama ? "llama-custom" : "custom");
  return r.model;
}

// The sample order a dataset's flags ask for. Without --data-order, Megatron's flags for its own
// order (--split, --data-cache-path, a list in --data) select it, as a Megatron-LM user expects;
// with an explicit --data-order ptdp, or with synthetic data, they are refused: nothing would
// read them.
void resolve_data_order(RunConfig& r, const std::function<bool(const char*)>& given) {
  const bool list = r.data.find_first_of(" \t") != std::string::npos;
  const char* megatron_flag = given("--split") ? "--split" : given("--data-cache-path") ? "--data-cache-path" : nullptr;
  if (r.data == "synthetic" && megatron_flag)
    usage_error("{}: applies to a dataset's documents in Megatron's order (--data PREFIX), not --data synthetic",
                megatron_flag);
  if (!given("--data-order")) {
    if (r.data != "synthetic" && (megatron_flag || list)) r.data_order = DataOrder::Megatron;
    return;
  }
  if (r.data_order == DataOrder::Ptdp && megatron_flag)
    usage_error("{}: applies to --data-order megatron (Megatron's split and index cache); --data-order ptdp has none",
                megatron_flag);
}

}  // namespace

RunConfig resolve_run_config(const CLI::App& app, RunFlags& f) {
  check_choices(f);
  RunConfig r = f.run;
  // Whether the user gave FLAG (false for a flag this command does not have).
  auto given = [&](const char* flag) { return app.get_option_no_throw(flag) && app.count(flag) > 0; };
  r.model = resolve_model(f, given, megatron_tokenizer_vocab(f));
  // A text flag given an empty value is a mistake (an unset variable in a script), not "none".
  for (const Field* field : all_fields())
    if (field->type_name() == "text" && field->has_flag() && given(field->flag().c_str()) &&
        app.get_option(field->flag())->as<std::string>().empty())
      usage_error("{} '': needs a value (leave the flag out for none)", field->flag());
  for (char ch : r.experiment)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      usage_error("--experiment: control characters (newlines, tabs) are not allowed in a result's name");
  if (f.trains && app.get_option_no_throw("--recipe"))
    apply_recipe(f.recipe, given("--model") ? f.model : std::string(), given, r);
  apply_megatron_flags(f, given, r);
  resolve_data_order(r, given);
  // Megatron decays to --train-iters unless told otherwise; ptdp's default (no style given) keeps
  // the rate after the warm-up unless --lr-decay-iters is given.
  if ((given("--lr-decay-style") || given("--lr-warmup-fraction")) && !given("--lr-decay-iters") &&
      r.opt.lr.decay_iters == 0)
    r.opt.lr.decay_iters = r.iters;
  validate_run(r);
  return r;
}

}  // namespace ptdp
