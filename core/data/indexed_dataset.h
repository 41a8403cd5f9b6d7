// Reader for Megatron-LM's "MMIDIDX" indexed dataset (PREFIX.idx + PREFIX.bin), the format
// tools/preprocess_data.py writes (megatron/core/datasets/indexed_dataset.py), memory-mapped.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/data/mapped_file.h"
#include "core/data/token_dtype.h"

namespace ptdp {

// .idx layout, little-endian, no padding:
//   char[9] "MMIDIDX\0\0" | u64 version (1) | u8 dtype code (TokenDType) |
//   u64 S (sequence count) | u64 D (document count = documents + 1) |
//   i32 sequence_lengths[S] | i64 sequence_pointers[S] (byte offsets into .bin) |
//   i64 document_indices[D] (first sequence of each document; starts at 0, ends at S) |
//   optionally i8 sequence_modes[S] (multimodal datasets; ignored here).
// .bin: the tokens of all sequences back to back, sequence 0 at byte 0.
inline constexpr char kMegatronIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kMegatronIndexVersion = 1;
inline constexpr size_t kMegatronIndexHeaderBytes = 9 + 8 + 1 + 8 + 8;  // 34

class IndexedDataset {
 public:
  // Opens and validates PREFIX.idx and PREFIX.bin. Every malformed input (bad magic, version,
  // dtype, truncation, inconsistent pointers or document indices, size mismatch) is a
  // UsageError naming the file and the rule; nothing is read out of bounds.
  static IndexedDataset open(const std::string& prefix);

  IndexedDataset(IndexedDataset&&) noexcept = default;
  IndexedDataset& operator=(IndexedDataset&&) noexcept = default;
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  const std::string& prefix() const { return prefix_; }
  std::string idx_path() const { return prefix_ + ".idx"; }
  std::string bin_path() const { return prefix_ + ".bin"; }
  TokenDType dtype() const { return dtype_; }

  int64_t num_sequences() const { return num_sequences_; }
  int64_t num_documents() const { return num_documents_; }
  int64_t sequence_length(int64_t i) const;
  // Token offset of sequence i in the concatenated stream (its .bin pointer / item size).
  int64_t sequence_offset(int64_t i) const;
  // First sequence of document i, for i in [0, num_documents()]; the last one is num_sequences().
  int64_t document_index(int64_t i) const;
  int64_t total_tokens() const { return total_tokens_; }
  // The raw bytes of the i32 sequence_lengths[S] array of .idx, and of the whole files.
  std::span<const std::byte> sequence_lengths_bytes() const {
    return idx_.bytes().subspan(lengths_at_, static_cast<size_t>(num_sequences_) * 4);
  }
  std::span<const std::byte> idx_bytes() const { return idx_.bytes(); }
  std::span<const std::byte> bin_bytes() const { return bin_.bytes(); }

  // Copies tokens [offset, offset + count) of all sequences concatenated in order. The range
  // must lie inside [0, total_tokens()) (checked). An int64 token outside int32 is a UsageError.
  void read_tokens(int64_t offset, int64_t count, int32_t* out) const;

 private:
  IndexedDataset() = default;
  void validate_index();
  void validate_bin();

  std::string prefix_;
  MappedFile idx_;
  MappedFile bin_;
  TokenDType dtype_ = TokenDType::U16;
  int64_t num_sequences_ = 0;
  int64_t num_documents_ = 0;
  int64_t total_tokens_ = 0;
  size_t lengths_at_ = 0, pointers_at_ = 0, documents_at_ = 0;  // byte offsets into .idx
};

// UsageError "PREFIX.bin: token T at position P is outside the vocabulary (FLAG V)" for the
// first token < 0 or >= vocab_size.
void check_vocab(const IndexedDataset& ds, int64_t vocab_size, std::string_view flag = "--vocab-size");

}  // namespace ptdp
