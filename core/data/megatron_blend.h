// Megatron-core's dataset blending (BlendedMegatronDatasetBuilder + BlendedDataset +
// helpers.cpp build_blending_indices): the weighted --data-path list, the samples each dataset
// contributes and is built with, and the greedy error-minimising dataset index.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ptdp {

// Megatron's --data-path list: one prefix, "W1 P1 W2 P2 ..." (weights > 0), or several prefixes
// without weights (blended in proportion to their sizes). UsageError naming `flag` for an empty
// list, a weight that does not parse or is not a positive finite number, or a mix.
struct MegatronBlend {
  std::vector<std::string> prefixes;
  std::optional<std::vector<double>> weights;  // as written, not normalised
};
MegatronBlend parse_megatron_blend(std::span<const std::string> items, const std::string& flag = "--data");

// The samples of one split of a weighted blend of `requested` samples.
struct MegatronBlendPlan {
  std::vector<double> weights;          // normalised twice, as Megatron does (builder, then BlendedDataset)
  std::vector<int64_t> target_samples;  // ceil(requested * w): what the blend plans to use
  std::vector<int64_t> built_samples;   // ceil(target * (1 + surplus)): each GPTDataset's num_samples
  int64_t size = 0;                     // the blend's length: sum of target_samples
};
inline constexpr double kMegatronBlendSurplus = 0.005;  // mid_level_dataset_surplus
MegatronBlendPlan plan_megatron_blend(std::span<const double> weights, int64_t requested,
                                      double surplus = kMegatronBlendSurplus);

// build_blending_indices into PATH_BASE-dataset_index.npy (int16) and
// -dataset_sample_index.npy (int64): sample i comes from dataset argmax_d(w_d * max(i, 1) -
// drawn_d) (the first on ties), as its drawn_d-th sample. Streams to the files with at most
// about resident_budget_bytes of them resident. Returns the samples drawn per dataset.
std::vector<int64_t> build_megatron_blending_indices(std::span<const double> weights, int64_t size,
                                                     const std::string& path_base,
                                                     size_t resident_budget_bytes = size_t{256} << 20);

}  // namespace ptdp
