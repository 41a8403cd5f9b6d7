// SHA-256 digests of an indexed dataset (OpenSSL), as lowercase hex:
//   sequence_lengths_digest: of its sequence lengths (the i32 array of .idx), what Megatron's
//     index files depend on beyond the description Megatron-core names them by; ptdp keeps it
//     beside the index files it builds (megatron_samples.h) and rebuilds them when it differs.
//   dataset_content_digest: of .idx and .bin, what the ranks of a job compare to find a copy of
//     --data that differs on one node. .bin is read whole up to kWholeBinBytes; past that, its
//     size and kBinSamples evenly spaced blocks of kBinBlockBytes (first and last included).
#pragma once
#include <cstddef>
#include <string>

#include "core/data/indexed_dataset.h"

namespace ptdp {

inline constexpr size_t kWholeBinBytes = size_t{1} << 30;
inline constexpr size_t kBinSamples = 1024;
inline constexpr size_t kBinBlockBytes = size_t{1} << 20;

std::string sequence_lengths_digest(const IndexedDataset& ds);
std::string dataset_content_digest(const IndexedDataset& ds);

}  // namespace ptdp
