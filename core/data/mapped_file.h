// A read-only memory map of a whole file (POSIX open/mmap), unmapped in the destructor.
// Movable, not copyable. An empty file maps to an empty span. If another process truncates the
// file while it is mapped, a read past the new end ends the process with exit code 2 and the line
// "ptdp: error: PATH: the file became shorter while it was being read ..." (a SIGBUS handler for
// the mapped ranges) instead of dying by SIGBUS.
#pragma once
#include <cstddef>
#include <span>
#include <string>

namespace ptdp {

class MappedFile {
 public:
  MappedFile() = default;
  // Throws UsageError "PATH: cannot open: REASON" when the file cannot be opened or is not
  // a regular file; RuntimeError when mmap itself fails.
  static MappedFile open(const std::string& path);

  MappedFile(MappedFile&& o) noexcept;
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();
  std::string path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ptdp
