// The tables of a run's fields, one per struct (model_fields.cpp, parallel_fields.cpp,
// optimizer_fields.cpp, run_fields.cpp), and what is derived from all of them at once.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/config/field.h"

namespace ptdp {

const std::vector<Field>& model_fields();      // ModelConfig
const std::vector<Field>& parallel_fields();   // ParallelConfig
const std::vector<Field>& optimizer_fields();  // OptimizerConfig (and its LrSchedule)
const std::vector<Field>& run_fields();        // RunConfig's own
// Every field, in that order.
const std::vector<const Field*>& all_fields();
// The field of a name or one of its flags; null if none.
const Field* find_field(std::string_view name_or_flag);

// Every field as (flag, exact value text), in table order: what the ranks of an MPI job compare
// at start, since each process parses its own command line.
std::vector<std::pair<std::string, std::string>> run_config_fields(const RunConfig& c);
// Checks every field's own rules in table order (UsageError "FLAG VALUE must ...").
void check_field_rules(const RunConfig& c);

// A setting a checkpoint records: its name (the shard header's key), the words that name it in a
// refusal (its flag), and its exact value.
struct RecordedSetting {
  std::string name, label, value;
  ResumeCheck check = ResumeCheck::Layout;
};
// What a checkpoint of this run records of its configuration: every field its table marks for
// checkpoints, in table order (a field this run does not record, such as --grad-bucket-size
// without --zero 1, is left out). A resume must match each.
std::vector<RecordedSetting> checkpoint_settings(const RunConfig& c);

}  // namespace ptdp
