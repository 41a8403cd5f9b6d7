#include "core/data/megatron_gpt_indices.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <cmath>
#include <limits>
#include <cstring>
#include <numeric>
#include <span>
#include <vector>

#include "core/common/error.h"
#include "core/data/numpy_random.h"

namespace ptdp {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// Counts the bytes a build has written through a writer's mapping and drops them from the
// resident set once they reach the budget (the writes are sequential: each page is written back
// once).
class Budget {
 public:
  Budget(NpyWriter& w, size_t bytes) : w_(w), bytes_(std::max<size_t>(bytes, 1)) {}
  void touch(size_t n) {
    used_ += n;
    if (used_ >= bytes_) {
      w_.release_resident();
      used_ = 0;
    }
  }

 private:
  NpyWriter& w_;
  size_t bytes_, used_ = 0;
};

// An array in anonymous memory on transparent huge pages where the kernel allows them: a random
// shuffle of gigabytes otherwise spends most of its time on TLB misses.
template <class T>
class HugeArray {
 public:
  explicit HugeArray(size_t n) : n_(n), bytes_(std::max<size_t>((n * sizeof(T) + kHuge - 1) / kHuge * kHuge, kHuge)) {
    void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw RuntimeError(fmt::format("cannot allocate {} bytes for an index: {}", bytes_, std::strerror(errno)));
    ::madvise(p, bytes_, MADV_HUGEPAGE);  // advice only: without it the pages are small
    data_ = static_cast<T*>(p);
  }
  ~HugeArray() { ::munmap(data_, bytes_); }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
  T* data() { return data_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) { return data_[i]; }

 private:
  static constexpr size_t kHuge = size_t{2} << 20;
  size_t n_, bytes_;
  T* data_ = nullptr;
};

// Writes an array held in memory to a .npy file, chunk by chunk within the budget.
template <class T>
void write_npy(const std::string& path, NpyType type, HugeArray<T>& x, size_t budget_bytes) {
  NpyWriter w(path, type, {static_cast<int64_t>(x.size())});
  const size_t chunk = std::max<size_t>(budget_bytes / sizeof(T), 1);
  for (size_t at = 0; at < x.size(); at += chunk) {
    const size_t n = std::min(chunk, x.size() - at);
    std::memcpy(w.data<T>() + at, x.data() + at, n * sizeof(T));
    w.release_resident();
  }
  w.finish();
}

// RandomState.shuffle of x[begin, end) as one 1-D array.
template <class T>
void shuffle_range(NumpyRandomState& rs, HugeArray<T>& x, int64_t begin, int64_t end) {
  rs.shuffle(std::span<T>(x.data() + begin, static_cast<size_t>(end - begin)));
}

// helpers.cpp build_sample_idx, one row (document position, offset) per sample boundary.
template <class T>
void build_sample_index(const IndexedDataset& ds, const int32_t* document_index, int64_t n_docs,
                        const MegatronGptParams& p, int64_t num_samples, NpyWriter& w, Budget& budget) {
  T* rows = w.data<T>();
  const int64_t extra = p.add_extra_token ? 1 : 0;
  int64_t doc = 0, offset = 0;
  rows[0] = 0;
  rows[1] = 0;
  for (int64_t r = 1; r <= num_samples; ++r) {
    int64_t remaining = p.seq_len + extra;
    while (remaining != 0) {
      const int64_t length = ds.sequence_length(document_index[doc]) - offset;
      remaining -= length;
      if (remaining <= 0) {
        offset += remaining + length - extra;
        remaining = 0;
      } else {
        if (doc == n_docs - 1) {  // out of documents: only without drop_last_partial_sequence
          PTDP_CHECK(r == num_samples, "sample index ran out of documents at row {} of {}", r, num_samples);
          offset = ds.sequence_length(document_index[doc]) - extra;
          break;
        }
        ++doc;
        offset = 0;
      }
    }
    rows[2 * r] = static_cast<T>(doc);
    rows[2 * r + 1] = static_cast<T>(offset);
    budget.touch(2 * sizeof(T));
  }
}

}  // namespace

