#include "core/data/numpy_random.h"

#include <numeric>

#include "core/common/error.h"

namespace ptdp {
namespace {
constexpr int kN = 624, kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfu, kUpper = 0x80000000u, kLower = 0x7fffffffu;
}  // namespace

NumpyRandomState::NumpyRandomState(uint64_t seed, const char* what) {
  if (seed > 0xffffffffull) usage_error("{} {}: NumPy's RandomState needs a seed in [0, 2^32)", what, seed);
  uint32_t s = static_cast<uint32_t>(seed);
  for (int i = 0; i < kN; ++i) {
    key_[i] = s;
    s = 1812433253u * (s ^ (s >> 30)) + static_cast<uint32_t>(i + 1);
  }
  pos_ = kN;
}

void NumpyRandomState::regenerate() {
  int i = 0;
  for (; i < kN - kM; ++i) {
    const uint32_t y = (key_[i] & kUpper) | (key_[i + 1] & kLower);
    key_[i] = key_[i + kM] ^ (y >> 1) ^ ((0u - (y & 1u)) & kMatrixA);
  }
  for (; i < kN - 1; ++i) {
    const uint32_t y = (key_[i] & kUpper) | (key_[i + 1] & kLower);
    key_[i] = key_[i + kM - kN] ^ (y >> 1) ^ ((0u - (y & 1u)) & kMatrixA);
  }
  const uint32_t y = (key_[kN - 1] & kUpper) | (key_[0] & kLower);
  key_[kN - 1] = key_[kM - 1] ^ (y >> 1) ^ ((0u - (y & 1u)) & kMatrixA);
  pos_ = 0;
}

uint32_t NumpyRandomState::next_uint32() {
  if (pos_ == kN) regenerate();
  uint32_t y = key_[pos_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  return y ^ (y >> 18);
}

uint64_t NumpyRandomState::next_uint64() {
  const uint64_t high = next_uint32();
  return high << 32 | next_uint32();
}

uint64_t NumpyRandomState::interval(uint64_t max) {
  if (max == 0) return 0;
  uint64_t mask = max;
  for (int shift = 1; shift <= 32; shift *= 2) mask |= mask >> shift;
  uint64_t value;
  if (max <= 0xffffffffull) {
    do value = next_uint32() & mask; while (value > max);
  } else {
    do value = next_uint64() & mask; while (value > max);
  }
  return value;
}

std::vector<int64_t> NumpyRandomState::permutation(int64_t n) {
  PTDP_CHECK(n >= 0, "permutation of {}", n);
  std::vector<int64_t> out(static_cast<size_t>(n));
  std::iota(out.begin(), out.end(), int64_t{0});
  shuffle(std::span(out));
  return out;
}

}  // namespace ptdp
