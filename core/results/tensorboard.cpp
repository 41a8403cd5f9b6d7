#include "core/results/tensorboard.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/common/error.h"

namespace ptdp {

namespace {

// CRC-32C by table (reflected polynomial 0x82F63B78). None of the build's dependencies has it on
// every machine that builds ptdp (Boost's header is absent from the GPU machines).
const std::array<uint32_t, 256>& crc32c_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protocol-buffer wire format: varints, keys, fixed-width little-endian numbers.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char(uint8_t(v) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}
template <class T>
void put_fixed(std::string& out, T v) {
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);  // x86-64 and aarch64 are little-endian, as the wire format
  out.append(b, sizeof v);
}
void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_varint(out, uint64_t(field) << 3 | 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event {wall_time = 1 (double), step = 2 (int64)} and then `rest` (its other fields, encoded).
std::string event(int64_t step, const std::string& rest) {
  std::string e;
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  put_varint(e, 1 << 3 | 1);
  put_fixed(e, now);
  if (step != 0) {
    put_varint(e, 2 << 3 | 0);
    put_varint(e, uint64_t(step));
  }
  return e + rest;
}

std::string host_name() {
  char h[256] = {};
  if (::gethostname(h, sizeof h - 1) != 0) return "localhost";
  return h;
}

}  // namespace

uint32_t crc32c(std::string_view data) {
  const auto& t = crc32c_table();
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : data) c = t[(c ^ b) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(std::string_view data) {
  const uint32_t c = crc32c(data);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, const std::string& flag) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) usage_error("{} {}: cannot create the directory: {}", flag, dir, ec.message());
  static std::atomic<int> uid{0};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  path_ = (std::filesystem::path(dir) / fmt::format("events.out.tfevents.{:010d}.{}.{}.{}",
                                                    std::chrono::duration_cast<std::chrono::seconds>(now).count(),
                                                    host_name(), ::getpid(), uid++))
              .string();
  f_ = std::fopen(path_.c_str(), "wbx");  // a new file: never one already there
  if (f_ == nullptr) usage_error("{} {}: cannot create {}: {}", flag, dir, path_, std::strerror(errno));
  std::string version;
  put_bytes(version, 3, "brain.Event:2");  // Event.file_version
  write_event(event(0, version));
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (f_) std::fclose(f_);
}

void TensorBoardWriter::add_scalar(std::string_view tag, double value, int64_t step) {
  std::string v;  // Summary.Value {tag = 1, simple_value = 2 (float)}
  put_bytes(v, 1, tag);
  put_varint(v, 2 << 3 | 5);
  put_fixed(v, float(value));
  std::string summary;  // Summary {value = 1}
  put_bytes(summary, 1, v);
  std::string rest;  // Event.summary = 5
  put_bytes(rest, 5, summary);
  write_event(event(step, rest));
}

void TensorBoardWriter::write_event(const std::string& e) {
  std::string record;
  put_fixed(record, uint64_t(e.size()));
  put_fixed(record, masked_crc32c(record));
  record += e;
  put_fixed(record, masked_crc32c(e));
  if (std::fwrite(record.data(), 1, record.size(), f_) != record.size())
    throw std::runtime_error(fmt::format("writing {}: {}", path_, std::strerror(errno)));
}

void TensorBoardWriter::flush() {
  if (std::fflush(f_) != 0) throw std::runtime_error(fmt::format("writing {}: {}", path_, std::strerror(errno)));
}

}  // namespace ptdp
