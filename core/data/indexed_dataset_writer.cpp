#include "core/data/indexed_dataset_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>

#include "core/common/error.h"
#include "core/common/temporary_files.h"
#include "core/data/indexed_dataset.h"

namespace ptdp {
namespace {

// Opens a fresh temporary_path(PATH) for writing (O_EXCL, mode 0666 & ~umask).
std::FILE* create_temp(const std::string& path, std::string* tmp_name) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    *tmp_name = temporary_path(path);
    int fd = ::open(tmp_name->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) usage_error("{}: cannot create: {}", path, std::strerror(errno));
    std::FILE* f = ::fdopen(fd, "wb");
    if (f == nullptr) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp_name->c_str());
      throw RuntimeError(fmt::format("{}: fdopen failed: {}", path, std::strerror(err)));
    }
    return f;
  }
  throw RuntimeError(fmt::format("{}: cannot find a free temporary name", path));
}

void flush_and_sync(std::FILE* f, const std::string& path) {
  if (std::fflush(f) != 0 || ::fsync(::fileno(f)) != 0)
    throw RuntimeError(fmt::format("{}: cannot flush to disk: {}", path, std::strerror(errno)));
}

void sync_directory_of(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);  // best effort: some file systems refuse fsync on directories
    ::close(fd);
  }
}

template <class T>
void pack(std::span<const int32_t> tokens, std::byte* out) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    T v = static_cast<T>(tokens[i]);
    std::memcpy(out + i * sizeof(T), &v, sizeof(T));
  }
}

}  // namespace

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDType dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
  if (!token_dtype_is_integer(dtype_))
    usage_error("{}: token dtype {} is not an integer type", prefix_, token_dtype_name(dtype_));
  // The temporaries of PREFIX.bin/.idx that a writer killed before its rename left (its process gone).
  const std::filesystem::path p(prefix_);
  const std::string name = p.filename().string();
  remove_dead_temporaries(p.parent_path().string(), [&](const std::string& target) {
    return target == name + ".bin" || target == name + ".idx";
  });
  bin_ = create_temp(prefix_ + ".bin", &bin_tmp_);
}

IndexedDatasetWriter::~IndexedDatasetWriter() {
  if (!finalized_) discard();
}

void IndexedDatasetWriter::discard() noexcept {
  if (bin_ != nullptr) std::fclose(bin_);
  if (idx_ != nullptr) std::fclose(idx_);
  bin_ = idx_ = nullptr;
  if (!bin_tmp_.empty()) ::unlink(bin_tmp_.c_str());
  if (!idx_tmp_.empty()) ::unlink(idx_tmp_.c_str());
  bin_tmp_.clear();
  idx_tmp_.clear();
}

void IndexedDatasetWriter::write_bytes(std::FILE* f, const std::string& path, const void* p, size_t n) {
  if (n > 0 && std::fwrite(p, 1, n, f) != n)
    throw RuntimeError(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
}

void IndexedDatasetWriter::add_document(std::span<const int32_t> tokens) {
  PTDP_CHECK(open_length_ == 0, "add_document inside a document being appended to");
  append_tokens(tokens);
  end_document();
}

void IndexedDatasetWriter::append_tokens(std::span<const int32_t> tokens) {
  PTDP_CHECK(!finalized_ && bin_ != nullptr, "append_tokens after finalize");
  if (open_length_ + int64_t(tokens.size()) > int64_t(std::numeric_limits<int32_t>::max()))
    usage_error("{}.bin: document of {} tokens is longer than 2^31-1", prefix_, open_length_ + int64_t(tokens.size()));
  const int64_t lo = token_dtype_min(dtype_), hi = token_dtype_max(dtype_);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < lo || tokens[i] > hi)
      usage_error("{}.bin: token {} (document {}, position {}) does not fit in {}", prefix_, tokens[i],
                  lengths_.size(), open_length_ + int64_t(i), token_dtype_name(dtype_));
  }
  scratch_.resize(tokens.size() * token_dtype_size(dtype_));
  switch (dtype_) {
    case TokenDType::U8: pack<uint8_t>(tokens, scratch_.data()); break;
    case TokenDType::I8: pack<int8_t>(tokens, scratch_.data()); break;
    case TokenDType::I16: pack<int16_t>(tokens, scratch_.data()); break;
    case TokenDType::U16: pack<uint16_t>(tokens, scratch_.data()); break;
    case TokenDType::I32: pack<int32_t>(tokens, scratch_.data()); break;
    case TokenDType::I64: pack<int64_t>(tokens, scratch_.data()); break;
    default: PTDP_CHECK(false, "non-integer token dtype");
  }
  write_bytes(bin_, bin_tmp_, scratch_.data(), scratch_.size());
  open_length_ += int64_t(tokens.size());
  tokens_ += static_cast<int64_t>(tokens.size());
}

void IndexedDatasetWriter::end_document() {
  PTDP_CHECK(!finalized_ && bin_ != nullptr, "end_document after finalize");
  lengths_.push_back(static_cast<int32_t>(open_length_));
  open_length_ = 0;
}

void IndexedDatasetWriter::finalize() {
  PTDP_CHECK(!finalized_ && bin_ != nullptr, "finalize called twice");
  try {
    flush_and_sync(bin_, bin_tmp_);
    const std::string idx_path = prefix_ + ".idx";
    idx_ = create_temp(idx_path, &idx_tmp_);
    const uint64_t seqs = lengths_.size(), docs = lengths_.size() + 1, version = kMegatronIndexVersion;
    const uint8_t code = static_cast<uint8_t>(dtype_);
    write_bytes(idx_, idx_tmp_, kMegatronIndexMagic, sizeof kMegatronIndexMagic);
    write_bytes(idx_, idx_tmp_, &version, 8);
    write_bytes(idx_, idx_tmp_, &code, 1);
    write_bytes(idx_, idx_tmp_, &seqs, 8);
    write_bytes(idx_, idx_tmp_, &docs, 8);
    write_bytes(idx_, idx_tmp_, lengths_.data(), 4 * seqs);
    std::vector<int64_t> v(seqs);
    const int64_t item = static_cast<int64_t>(token_dtype_size(dtype_));
    for (int64_t i = 0, ptr = 0; i < static_cast<int64_t>(seqs); ++i) {
      v[i] = ptr;
      ptr += lengths_[i] * item;
    }
    write_bytes(idx_, idx_tmp_, v.data(), 8 * seqs);
    v.resize(docs);
    for (uint64_t d = 0; d < docs; ++d) v[d] = static_cast<int64_t>(d);  // one sequence per document
    write_bytes(idx_, idx_tmp_, v.data(), 8 * docs);
    flush_and_sync(idx_, idx_tmp_);
    bytes_written_ = static_cast<uint64_t>(tokens_ * item) + kMegatronIndexHeaderBytes + 12 * seqs + 8 * docs;
    std::fclose(bin_);
    std::fclose(idx_);
    bin_ = idx_ = nullptr;
    // .bin first: a reader that sees the new .idx also sees its .bin.
    if (std::rename(bin_tmp_.c_str(), (prefix_ + ".bin").c_str()) != 0)
      throw RuntimeError(fmt::format("{}.bin: rename failed: {}", prefix_, std::strerror(errno)));
    bin_tmp_.clear();
    if (std::rename(idx_tmp_.c_str(), idx_path.c_str()) != 0)
      throw RuntimeError(fmt::format("{}: rename failed: {}", idx_path, std::strerror(errno)));
    idx_tmp_.clear();
    sync_directory_of(idx_path);
    finalized_ = true;
  } catch (...) {
    discard();
    throw;
  }
}

}  // namespace ptdp
