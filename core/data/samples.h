// Training samples for a GPT: each is seq_len+1 consecutive tokens (inputs = the first
// seq_len, targets = the same shifted by one), from a dataset in a seeded order or synthetic.
#pragma once
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/data/indexed_dataset.h"

namespace ptdp {

class SampleSource {
 public:
  explicit SampleSource(int seq_len);
  virtual ~SampleSource() = default;
  // Writes the seq_len()+1 tokens of the sample at position sample_index (>= 0) of the
  // training order. Deterministic: the same source and index give the same tokens.
  virtual void get(int64_t sample_index, int32_t* out) const = 0;
  int seq_len() const { return seq_len_; }

 private:
  int seq_len_;
};

// Cuts the dataset's token stream (all sequences concatenated, documents not separated)
// into windows with stride s = seq_len: window j covers tokens [j*s, j*s+s+1), so
// num_samples() = (total_tokens-1)/s and consecutive windows share one token. Sample
// index i reads window perm_e[i mod n] of epoch e = i / n, where perm_e is a Fisher-Yates
// permutation driven by splitmix64 seeded with (seed, e): the same on every platform.
// The dataset must outlive this object. get() is thread-safe.
class DatasetSamples final : public SampleSource {
 public:
  // UsageError when seq_len < 1 or the dataset has fewer than seq_len+1 tokens.
  DatasetSamples(const IndexedDataset& ds, int seq_len, uint64_t seed);
  void get(int64_t sample_index, int32_t* out) const override;
  int64_t num_samples() const { return num_samples_; }
  // The window j that sample_index reads.
  int64_t window_of(int64_t sample_index) const;

 private:
  const IndexedDataset& ds_;
  uint64_t seed_;
  int64_t num_samples_;
  mutable std::mutex mu_;
  mutable int64_t cached_epoch_ = -1;
  mutable std::vector<int64_t> perm_;  // permutation of cached_epoch_
};

// Uniform random tokens in [0, vocab_size), a pure function of (seed, sample_index): the
// same whatever the order of calls.
class SyntheticSamples final : public SampleSource {
 public:
  // UsageError when vocab_size is not in [1, 2^31] or seq_len < 1.
  SyntheticSamples(int64_t vocab_size, int seq_len, uint64_t seed);
  void get(int64_t sample_index, int32_t* out) const override;
  int64_t vocab_size() const { return vocab_size_; }

 private:
  int64_t vocab_size_;
  uint64_t seed_;
};

}  // namespace ptdp
