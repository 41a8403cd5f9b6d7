// Megatron-core's sample order as a SampleSource: one split (--split) of one indexed dataset or
// of a blend (Megatron's --data-path list), the same samples in the same order as Megatron-core's
// GPTDataset / BlendedDataset for the same files, seed, seq_len and sample count. The index
// files are built once into the cache (numpy .npy, Megatron's layout and names:
// HASH-GPTDataset-SPLIT-*.npy, HASH-BlendedDataset-SPLIT-*.npy, HASH the MD5 of Megatron's
// description, kept beside them as HASH-...-description.txt) and then memory-mapped. Files that
// Megatron-core built for the same indices are used as they are, whatever its tokenizer, once
// every sample's bounds are checked against the dataset's sequence lengths. Beside the files it
// builds ptdp keeps HASH-GPTDataset-SPLIT-ptdp-dataset.txt, the SHA-256 of the sequence lengths
// (dataset_digest.h): files built for another version of a dataset rewritten under the same
// prefix (the same description) are rebuilt. Ranks may build at once on one (shared) cache
// directory: each writes temporaries (temporary_path) and renames them into place, the
// description last, and all write the same bytes; building on one rank before the others open
// saves the repeated work. Temporaries that killed builds left are removed when a run opens the
// directory (remove_dead_temporaries).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/data/indexed_dataset.h"
#include "core/data/megatron_gpt_indices.h"
#include "core/data/megatron_split.h"
#include "core/data/samples.h"

namespace ptdp {

struct MegatronDataOptions {
  std::vector<std::string> data;   // "PREFIX", "W1 P1 W2 P2 ...", or "P1 P2 ..." (by size)
  std::string split = "969,30,1";  // Megatron's default --split
  MegatronSplit which = MegatronSplit::Train;
  int64_t num_samples = 0;         // samples asked of this split (Megatron's *_num_samples)
  int seq_len = 0;
  uint64_t seed = 1234;            // Megatron's default --seed
  // Megatron's drop_last_partial_validation_sequence: false keeps the valid split's last,
  // shorter sample (padded with 0). Other splits always drop it.
  bool drop_last_partial_validation_sequence = true;
  // Created when missing. Empty: Megatron-core's defaults, PREFIX/cache/GPTDataset_indices for
  // each dataset and FIRST_PREFIX/cache/BlendedDataset_indices for a blend's own index.
  std::string cache_dir;
};

// One contributing dataset, for the report at start and in the result row.
struct MegatronDatasetUse {
  std::string prefix;
  double weight = 1.0;              // normalised
  int64_t samples_built = 0;        // its GPTDataset's length
  int64_t samples_drawn = 0;        // what the blend takes from it (all of it when not blended)
  int64_t tokens_per_epoch = 0;
  int64_t num_epochs = 0;           // epochs its document index spans
  double epochs_drawn = 0;          // samples_drawn * seq_len / tokens_per_epoch
  std::string index_files;          // DIR/HASH-GPTDataset-SPLIT, the base of its three .npy files
  bool index_files_found = false;   // found in the cache (ptdp's or Megatron's), not built now
};

class MegatronSamples final : public SampleSource {
 public:
  // UsageError for bad options (a malformed split or weight list, an empty split, a blend
  // that needs more samples of a dataset than Megatron built, files that do not open, a blend
  // index naming a sample that is negative or past what was built). RuntimeError naming the file
  // when an index file cannot be written (a full disk, a file size limit).
  explicit MegatronSamples(const MegatronDataOptions& o);
  ~MegatronSamples() override;
  // The seq_len+1 tokens of sample i of the order; i must be below num_samples() (UsageError
  // otherwise: the order was built for fewer samples; also for a sample the index files give
  // fewer tokens, MegatronGptIndices::read_sample). Thread-safe.
  void get(int64_t sample_index, int32_t* out) const override;
  int64_t num_samples() const { return num_samples_; }
  const std::vector<MegatronDatasetUse>& datasets() const { return uses_; }
  const std::string& blend_index_files() const { return blend_index_files_; }  // empty unless blended

 private:
  struct Part;
  std::vector<std::unique_ptr<Part>> parts_;
  std::vector<MegatronDatasetUse> uses_;
  std::unique_ptr<NpyArray> dataset_index_, dataset_sample_index_;  // blends only
  int64_t num_samples_ = 0;
  std::string blend_index_files_;
};

}  // namespace ptdp
