#include "core/data/samples.h"

#include <numeric>

#include "core/common/error.h"

namespace ptdp {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): a tiny generator whose output is fixed by its
// definition, unlike std:: distributions, so orders agree across standard libraries.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  SplitMix64(uint64_t a, uint64_t b) : state_(mix64(a ^ mix64(b ^ 0xD1B54A32D192ED03ull))) {}
  uint64_t next() { return mix64(state_ += 0x9E3779B97F4A7C15ull); }
  // Uniform in [0, n), n >= 1, without modulo bias (rejection sampling).
  uint64_t below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;
    for (;;) {
      const uint64_t r = next();
      if (r >= threshold) return r % n;
    }
  }

 private:
  uint64_t state_;
};

int checked_seq_len(int seq_len) {
  if (seq_len < 1) usage_error("--seq-length {}: must be at least 1", seq_len);
  return seq_len;
}

}  // namespace

SampleSource::SampleSource(int seq_len) : seq_len_(checked_seq_len(seq_len)) {}

DatasetSamples::DatasetSamples(const IndexedDataset& ds, int seq_len, uint64_t seed)
    : SampleSource(seq_len), ds_(ds), seed_(seed), num_samples_(0) {
  if (ds.total_tokens() < int64_t{seq_len} + 1)
    usage_error("{}: has {} tokens, needs at least s+1 = {} for --seq-length {}", ds.bin_path(),
                ds.total_tokens(), int64_t{seq_len} + 1, seq_len);
  num_samples_ = (ds.total_tokens() - 1) / seq_len;
}

int64_t DatasetSamples::window_of(int64_t sample_index) const {
  PTDP_CHECK(sample_index >= 0, "sample index {}", sample_index);
  const int64_t epoch = sample_index / num_samples_;
  std::lock_guard<std::mutex> lock(mu_);
  if (epoch != cached_epoch_) {
    perm_.resize(static_cast<size_t>(num_samples_));
    std::iota(perm_.begin(), perm_.end(), int64_t{0});
    SplitMix64 rng(seed_, static_cast<uint64_t>(epoch));
    for (int64_t i = num_samples_ - 1; i > 0; --i) {
      const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
      std::swap(perm_[i], perm_[j]);
    }
    cached_epoch_ = epoch;
  }
  return perm_[sample_index % num_samples_];
}

void DatasetSamples::get(int64_t sample_index, int32_t* out) const {
  const int64_t s = seq_len();
  ds_.read_tokens(window_of(sample_index) * s, s + 1, out);
}

SyntheticSamples::SyntheticSamples(int64_t vocab_size, int seq_len, uint64_t seed)
    : SampleSource(seq_len), vocab_size_(vocab_size), seed_(seed) {
  if (vocab_size < 1 || vocab_size > (int64_t{1} << 31))
    usage_error("--vocab-size {}: must be between 1 and 2^31", vocab_size);
}

void SyntheticSamples::get(int64_t sample_index, int32_t* out) const {
  PTDP_CHECK(sample_index >= 0, "sample index {}", sample_index);
  SplitMix64 rng(seed_ ^ 0x5EED5EED5EED5EEDull, static_cast<uint64_t>(sample_index));
  for (int i = 0; i <= seq_len(); ++i) out[i] = static_cast<int32_t>(rng.below(static_cast<uint64_t>(vocab_size_)));
}

}  // namespace ptdp
