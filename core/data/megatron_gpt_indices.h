// Megatron-core's GPTDataset sample order over one split of an indexed dataset, computed as
// gpt_dataset.py and helpers.cpp (build_sample_idx) compute it, into the .npy files numpy.save
// would write, read back memory-mapped:
//   document_index  int32, the split's sequences repeated num_epochs times, shuffled with
//                   RandomState(seed); when the last epoch is partial and contributes fewer than
//                   int(0.8 * samples per epoch) samples it is shuffled separately after the
//                   others (separate_final_epoch);
//   sample_index    (num_samples + 1, 2) int32 (int64 when a document index or sequence length
//                   exceeds int32): per sample boundary, the position in document_index and the
//                   token offset in that sequence; samples are seq_len + 1 tokens packed across
//                   sequences, consecutive samples sharing one token;
//   shuffle_index   uint32 (int64 from 2^32 - 2 samples): a permutation of the samples (of the
//                   first epochs, then separately of the final epoch's, when separated).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/data/indexed_dataset.h"
#include "core/data/megatron_split.h"
#include "core/data/npy_file.h"

namespace ptdp {

struct MegatronGptParams {
  int seq_len = 0;
  uint64_t seed = 1234;                 // Megatron's --seed (config.random_seed)
  std::optional<int64_t> num_samples;   // nullopt: one epoch (Megatron's num_samples=None)
  bool add_extra_token = true;          // add_extra_token_to_sequence
  bool drop_last_partial_sequence = true;  // false only for Megatron's valid split when asked
};

// What Megatron derives before drawing: UsageError when seq_len < 1, the range is empty or
// holds no tokens, or the seed is outside NumPy's [0, 2^32).
struct MegatronGptPlan {
  int64_t tokens_per_epoch = 0;
  int64_t num_epochs = 0;
  bool separate_final_epoch = false;
  int64_t num_samples_sans_final_epoch = 0;  // samples from the epochs before the last
  int64_t document_index_size = 0;
  int64_t num_samples = 0;                   // rows of sample_index minus 1
  NpyType sample_index_type = NpyType::I32;
  NpyType shuffle_index_type = NpyType::U32;
};
MegatronGptPlan plan_megatron_gpt(const IndexedDataset& ds, SequenceRange seqs, const MegatronGptParams& p);

// Writes PATH_BASE-document_index.npy, -sample_index.npy and -shuffle_index.npy (PATH_BASE is
// e.g. DIR/HASH-GPTDataset-train, Megatron's naming), each renamed into place when complete.
// Memory: the document index is held while the sample index streams to its file (at most
// resident_budget_bytes of it resident), then freed; then the shuffle index is built. The peak
// is about max(4 * document_index_size, 4 or 8 * num_samples) + resident_budget_bytes, where
// Megatron holds all three at once.
MegatronGptPlan build_megatron_gpt_indices(const IndexedDataset& ds, SequenceRange seqs, const MegatronGptParams& p,
                                           const std::string& path_base,
                                           size_t resident_budget_bytes = size_t{256} << 20);

// The three index files of one GPTDataset (ptdp's or Megatron's own cache), mapped read-only.
class MegatronGptIndices {
 public:
  // UsageError naming the file when one is missing, malformed or inconsistent with the others.
  static MegatronGptIndices open(const std::string& path_base);
  int64_t num_samples() const { return shuffle_.size(); }
  const NpyArray& document_index() const { return document_; }
  const NpyArray& sample_index() const { return sample_; }
  const NpyArray& shuffle_index() const { return shuffle_; }
  // The seq_len + add_extra tokens of sample i (GPTDataset's "text" before masking), read from ds.
  // Only the sample index's last sample may be shorter, and only with `partial_last` (built
  // without drop_last_partial_sequence): it is padded with 0, the token Megatron puts in place of
  // its pad id. Any other short sample is a UsageError naming the files: they were built for
  // another version of ds. Thread-safe.
  void read_sample(const IndexedDataset& ds, int64_t i, int seq_len, bool add_extra_token, int32_t* out,
                   bool partial_last = false) const;
  // Why these files do not fit ds as it is now (a dataset rewritten under the same prefix since
  // they were built): the first sample of the sample index that reads past a sequence or other
  // than seq_len + extra tokens (fewer only as above). Empty when every sample fits.
  std::string misfit(const IndexedDataset& ds, int seq_len, bool add_extra_token, bool partial_last) const;

 private:
  // The tokens sample row j spans (checked against ds as read_sample reads it); calls
  // piece(seq, offset, length) for each piece when given. Empty text or why it does not fit.
  template <class Piece>
  std::string span_of(const IndexedDataset& ds, int64_t j, int64_t extra, int64_t want, int64_t* got,
                      const Piece& piece) const;
  NpyArray document_, sample_, shuffle_;
};

}  // namespace ptdp
