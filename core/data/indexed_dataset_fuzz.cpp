// libFuzzer target: IndexedDataset::open on a .idx and a .bin written from the input, then
// every accessor, check_vocab and DatasetSamples on what opened. Input layout:
//   u32 little-endian n | n bytes of PREFIX.idx | the rest: PREFIX.bin
// (n is taken modulo the bytes that follow, so every input splits somewhere). Expected:
// ptdp::UsageError, one line naming the files, for a malformed pair; anything else (a crash, a
// sanitizer report, another exception, an opened dataset whose accessors fail) is a finding.
// Build and run: scripts/fuzz.sh (docs/ROBUSTNESS.md); seeds in fuzz/indexed_dataset_fuzz/.
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/common/error.h"
#include "core/data/indexed_dataset.h"
#include "core/data/samples.h"
#include "fuzz/fuzz_util.h"

using ptdp::fuzz::finding;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size_t n = 0;
  if (size >= 4) {
    uint32_t len;
    std::memcpy(&len, data, 4);
    n = len % (size - 4 + 1);
    data += 4;
    size -= 4;
  } else {
    n = size;
  }
  const std::string prefix = ptdp::fuzz::scratch_path("ds");
  ptdp::fuzz::write_scratch(prefix + ".idx", data, n);
  ptdp::fuzz::write_scratch(prefix + ".bin", data + n, size - n);

  ptdp::IndexedDataset* opened = nullptr;
  try {
    static thread_local std::vector<int32_t> tokens;
    ptdp::IndexedDataset ds = ptdp::IndexedDataset::open(prefix);
    opened = &ds;
    // What open() accepted must be readable without an error.
    const int64_t seqs = ds.num_sequences(), docs = ds.num_documents(), total = ds.total_tokens();
    if (seqs < 0 || docs < 0 || total < 0) std::abort();
    int64_t sum = 0;
    for (int64_t i = 0; i < seqs; ++i) {
      if (ds.sequence_offset(i) != sum) std::abort();
      sum += ds.sequence_length(i);
    }
    if (sum != total) std::abort();
    for (int64_t d = 0; d <= docs; ++d) (void)ds.document_index(d);
    if (ds.document_index(0) != 0 || ds.document_index(docs) != seqs) std::abort();
    tokens.assign(static_cast<size_t>(total), 0);
    try {
      ds.read_tokens(0, total, tokens.data());  // int64 tokens outside int32: UsageError
    } catch (const ptdp::UsageError&) {
    }
    try {
      ptdp::check_vocab(ds, 256);
    } catch (const ptdp::UsageError&) {
    }
    // Training samples over what opened: a seq_len from the data, a few samples.
    const int seq_len = 1 + (size ? data[size - 1] % 16 : 0);
    try {
      ptdp::DatasetSamples samples(ds, seq_len, /*seed=*/size);
      std::vector<int32_t> out(static_cast<size_t>(seq_len) + 1);
      for (int64_t i = 0; i < 3 * samples.num_samples() && i < 64; ++i) samples.get(i, out.data());
    } catch (const ptdp::UsageError&) {
    }
  } catch (const ptdp::UsageError& e) {
    // The expected outcome of a malformed pair; an opened dataset throws none above but int64 tokens.
    if (opened) finding("UsageError after open() succeeded", e.what());
    ptdp::fuzz::check_usage_message(e.what(), prefix);
  } catch (const std::exception& e) {
    finding("unexpected exception", e.what());
  }
  return 0;
}
