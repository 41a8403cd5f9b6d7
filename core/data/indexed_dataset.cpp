#include "core/data/indexed_dataset.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "core/common/error.h"

namespace ptdp {
namespace {

static_assert(std::endian::native == std::endian::little, "the MMIDIDX format is little-endian");

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class T>
void convert(const std::byte* src, int64_t count, int64_t first, const std::string& bin, int32_t* out) {
  for (int64_t i = 0; i < count; ++i) {
    T v = load<T>(src + i * sizeof(T));
    if constexpr (sizeof(T) > 4) {
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
        usage_error("{}: token {} at position {} does not fit in 32 bits", bin, v, first + i);
    }
    out[i] = static_cast<int32_t>(v);
  }
}

}  // namespace

IndexedDataset IndexedDataset::open(const std::string& prefix) {
  IndexedDataset ds;
  ds.prefix_ = prefix;
  ds.idx_ = MappedFile::open(ds.idx_path());
  ds.validate_index();
  ds.bin_ = MappedFile::open(ds.bin_path());
  ds.validate_bin();
  return ds;
}

void IndexedDataset::validate_index() {
  const std::string path = idx_path();
  const std::byte* p = idx_.bytes().data();
  const size_t size = idx_.size();
  if (size == 0 || std::memcmp(p, kMegatronIndexMagic, std::min<size_t>(size, 9)) != 0)
    usage_error("{}: bad magic (not a Megatron MMIDIDX index)", path);
  if (size < kMegatronIndexHeaderBytes)
    usage_error("{}: truncated: the header needs {} bytes but the file has {}", path,
                kMegatronIndexHeaderBytes, size);
  const auto version = load<uint64_t>(p + 9);
  if (version != kMegatronIndexVersion)
    usage_error("{}: version {} is not supported (expected {})", path, version, kMegatronIndexVersion);
  const auto code = load<uint8_t>(p + 17);
  const auto dtype = token_dtype_from_code(code);
  if (!dtype) usage_error("{}: unknown dtype code {}", path, code);
  if (!token_dtype_is_integer(*dtype))
    usage_error("{}: dtype code {} ({}) is not an integer token type", path, code, token_dtype_name(*dtype));
  dtype_ = *dtype;
  const auto seqs = load<uint64_t>(p + 18);
  const auto docs = load<uint64_t>(p + 26);
  // Bound the counts by the file size before multiplying, so nothing overflows.
  const uint64_t body = size - kMegatronIndexHeaderBytes;
  if (seqs > body / 12 || docs > body / 8)
    usage_error("{}: truncated: header says {} sequences and {} documents but the file has only {} bytes",
                path, seqs, docs, size);
  const uint64_t needed = kMegatronIndexHeaderBytes + 12 * seqs + 8 * docs;
  if (size < needed)
    usage_error("{}: truncated: header says {} sequences and {} documents but the file has {} bytes (needs {})",
                path, seqs, docs, size, needed);
  if (size != needed && size != needed + seqs)
    usage_error("{}: has {} bytes, expected {} for {} sequences and {} documents (trailing data)", path,
                size, needed, seqs, docs);
  if (docs == 0) usage_error("{}: document indices are empty (they must start with 0)", path);
  num_sequences_ = static_cast<int64_t>(seqs);
  num_documents_ = static_cast<int64_t>(docs) - 1;
  lengths_at_ = kMegatronIndexHeaderBytes;
  pointers_at_ = lengths_at_ + 4 * seqs;
  documents_at_ = pointers_at_ + 8 * seqs;

  const int64_t item = static_cast<int64_t>(token_dtype_size(dtype_));
  int64_t expected = 0;  // byte pointer of the next sequence
  for (int64_t i = 0; i < num_sequences_; ++i) {
    const auto len = load<int32_t>(p + lengths_at_ + 4 * i);
    if (len < 0) usage_error("{}: sequence {} has negative length {}", path, i, len);
    const auto ptr = load<int64_t>(p + pointers_at_ + 8 * i);
    if (ptr != expected)
      usage_error("{}: sequence pointers are not consecutive (sequence {} points at byte {}, expected {})",
                  path, i, ptr, expected);
    if (__builtin_add_overflow(expected, int64_t{len} * item, &expected))
      usage_error("{}: sequence lengths add up to more than 2^63 bytes", path);
  }
  total_tokens_ = expected / item;
  int64_t prev = 0;
  for (int64_t d = 0; d <= num_documents_; ++d) {
    const auto idx = load<int64_t>(p + documents_at_ + 8 * d);
    if (d == 0 && idx != 0) usage_error("{}: document indices must start with 0, found {}", path, idx);
    if (idx < prev)
      usage_error("{}: document indices are not increasing (index {} is {} after {})", path, d, idx, prev);
    prev = idx;
  }
  if (prev != num_sequences_)
    usage_error("{}: last document index is {} but the sequence count is {}", path, prev, num_sequences_);
}

void IndexedDataset::validate_bin() {
  const uint64_t needed = static_cast<uint64_t>(total_tokens_) * token_dtype_size(dtype_);
  if (bin_.size() < needed)
    usage_error("{}: truncated: index needs {} bytes, file has {}", bin_path(), needed, bin_.size());
  if (bin_.size() > needed)
    usage_error("{}: has {} bytes but the index describes {} (the .idx and .bin do not belong together)",
                bin_path(), bin_.size(), needed);
}

int64_t IndexedDataset::sequence_length(int64_t i) const {
  PTDP_CHECK(i >= 0 && i < num_sequences_, "sequence {} of {}", i, num_sequences_);
  return load<int32_t>(idx_.bytes().data() + lengths_at_ + 4 * i);
}

int64_t IndexedDataset::sequence_offset(int64_t i) const {
  PTDP_CHECK(i >= 0 && i < num_sequences_, "sequence {} of {}", i, num_sequences_);
  return load<int64_t>(idx_.bytes().data() + pointers_at_ + 8 * i) /
         static_cast<int64_t>(token_dtype_size(dtype_));
}

int64_t IndexedDataset::document_index(int64_t i) const {
  PTDP_CHECK(i >= 0 && i <= num_documents_, "document {} of {}", i, num_documents_);
  return load<int64_t>(idx_.bytes().data() + documents_at_ + 8 * i);
}

void IndexedDataset::read_tokens(int64_t offset, int64_t count, int32_t* out) const {
  PTDP_CHECK(offset >= 0 && count >= 0 && count <= total_tokens_ - offset,
             "tokens [{}, {}+{}) of {}", offset, offset, count, total_tokens_);
  if (count == 0) return;
  const std::byte* src = bin_.bytes().data() + offset * static_cast<int64_t>(token_dtype_size(dtype_));
  const std::string& bin = bin_.path();
  switch (dtype_) {
    case TokenDType::U8: return convert<uint8_t>(src, count, offset, bin, out);
    case TokenDType::I8: return convert<int8_t>(src, count, offset, bin, out);
    case TokenDType::I16: return convert<int16_t>(src, count, offset, bin, out);
    case TokenDType::U16: return convert<uint16_t>(src, count, offset, bin, out);
    case TokenDType::I32: return convert<int32_t>(src, count, offset, bin, out);
    case TokenDType::I64: return convert<int64_t>(src, count, offset, bin, out);
    default: PTDP_CHECK(false, "non-integer token dtype {}", token_dtype_name(dtype_));
  }
}

void check_vocab(const IndexedDataset& ds, int64_t vocab_size, std::string_view flag) {
  constexpr int64_t kChunk = 1 << 16;
  std::vector<int32_t> buf(static_cast<size_t>(std::min(kChunk, ds.total_tokens())));
  for (int64_t at = 0; at < ds.total_tokens(); at += kChunk) {
    const int64_t n = std::min(kChunk, ds.total_tokens() - at);
    ds.read_tokens(at, n, buf.data());
    for (int64_t i = 0; i < n; ++i) {
      if (buf[i] < 0 || buf[i] >= vocab_size)
        usage_error("{}: token {} at position {} is outside the vocabulary ({} {})", ds.bin_path(), buf[i],
                    at + i, flag, vocab_size);
    }
  }
}

}  // namespace ptdp
