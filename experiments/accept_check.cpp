#include "experiments/accept_check.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ptdp {

using Json = nlohmann::ordered_json;

Json check_json(const Check& c) {
  const auto number = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
  return {{"check", c.name},
          {"metric", c.metric},
          {"value", number(c.value)},
          {"unit", c.unit},
          {"op", c.op},
          {"threshold", number(c.threshold)},
          {"status", c.status()},
          {"detail", c.detail},
          {"threshold_source", c.source},
          {"under_load", c.under_load}};
}

Check check_from_json(const Json& j) {
  Check c;
  c.name = j.at("check");
  c.metric = j.at("metric");
  c.value = j.at("value").is_null() ? std::numeric_limits<double>::quiet_NaN() : j.at("value").get<double>();
  c.unit = j.at("unit");
  c.op = j.at("op");
  c.threshold = j.at("threshold").is_null() ? 0.0 : j.at("threshold").get<double>();
  const std::string status = j.at("status");
  c.pass = status == "PASS";
  c.skipped = status == "SKIP";
  c.detail = j.at("detail");
  c.source = j.at("threshold_source");
  c.under_load = j.value("under_load", false);
  return c;
}

std::vector<std::string> check_csv_fields(const Check& c) {
  return {c.name, c.metric, c.skipped ? "" : fmt::format("{:.6g}", c.value),  // SKIP: nothing measured
          c.unit, c.op,     fmt::format("{:.6g}", c.threshold),               c.status()};
}

std::string failed_under_load_text(const std::vector<Check>& checks) {
  std::vector<std::string> names;
  for (const Check& c : checks)
    if (!c.skipped && !c.pass && c.under_load && std::find(names.begin(), names.end(), c.name) == names.end())
      names.push_back(c.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string failed_checks_text(const std::vector<Check>& checks) {
  std::vector<std::pair<std::string, std::vector<std::string>>> failed;  // check, its failed metrics
  for (const Check& c : checks) {
    if (c.skipped || c.pass) continue;
    auto it = std::find_if(failed.begin(), failed.end(), [&](const auto& f) { return f.first == c.name; });
    if (it == failed.end()) failed.push_back({c.name, {c.metric}});
    else it->second.push_back(c.metric);
  }
  std::string out;
  for (const auto& [name, metrics] : failed)
    out += fmt::format("{}{}{}", out.empty() ? "" : ", ", name,
                       metrics.size() > 1 ? fmt::format(" ({})", fmt::join(metrics, ", ")) : "");
  return out;
}

}  // namespace ptdp
