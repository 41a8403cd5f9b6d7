// NumPy .npy files of little-endian integer arrays (1-D, or 2-D C order), byte for byte as
// numpy.save writes them (format 1.0, header padded to 64 bytes): the format of Megatron-core's
// index cache files. Written through a writable shared memory map (sequential writes, pages
// released as they are done); read through a read-only memory map.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/data/mapped_file.h"

namespace ptdp {

enum class NpyType { I16, I32, U32, I64 };
size_t npy_item_size(NpyType t);
// The header bytes numpy.save writes for an array of this type and shape.
std::string npy_header(NpyType type, const std::vector<int64_t>& shape);

// temporary_path(PATH) (core/common/temporary_files.h): PATH.ptdp-tmp.HOST.PID.N, a name no
// other writer of this process or another uses at the same time.
std::string unique_temporary(const std::string& path);

// A new .npy file of the given type and shape, zero-filled, mapped read-write. The file is
// created as unique_temporary(PATH) and renamed to PATH by finish() (atomically: writers racing
// on one PATH leave one whole file); without finish() it is removed. Its blocks are reserved
// first (posix_fallocate): a full disk or a file size limit is a RuntimeError naming PATH and
// the cause, never SIGBUS.
class NpyWriter {
 public:
  NpyWriter(std::string path, NpyType type, std::vector<int64_t> shape);
  ~NpyWriter();
  NpyWriter(const NpyWriter&) = delete;
  NpyWriter& operator=(const NpyWriter&) = delete;

  template <class T>
  T* data() { return reinterpret_cast<T*>(base_ + header_bytes_); }
  int64_t size() const;  // number of items
  NpyType type() const { return type_; }
  // Drops the pages this process has touched from its resident set (they stay in the file and
  // the page cache): what keeps streaming a huge index out in bounded process memory.
  void release_resident();
  // Flushes, unmaps and renames the file into place. Call once.
  void finish();

 private:
  std::string path_, tmp_;
  NpyType type_;
  std::vector<int64_t> shape_;
  std::byte* base_ = nullptr;
  size_t header_bytes_ = 0, total_bytes_ = 0;
};

// A .npy file mapped read-only. UsageError naming the file for anything but a little-endian
// int16/int32/uint32/int64 C-order array of 1 or 2 dimensions, or a size that disagrees.
class NpyArray {
 public:
  static NpyArray open(const std::string& path);
  NpyType type() const { return type_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t size() const;  // number of items
  // Item i (in C order) widened to int64.
  int64_t at(int64_t i) const;
  const std::string& path() const { return file_.path(); }

 private:
  MappedFile file_;
  NpyType type_ = NpyType::I32;
  std::vector<int64_t> shape_;
  const std::byte* data_ = nullptr;
};

}  // namespace ptdp
