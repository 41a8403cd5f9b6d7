#include "core/data/megatron_blend.h"

#include <cmath>
#include <cstdlib>

#include "core/common/error.h"
#include "core/data/npy_file.h"
#include "core/data/numpy_sum.h"

namespace ptdp {
namespace {

// Python's float(text) for the decimal numbers a weight is written as.
std::optional<double> parse_weight(const std::string& text) {
  if (text.empty() || text.find_first_of(" \t\n") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

MegatronBlend parse_megatron_blend(std::span<const std::string> items, const std::string& flag) {
  if (items.empty()) usage_error("{}: needs a dataset prefix, or a list 'WEIGHT PREFIX WEIGHT PREFIX ...'", flag);
  MegatronBlend blend;
  bool weighted = items.size() % 2 == 0;
  if (weighted) {
    std::vector<double> w;
    for (size_t i = 0; i < items.size(); i += 2) {
      const auto v = parse_weight(items[i]);
      if (!v) {
        weighted = false;
        break;
      }
      w.push_back(*v);
    }
    if (weighted) {
      for (size_t i = 0; i < items.size(); i += 2) {
        if (!std::isfinite(w[i / 2]) || w[i / 2] <= 0)
          usage_error("{}: weight '{}' of {}: weights must be positive finite numbers", flag, items[i], items[i + 1]);
        if (parse_weight(items[i + 1]))
          usage_error("{}: '{}' after weight '{}' is a number, not a dataset prefix", flag, items[i + 1], items[i]);
        blend.prefixes.push_back(items[i + 1]);
      }
      blend.weights = std::move(w);
      return blend;
    }
  }
  // Without weights every item is a prefix; a number among them is a weight that lost its pair.
  for (size_t i = 0; i < items.size(); ++i) {
    if (parse_weight(items[i]))
      usage_error("{}: '{}' looks like a weight, but the list is not 'WEIGHT PREFIX' pairs of a positive weight "
                  "and a dataset prefix (item {} of {})",
                  flag, items[i], i + 1, items.size());
    blend.prefixes.push_back(items[i]);
  }
  return blend;
}

MegatronBlendPlan plan_megatron_blend(std::span<const double> weights, int64_t requested, double surplus) {
  PTDP_CHECK(!weights.empty() && requested >= 0, "blend of {} datasets, {} samples", weights.size(), requested);
  const std::vector<double> once = numpy_normalize(weights);  // the builder's
  MegatronBlendPlan plan;
  plan.weights = numpy_normalize(once);                        // BlendedDataset's own
  for (double w : once) {
    const double target = std::ceil(static_cast<double>(requested) * w);
    plan.target_samples.push_back(static_cast<int64_t>(target));
    plan.built_samples.push_back(static_cast<int64_t>(std::ceil(target * (1.0 + surplus))));
    plan.size += static_cast<int64_t>(target);
  }
  return plan;
}

std::vector<int64_t> build_megatron_blending_indices(std::span<const double> weights, int64_t size,
                                                     const std::string& path_base, size_t resident_budget_bytes) {
  PTDP_CHECK(!weights.empty() && weights.size() < 32767, "{} datasets", weights.size());
  NpyWriter which(path_base + "-dataset_index.npy", NpyType::I16, {size});
  NpyWriter nth(path_base + "-dataset_sample_index.npy", NpyType::I64, {size});
  int16_t* d = which.data<int16_t>();
  int64_t* k = nth.data<int64_t>();
  std::vector<int64_t> drawn(weights.size(), 0);
  const int64_t release_every = std::max<int64_t>(1, static_cast<int64_t>(resident_budget_bytes / 10));
  for (int64_t i = 0; i < size; ++i) {
    const double at = std::max(static_cast<double>(i), 1.0);
    size_t best = 0;
    double best_error = weights[0] * at - static_cast<double>(drawn[0]);
    for (size_t j = 1; j < weights.size(); ++j) {
      const double error = weights[j] * at - static_cast<double>(drawn[j]);
      if (error > best_error) {
        best_error = error;
        best = j;
      }
    }
    d[i] = static_cast<int16_t>(best);
    k[i] = drawn[best]++;
    if ((i + 1) % release_every == 0) {
      which.release_resident();
      nth.release_resident();
    }
  }
  which.finish();
  nth.finish();
  return drawn;
}

}  // namespace ptdp