MegatronGptPlan plan_megatron_gpt(const IndexedDataset& ds, SequenceRange seqs, const MegatronGptParams& p) {
  if (p.seq_len < 1) usage_error("--seq-length {}: must be at least 1", p.seq_len);
  if (p.seed > 0xffffffffull) usage_error("--seed {}: Megatron's sample order needs a seed in [0, 2^32)", p.seed);
  if (p.num_samples && *p.num_samples < 0) usage_error("{} samples requested: must be >= 0", *p.num_samples);
  PTDP_CHECK(seqs.begin >= 0 && seqs.begin <= seqs.end && seqs.end <= ds.num_sequences(), "sequence range [{}, {})",
             seqs.begin, seqs.end);
  if (seqs.begin == seqs.end) usage_error("{}: the split holds no sequences", ds.prefix());
  MegatronGptPlan plan;
  for (int64_t i = seqs.begin; i < seqs.end; ++i) plan.tokens_per_epoch += ds.sequence_length(i);
  if (plan.tokens_per_epoch < 1) usage_error("{}: the split's sequences hold no tokens", ds.prefix());
  const int64_t extra = p.add_extra_token ? 1 : 0;
  const int64_t s = p.seq_len, t = plan.tokens_per_epoch;
  // _get_num_epochs: the fewest epochs (>= 1) whose tokens reach num_samples * s + extra.
  plan.num_epochs = 1;
  if (p.num_samples) {
    const int64_t requested = *p.num_samples * s + extra;
    plan.num_epochs = std::max<int64_t>(1, (requested + t - 1) / t);
  }
  if (plan.num_epochs > 1) {
    plan.num_samples_sans_final_epoch = ((plan.num_epochs - 1) * t - extra) / s;
    const int64_t from_final = *p.num_samples - plan.num_samples_sans_final_epoch;
    const int64_t per_epoch = (t - extra) / s;
    PTDP_CHECK(from_final >= 0 && from_final <= per_epoch + 1, "final epoch samples {} of {}", from_final, per_epoch);
    plan.separate_final_epoch = from_final < static_cast<int64_t>(0.80 * static_cast<double>(per_epoch));
  }
  const int64_t n_seqs = seqs.end - seqs.begin;
  plan.document_index_size = plan.num_epochs * n_seqs;
  if (p.drop_last_partial_sequence) {
    plan.num_samples = (plan.num_epochs * t - extra) / s;
  } else {  // helpers.cpp divides in single precision here
    plan.num_samples = static_cast<int64_t>(std::ceil(static_cast<float>(plan.num_epochs * t - extra) / static_cast<float>(s)));
  }
  int64_t longest = 0;  // over the whole dataset, as Megatron's sizes.max()
  for (int64_t i = 0; i < ds.num_sequences(); ++i) longest = std::max(longest, ds.sequence_length(i));
  plan.sample_index_type = std::max(plan.document_index_size, longest) <= kInt32Max ? NpyType::I32 : NpyType::I64;
  plan.shuffle_index_type = plan.num_samples >= int64_t{0xffffffff} - 1 ? NpyType::I64 : NpyType::U32;
  return plan;
}

MegatronGptPlan build_megatron_gpt_indices(const IndexedDataset& ds, SequenceRange seqs, const MegatronGptParams& p,
                                           const std::string& path_base, size_t resident_budget_bytes) {
  const MegatronGptPlan plan = plan_megatron_gpt(ds, seqs, p);
  if (seqs.end - 1 > kInt32Max) usage_error("{}: more than 2^31 sequences", ds.prefix());
  NumpyRandomState rs(p.seed, "--seed");

  // The two shuffled indices are built in memory (a permutation of n items needs about
  // n log2 n bits however it is stored; shuffling through a file mapping instead makes the kernel
  // write pages back again and again), one at a time; the sample index streams to its file.
  // Document index: the split's sequences, epoch after epoch, shuffled (the last epoch apart).
  auto docs = std::make_unique<HugeArray<int32_t>>(static_cast<size_t>(plan.document_index_size));
  int32_t* d = docs->data();
  const int64_t n_seqs = seqs.end - seqs.begin;
  for (int64_t e = 0; e < plan.num_epochs; ++e)
    for (int64_t i = 0; i < n_seqs; ++i) d[e * n_seqs + i] = static_cast<int32_t>(seqs.begin + i);
  const int64_t last_epoch = plan.separate_final_epoch ? (plan.num_epochs - 1) * n_seqs : plan.document_index_size;
  shuffle_range(rs, *docs, 0, last_epoch);
  if (last_epoch != plan.document_index_size) shuffle_range(rs, *docs, last_epoch, plan.document_index_size);

  // Sample index.
  NpyWriter samples(path_base + "-sample_index.npy", plan.sample_index_type, {plan.num_samples + 1, 2});
  Budget sample_budget(samples, resident_budget_bytes);
  if (plan.sample_index_type == NpyType::I32)
    build_sample_index<int32_t>(ds, d, plan.document_index_size, p, plan.num_samples, samples, sample_budget);
  else
    build_sample_index<int64_t>(ds, d, plan.document_index_size, p, plan.num_samples, samples, sample_budget);
  samples.finish();
  write_npy(path_base + "-document_index.npy", NpyType::I32, *docs, resident_budget_bytes);
  docs.reset();

  // Shuffle index: [0, first) shuffled, then [first, total) shuffled when the final epoch is apart.
  const int64_t total = plan.num_samples;
  const int64_t first = plan.separate_final_epoch ? plan.num_samples_sans_final_epoch : total;
  const auto build_shuffle = [&]<class T>(T) {
    HugeArray<T> x(static_cast<size_t>(total));
    std::iota(x.data(), x.data() + total, T{0});
    shuffle_range(rs, x, 0, first);
    if (first != total) shuffle_range(rs, x, first, total);
    write_npy(path_base + "-shuffle_index.npy", plan.shuffle_index_type, x, resident_budget_bytes);
  };
  if (plan.shuffle_index_type == NpyType::U32) build_shuffle(uint32_t{});
  else build_shuffle(int64_t{});
  return plan;
}

