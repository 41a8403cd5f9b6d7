#include "experiments/accept_check.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

namespace ptdp {

using Json = nlohmann::ordered_json;

Json check_json(const Check& c) {
  const auto number = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
  return {{"check", c.name},      {"metric", c.metric},
          {"value", number(c.value)},  {"unit", c.unit},
          {"op", c.op},           {"threshold", number(c.threshold)},
          {"status", c.status()}, {"detail", c.detail},
          {"threshold_source", c.source}};
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
  return c;
}

std::vector<std::string> check_csv_fields(const Check& c) {
  return {c.name, c.metric, c.skipped ? "" : fmt::format("{:.6g}", c.value),  // SKIP: nothing measured
          c.unit, c.op,     fmt::format("{:.6g}", c.threshold),               c.status()};
}

}  // namespace ptdp
