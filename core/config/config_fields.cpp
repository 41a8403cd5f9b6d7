#include "core/config/config_fields.h"

namespace ptdp {

const std::vector<const Field*>& all_fields() {
  static const std::vector<const Field*> all = [] {
    std::vector<const Field*> v;
    for (const auto* table : {&model_fields(), &parallel_fields(), &optimizer_fields(), &run_fields()})
      for (const Field& f : *table) v.push_back(&f);
    return v;
  }();
  return all;
}

const Field* find_field(std::string_view name_or_flag) {
  for (const Field* f : all_fields()) {
    if (f->name() == name_or_flag || f->flag() == name_or_flag) return f;
    for (const auto& a : f->aliases())
      if (a == name_or_flag) return f;
  }
  return nullptr;
}

std::vector<std::pair<std::string, std::string>> run_config_fields(const RunConfig& c) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Field* f : all_fields()) out.emplace_back(f->flag(), f->text(c));
  return out;
}

void check_field_rules(const RunConfig& c) {
  for (const Field* f : all_fields()) f->check(c);
}

std::vector<RecordedSetting> checkpoint_settings(const RunConfig& c) {
  std::vector<RecordedSetting> out;
  for (const Field* f : all_fields())
    if (const auto v = f->checkpoint_text(c)) out.push_back({f->name(), f->checkpoint_label(), *v, f->resume_check()});
  return out;
}

}  // namespace ptdp