MegatronGptIndices MegatronGptIndices::open(const std::string& path_base) {
  MegatronGptIndices x;
  x.document_ = NpyArray::open(path_base + "-document_index.npy");
  x.sample_ = NpyArray::open(path_base + "-sample_index.npy");
  x.shuffle_ = NpyArray::open(path_base + "-shuffle_index.npy");
  if (x.document_.shape().size() != 1 || x.shuffle_.shape().size() != 1)
    usage_error("{}-document_index.npy / -shuffle_index.npy: must be 1-D", path_base);
  if (x.sample_.shape().size() != 2 || x.sample_.shape()[1] != 2)
    usage_error("{}: must have shape (samples + 1, 2)", x.sample_.path());
  if (x.shuffle_.size() > x.sample_.shape()[0] - 1)
    usage_error("{}: {} samples, but the sample index has {}", x.shuffle_.path(), x.shuffle_.size(),
                x.sample_.shape()[0] - 1);
  return x;
}

template <class Piece>
std::string MegatronGptIndices::span_of(const IndexedDataset& ds, int64_t j, int64_t extra, int64_t want, int64_t* got,
                                        const Piece& piece) const {
  const int64_t b = sample_.at(2 * j), b_off = sample_.at(2 * j + 1);
  const int64_t e = sample_.at(2 * j + 2), e_off = sample_.at(2 * j + 3);
  if (b < 0 || e < b || e >= document_.size())
    return fmt::format("{}: rows {} and {} point outside the document index", sample_.path(), j, j + 1);
  *got = 0;
  for (int64_t k = b; k <= e; ++k) {
    const int64_t seq = document_.at(k);
    if (seq < 0 || seq >= ds.num_sequences())
      return fmt::format("{}: item {} is sequence {}, outside {}", document_.path(), k, seq, ds.prefix());
    const int64_t offset = k == b ? b_off : 0;
    const int64_t length = (k == e ? e_off + extra : ds.sequence_length(seq)) - offset;
    if (offset < 0 || length < 0 || offset + length > ds.sequence_length(seq) || *got + length > want)
      return fmt::format("{}: sample {} reads past sequence {} of {}", sample_.path(), j, seq, ds.prefix());
    piece(seq, offset, length);
    *got += length;
  }
  return {};
}

namespace {
std::string short_sample(const NpyArray& sample_index, int64_t j, int64_t got, int64_t want, const IndexedDataset& ds) {
  return fmt::format("{}: sample {} holds {} of its {} tokens: the index files were built for another version of {} "
                     "(rewritten since?); remove them to build them again",
                     sample_index.path(), j, got, want, ds.prefix());
}
}  // namespace

std::string MegatronGptIndices::misfit(const IndexedDataset& ds, int seq_len, bool add_extra_token,
                                       bool partial_last) const {
  const int64_t extra = add_extra_token ? 1 : 0, want = seq_len + extra, rows = sample_.shape()[0];
  for (int64_t j = 0; j + 1 < rows; ++j) {
    int64_t got = 0;
    std::string why = span_of(ds, j, extra, want, &got, [](int64_t, int64_t, int64_t) {});
    if (!why.empty()) return why;
    if (got < want && !(partial_last && j + 2 == rows)) return short_sample(sample_, j, got, want, ds);
  }
  return {};
}

void MegatronGptIndices::read_sample(const IndexedDataset& ds, int64_t i, int seq_len, bool add_extra_token,
                                     int32_t* out, bool partial_last) const {
  PTDP_CHECK(i >= 0 && i < num_samples(), "sample {} of {}", i, num_samples());
  const int64_t extra = add_extra_token ? 1 : 0;
  const int64_t want = seq_len + extra;
  const int64_t j = shuffle_.at(i);
  if (j < 0 || j + 1 >= sample_.shape()[0]) usage_error("{}: item {} is {}, outside the sample index", shuffle_.path(), i, j);
  int64_t got = 0;
  const std::string why = span_of(ds, j, extra, want, &got, [&](int64_t seq, int64_t offset, int64_t length) {
    ds.read_tokens(ds.sequence_offset(seq) + offset, length, out + got);
  });
  if (!why.empty()) throw UsageError(why);
  if (got < want && !(partial_last && j + 2 == sample_.shape()[0]))
    throw UsageError(short_sample(sample_, j, got, want, ds));
  std::fill(out + got, out + want, 0);
}

}  // namespace ptdp
