// `ptdp fields`: every configuration field as the tables declare it (core/config/config_fields.h),
// as a table or (--json) as the schema that scripts/ and plots/ read: results/fields.json.
#include <functional>
#include <memory>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config/config_fields.h"
#include "core/config/results_csv.h"

namespace ptdp {

namespace {

nlohmann::ordered_json schema() {
  const RunConfig defaults;
  nlohmann::ordered_json fields = nlohmann::ordered_json::array();
  for (const Field* f : all_fields()) {
    nlohmann::ordered_json j;
    j["name"] = f->name();
    j["flag"] = f->has_flag() ? f->flag() : "";
    j["aliases"] = f->aliases();
    j["group"] = enum_name(f->group());
    j["type"] = f->type_name();
    if (!f->choices().empty()) j["choices"] = f->choices();
    j["default"] = f->text(defaults);
    j["help"] = f->help_text();
    j["column"] = enum_name(f->row_use());
    j["key"] = f->in_key();
    if (f->in_key()) j["key_default"] = f->key_default();
    if (!f->not_key_reason().empty()) j["not_key"] = f->not_key_reason();
    j["spec"] = f->spec_key();
    fields.push_back(std::move(j));
  }
  nlohmann::ordered_json s;
  s["columns"] = result_columns();
  s["key"] = config_key_columns();
  s["key_defaults"] = config_key_defaults();
  s["fields"] = std::move(fields);
  return s;
}

int run_fields(bool json) {
  if (json) {
    fmt::print("{}\n", schema().dump(2));
    return 0;
  }
  const RunConfig defaults;
  fmt::print("{:<44} {:<8} {:<20} {:<10} {}\n", "flag (name)", "type", "default", "column", "key");
  for (const Field* f : all_fields()) {
    const std::string flag = f->has_flag() ? f->flag() : "(" + f->name() + ")";
    std::string key = f->in_key() ? "yes" : "no";
    if (!f->not_key_reason().empty()) key += ": " + f->not_key_reason();
    std::string def = f->text(defaults);
    if (def.size() > 20) def = def.substr(0, 17) + "...";
    fmt::print("{:<44} {:<8} {:<20} {:<10} {}\n", flag, f->type_name(), def, f->row_use(), key);
  }
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> add_fields_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "fields", "list every configuration field: its flag, type, default, result column and place in the key");
  sub->add_flag("--json", *json, "print the schema scripts read (results/fields.json) as JSON");
  return {sub, [json]() { return run_fields(*json); }};
}

}  // namespace ptdp
