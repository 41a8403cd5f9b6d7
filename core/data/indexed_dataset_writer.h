// Writes a Megatron-LM MMIDIDX indexed dataset (PREFIX.bin + PREFIX.idx), one sequence per
// document, atomically: temporaries in the same directory, fsync, then rename.
#pragma once
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "core/data/token_dtype.h"

namespace ptdp {

class IndexedDatasetWriter {
 public:
  // Creates the .bin temporary next to PREFIX.bin (temporary_path), after removing the
  // temporaries of PREFIX.bin/.idx that writers killed before their rename left there
  // (remove_dead_temporaries). UsageError when dtype is not an integer type or the temporary
  // cannot be created (e.g. the directory does not exist).
  IndexedDatasetWriter(std::string prefix, TokenDType dtype);
  // Without finalize(), removes the temporaries: nothing half-written is left behind.
  ~IndexedDatasetWriter();
  IndexedDatasetWriter(const IndexedDatasetWriter&) = delete;
  IndexedDatasetWriter& operator=(const IndexedDatasetWriter&) = delete;

  // Appends one document made of one sequence. A token outside the dtype's range is a
  // UsageError (and the document is not added).
  void add_document(std::span<const int32_t> tokens);
  // The same in pieces, for documents larger than memory: tokens appended to the current document
  // (checked as above), which end_document() closes.
  void append_tokens(std::span<const int32_t> tokens);
  void end_document();
  // Writes the index, fsyncs both files and renames them to PREFIX.bin then PREFIX.idx.
  // On failure the temporaries are removed and the error is rethrown. Call at most once.
  void finalize();

  int64_t num_documents() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t num_tokens() const { return tokens_; }
  // Size of .bin plus .idx, valid after finalize().
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  void discard() noexcept;
  void write_bytes(std::FILE* f, const std::string& path, const void* p, size_t n);

  std::string prefix_;
  TokenDType dtype_;
  std::string bin_tmp_, idx_tmp_;
  std::FILE* bin_ = nullptr;
  std::FILE* idx_ = nullptr;
  std::vector<int32_t> lengths_;
  std::vector<std::byte> scratch_;
  int64_t tokens_ = 0;
  int64_t open_length_ = 0;  // tokens appended to the document not yet ended
  uint64_t bytes_written_ = 0;
  bool finalized_ = false;
};

}  // namespace ptdp
