#include "core/data/npy_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "core/common/error.h"
#include "core/common/temporary_files.h"

namespace ptdp {
namespace {

constexpr char kMagic[] = "\x93NUMPY";  // then version 1.0, u16 header length
constexpr size_t kPrefix = 10;

const char* descr(NpyType t) {
  switch (t) {
    case NpyType::I16: return "<i2";
    case NpyType::I32: return "<i4";
    case NpyType::U32: return "<u4";
    case NpyType::I64: return "<i8";
  }
  return "";
}

int64_t items(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

std::string unique_temporary(const std::string& path) { return temporary_path(path); }

size_t npy_item_size(NpyType t) {
  switch (t) {
    case NpyType::I16: return 2;
    case NpyType::I32: case NpyType::U32: return 4;
    case NpyType::I64: return 8;
  }
  return 0;
}

std::string npy_header(NpyType type, const std::vector<int64_t>& shape) {
  PTDP_CHECK(shape.size() == 1 || shape.size() == 2, "npy arrays of 1 or 2 dimensions");
  std::string dims = shape.size() == 1 ? fmt::format("({},)", shape[0]) : fmt::format("({}, {})", shape[0], shape[1]);
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", descr(type), dims);
  // numpy leaves room for the first axis to grow to 21 digits, then pads to 64 bytes.
  dict.append(21 - std::to_string(shape[0]).size(), ' ');
  const size_t hlen = dict.size() + 1;
  const size_t pad = 64 - (kPrefix + hlen) % 64;
  dict.append(pad, ' ');
  dict.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(dict.size() & 0xff));
  out.push_back(static_cast<char>(dict.size() >> 8));
  return out + dict;
}

NpyWriter::NpyWriter(std::string path, NpyType type, std::vector<int64_t> shape)
    : path_(std::move(path)), tmp_(unique_temporary(path_)), type_(type), shape_(std::move(shape)) {
  const std::string header = npy_header(type_, shape_);
  header_bytes_ = header.size();
  total_bytes_ = header_bytes_ + static_cast<size_t>(items(shape_)) * npy_item_size(type_);
  const int fd = ::open(tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) usage_error("{}: cannot create: {}", tmp_, std::strerror(errno));
  // The blocks are reserved before the file is written through a memory map: a full disk or a
  // file size limit is then this error, not SIGBUS at the first page that finds no block.
  if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(total_bytes_)); err != 0) {
    ::close(fd);
    ::unlink(tmp_.c_str());
    throw RuntimeError(fmt::format("{}: cannot write {} bytes: {}", path_, total_bytes_, std::strerror(err)));
  }
  void* p = ::mmap(nullptr, total_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    ::unlink(tmp_.c_str());
    throw RuntimeError(fmt::format("{}: mmap failed: {}", tmp_, std::strerror(err)));
  }
  base_ = static_cast<std::byte*>(p);
  std::memcpy(base_, header.data(), header.size());
}

NpyWriter::~NpyWriter() {
  if (base_ == nullptr) return;
  ::munmap(base_, total_bytes_);
  ::unlink(tmp_.c_str());
}

int64_t NpyWriter::size() const { return items(shape_); }

void NpyWriter::release_resident() {
  // Dirty pages of a shared file mapping are kept in the page cache and written back.
  ::madvise(base_, total_bytes_, MADV_DONTNEED);
}

void NpyWriter::finish() {
  PTDP_CHECK(base_ != nullptr, "finish() once");
  if (::msync(base_, total_bytes_, MS_SYNC) != 0)
    throw RuntimeError(fmt::format("{}: msync failed: {}", tmp_, std::strerror(errno)));
  ::munmap(base_, total_bytes_);
  base_ = nullptr;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    usage_error("{}: cannot rename into place: {}", path_, std::strerror(err));
  }
}

