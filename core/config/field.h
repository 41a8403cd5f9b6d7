// One setting of a run, declared once in its struct's table (config_fields.h): its flag and
// Megatron's names, help, type or choices, rules, result column, place in the configuration key,
// default and checkpoint entry. The CLI, the fleet agreement, the result row, the key, the specs
// of `ptdp reproduce`, the schema (`ptdp fields`) and checkpoints read the tables.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/config/run_config.h"

namespace ptdp {

// A member of RunConfig of type T, reached by a function (PTDP_MEMBER(par.tp)).
template <class T>
struct Member {
  using Type = T;
  T& (*ref)(RunConfig&);
  const T& get(const RunConfig& c) const { return ref(const_cast<RunConfig&>(c)); }
};
#define PTDP_MEMBER(path) +[](::ptdp::RunConfig& c) -> auto& { return c.path; }

using FieldAccess =
    std::variant<Member<int>, Member<int64_t>, Member<uint64_t>, Member<double>, Member<bool>, Member<std::string>,
                 Member<Arch>, Member<ScheduleKind>, Member<Recompute>, Member<Precision>, Member<BackendKind>,
                 Member<CommKind>, Member<DataOrder>, Member<LogFormat>, Member<StackKind>, Member<Fp8Format>, Member<LrDecayStyle>,
                 Member<WsdDecayStyle>, Member<CpComm>, Member<AttentionBackend>, Member<DType>>;

// The struct a field belongs to: its table, and its group of flags in --help.
enum class FieldGroup { Model, Parallel, Run, Optimizer };
template <>
struct EnumNames<FieldGroup> {
  static constexpr std::array values{std::pair{FieldGroup::Model, std::string_view("model")},
                                     std::pair{FieldGroup::Parallel, std::string_view("parallel")},
                                     std::pair{FieldGroup::Run, std::string_view("run")},
                                     std::pair{FieldGroup::Optimizer, std::string_view("optimizer")}};
};
// Which result rows carry a field's column.
enum class RowUse { None, Every, Simulated, Measured };
template <>
struct EnumNames<RowUse> {
  static constexpr std::array values{std::pair{RowUse::None, std::string_view("none")},
                                     std::pair{RowUse::Every, std::string_view("every")},
                                     std::pair{RowUse::Simulated, std::string_view("simulated")},
                                     std::pair{RowUse::Measured, std::string_view("measured")}};
};

// What a resume does when a recorded setting differs from the checkpoint's (checkpoint.h): Layout
// refuses (the shards are laid out by it: no resharding); Schedule refuses unless told to
// override or to take the checkpoint's (Megatron's --override-opt_param-scheduler,
// --use-checkpoint-opt_param-scheduler); Data refuses (the run would continue other samples).
enum class ResumeCheck { Layout, Schedule, Data };

// A rule on one field's value: "FLAG VALUE must ..." when broken.
struct FieldRule {
  std::optional<double> lo, hi;          // bounds; NaN breaks every bound
  bool lo_open = false, hi_open = false;  // (lo, ...) / (..., hi)
  bool finite = false;                   // also refuses inf (and NaN)
  std::vector<double> one_of;            // the values allowed (empty: any)
  std::string must;                      // the message after "FLAG VALUE ", e.g. "must be positive"
};

class Field {
 public:
  template <class T>
  Field(T& (*ref)(RunConfig&), std::string name, FieldGroup group)
      : access_(Member<T>{ref}), name_(std::move(name)), group_(group) {}

