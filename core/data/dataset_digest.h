// SHA-256 digest of an indexed dataset's sequence lengths (OpenSSL), as lowercase hex: what
// Megatron's index files depend on beyond the description Megatron-core names them by; ptdp keeps
// it beside the index files it builds (megatron_samples.h) and rebuilds them when it differs.
#pragma once
#include <string>

#include "core/data/indexed_dataset.h"

namespace ptdp {

std::string sequence_lengths_digest(const IndexedDataset& ds);

}  // namespace ptdp
