#include "experiments/compare_labels.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/config/results_csv.h"

namespace ptdp {

namespace {

// The columns every label names, in the label's own short form (core_label).
const std::vector<std::string>& core_columns() {
  static const std::vector<std::string> c = {"experiment",   "mode",     "backend",   "precision",     "model",
                                             "tp",           "pp",       "dp",        "vpp",           "micro_batch",
                                             "global_batch", "schedule", "recompute", "scatter_gather"};
  return c;
}

bool is_core(const std::string& column) {
  return std::find(core_columns().begin(), core_columns().end(), column) != core_columns().end();
}

}  // namespace

ConfigLabels::ConfigLabels(const std::vector<std::vector<std::string>>& keys) {
  const auto& cols = config_key_columns();
  shown_.assign(cols.size(), false);
  for (size_t i = 0; i < cols.size(); ++i) {
    if (is_core(cols[i])) continue;
    const auto d = config_key_defaults().find(cols[i]);
    for (const auto& k : keys) {
      const bool not_default = d != config_key_defaults().end() && k[i] != d->second;
      if (not_default || k[i] != keys.front()[i]) shown_[i] = true;
    }
  }
}

std::string ConfigLabels::operator()(const std::vector<std::string>& k) const {
  const auto& cols = config_key_columns();
  auto v = [&](const char* column) { return k[std::find(cols.begin(), cols.end(), column) - cols.begin()]; };
  std::string s = fmt::format("{}/{}/{} {} {} t={} p={} d={} v={} b={} B={} {} recompute={} sg={}", v("experiment"),
                              v("mode"), v("backend"), v("precision"), v("model"), v("tp"), v("pp"), v("dp"), v("vpp"),
                              v("micro_batch"), v("global_batch"), v("schedule"), v("recompute"), v("scatter_gather"));
  for (size_t i = 0; i < cols.size(); ++i)
    if (shown_[i]) s += fmt::format(" {}={}", cols[i], k[i]);
  if (k.size() > cols.size()) s += fmt::format(" on {}/{}", k[k.size() - 2], k[k.size() - 1]);
  return s;
}

}  // namespace ptdp