  // The declaration (the tables), each returning *this.
  Field& flags(std::string names);  // "--tp,--tensor-model-parallel-size": the first names the field
  Field& help(std::string text);
  Field& no_default_in_help();      // --help shows no "[default]" (a 0 meaning "derived")
  Field& negation(std::string flag);  // a bool's flag that sets it false ("--no-scatter-gather")
  // Another flag, without a value, that sets the field to `value` ("--fp16" -> precision f16).
  Field& alias_flag(std::string flag, std::string value, std::string help);
  Field& bound_by_hand();  // the CLI binds this flag itself (its meaning needs more than a value)
  Field& unset_is(std::string value);  // this value means "derived": given explicitly it must be positive
  Field& rule(FieldRule r);
  Field& positive(std::string note = "");
  Field& non_negative(std::string note = "");
  Field& at_least(double v);
  Field& at_most(double v, std::string must = "");
  Field& finite();
  Field& one_of(std::vector<double> values, std::string must);
  Field& column(RowUse use = RowUse::Every);
  // The column's text, when not the value's own (empty: the cell stays empty).
  Field& column_text(std::function<std::string(const RunConfig&)> text);
  Field& key(std::string old_default = "");  // in the configuration key; `old_default`: what a row without the column had
  Field& not_key(std::string why);           // why a run differing only here measured the same thing
  Field& in_specs();                         // a key of `ptdp reproduce`'s spec files
  // Recorded in checkpoints under the field's name and compared when a run resumes: the value
  // (or what `text` gives: the value as the run uses it; nullopt where this run does not record
  // it), named in a refusal by the flag or by `label`.
  Field& checkpoint(std::function<std::optional<std::string>(const RunConfig&)> text = {}, std::string label = "");
  Field& resume_check(ResumeCheck check);  // with checkpoint(): what a resume does when it differs

  // What the table says.
  const std::string& name() const { return name_; }
  // The flag (--tp), or the name where the field has none.
  const std::string& flag() const { return flag_.empty() ? name_ : flag_; }
  bool has_flag() const { return !flag_.empty(); }
  const std::vector<std::string>& aliases() const { return aliases_; }
  std::string flag_names() const;  // "--tp,--tensor-model-parallel-size" (CLI11's form)
  const std::string& help_text() const { return help_; }
  FieldGroup group() const { return group_; }
  bool default_in_help() const { return default_in_help_; }
  const std::string& negation_flag() const { return negation_; }
  struct AliasFlag {
    std::string flag, value, help;
  };
  const std::vector<AliasFlag>& alias_flags() const { return alias_flags_; }
  bool is_bound_by_hand() const { return by_hand_; }
  const std::optional<std::string>& unset_value() const { return unset_; }
  const std::vector<FieldRule>& rules() const { return rules_; }
  RowUse row_use() const { return row_use_; }
  bool in_key() const { return in_key_; }
  const std::string& key_default() const { return key_default_; }
  const std::string& not_key_reason() const { return not_key_; }
  bool spec_key() const { return in_specs_; }
  bool in_checkpoint() const { return checkpoint_; }
  // What a checkpoint records of this run (nullopt: nothing), and the words naming it.
  std::optional<std::string> checkpoint_text(const RunConfig& c) const;
  ResumeCheck resume_check() const { return resume_check_; }
  const std::string& checkpoint_label() const { return checkpoint_label_.empty() ? flag() : checkpoint_label_; }
  const FieldAccess& access() const { return access_; }
  // "int", "int64", "uint64", "number", "bool", "text" or "choice"; the choices' names.
  std::string type_name() const;
  std::vector<std::string> choices() const;

  // The value as exact text (doubles to 17 significant digits): what ranks compare.
  std::string text(const RunConfig& c) const;
  // Sets the value from text as a flag would take it; UsageError naming the flag otherwise.
  void set_text(RunConfig& c, const std::string& text) const;
  void copy(const RunConfig& from, RunConfig& to) const;
  // The column's text in a result row (make_result_row), as ResultRow::set writes values.
  std::string cell(const RunConfig& c) const;
  // The first rule the value breaks, or null.
  const FieldRule* broken_rule(const RunConfig& c) const;
  // UsageError "FLAG VALUE must ..." for the first rule the value breaks.
  void check(const RunConfig& c) const;

 private:
  FieldAccess access_;
  std::string name_, flag_, help_, negation_, key_default_, not_key_, checkpoint_label_;
  std::vector<std::string> aliases_;
  FieldGroup group_;
  bool default_in_help_ = true, by_hand_ = false, in_key_ = false, in_specs_ = false, checkpoint_ = false;
  std::optional<std::string> unset_;
  std::vector<AliasFlag> alias_flags_;
  std::vector<FieldRule> rules_;
  RowUse row_use_ = RowUse::None;
  ResumeCheck resume_check_ = ResumeCheck::Layout;
  std::function<std::string(const RunConfig&)> column_text_;
  std::function<std::optional<std::string>(const RunConfig&)> checkpoint_text_;
};

}  // namespace ptdp