NpyArray NpyArray::open(const std::string& path) {
  NpyArray a;
  a.file_ = MappedFile::open(path);
  const auto bytes = a.file_.bytes();
  const char* p = reinterpret_cast<const char*>(bytes.data());
  if (bytes.size() < kPrefix || std::memcmp(p, kMagic, 6) != 0)
    usage_error("{}: not a NumPy .npy file (no \\x93NUMPY magic)", path);
  const int major = static_cast<uint8_t>(p[6]);
  size_t hlen = 0, at = 0;
  if (major == 1) {
    hlen = static_cast<uint8_t>(p[8]) | size_t{static_cast<uint8_t>(p[9])} << 8;
    at = 10;
  } else if ((major == 2 || major == 3) && bytes.size() >= 12) {
    for (int i = 0; i < 4; ++i) hlen |= size_t{static_cast<uint8_t>(p[8 + i])} << (8 * i);
    at = 12;
  } else {
    usage_error("{}: .npy format version {} is not 1, 2 or 3", path, major);
  }
  if (bytes.size() < at + hlen) usage_error("{}: .npy header runs past the end of the file", path);
  const std::string header(p + at, hlen);
  // The header NumPy writes: {'descr': '<i4', 'fortran_order': False, 'shape': (N,), } or
  // (N, M), padded with spaces and a newline.
  size_t i = 0;
  auto lit = [&](std::string_view t) {
    if (header.compare(i, t.size(), t) != 0) return false;
    i += t.size();
    return true;
  };
  auto number = [&](int64_t* v) {
    const size_t start = i;
    *v = 0;
    while (i < header.size() && header[i] >= '0' && header[i] <= '9' && i - start < 18) *v = *v * 10 + (header[i++] - '0');
    return i > start && (i == header.size() || header[i] < '0' || header[i] > '9');
  };
  std::string d;
  bool fortran = false, ok = lit("{'descr': '");
  if (ok) {
    const size_t end = header.find('\'', i);
    ok = end != std::string::npos && end - i >= 2 && end - i <= 3;
    if (ok) d = header.substr(i, end - i), i = end;
  }
  ok = ok && lit("', 'fortran_order': ");
  if (ok) fortran = lit("True");
  ok = ok && (fortran || lit("False")) && lit(", 'shape': (");
  int64_t n0 = 0, n1 = 0;
  bool two = false;
  ok = ok && number(&n0) && lit(",");
  if (ok && lit(" ")) ok = (two = number(&n1));
  ok = ok && lit("), }") && header.find_first_not_of(" \n", i) == std::string::npos;
  if (!ok) usage_error("{}: unsupported .npy header {}", path, header);
  if (d == "<i2") a.type_ = NpyType::I16;
  else if (d == "<i4") a.type_ = NpyType::I32;
  else if (d == "<u4") a.type_ = NpyType::U32;
  else if (d == "<i8") a.type_ = NpyType::I64;
  else usage_error("{}: .npy item type {} is not int16, int32, uint32 or int64 (little-endian)", path, d);
  a.shape_.push_back(n0);
  if (two) a.shape_.push_back(n1);
  if (fortran && a.shape_.size() == 2) usage_error("{}: a Fortran-order .npy array is not supported", path);
  const size_t need = at + hlen + static_cast<size_t>(a.size()) * npy_item_size(a.type_);
  if (bytes.size() != need)
    usage_error("{}: {} bytes, but its header says {} (shape and item type)", path, bytes.size(), need);
  a.data_ = bytes.data() + at + hlen;
  return a;
}

int64_t NpyArray::size() const { return items(shape_); }

int64_t NpyArray::at(int64_t i) const {
  PTDP_CHECK(i >= 0 && i < size(), "{}: item {} of {}", path(), i, size());
  const std::byte* q = data_ + static_cast<size_t>(i) * npy_item_size(type_);
  switch (type_) {
    case NpyType::I16: { int16_t v; std::memcpy(&v, q, 2); return v; }
    case NpyType::I32: { int32_t v; std::memcpy(&v, q, 4); return v; }
    case NpyType::U32: { uint32_t v; std::memcpy(&v, q, 4); return v; }
    case NpyType::I64: { int64_t v; std::memcpy(&v, q, 8); return v; }
  }
  return 0;
}

}  // namespace ptdp
