#include "core/common/rng.h"

#include <cmath>

namespace ptdp {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t hash_string(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

double uniform01(uint64_t seed, uint64_t stream, uint64_t index) {
  uint64_t x = splitmix64(splitmix64(seed ^ splitmix64(stream)) + index);
  return (static_cast<double>(x >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double normal01(uint64_t seed, uint64_t stream, uint64_t index) {
  double u1 = uniform01(seed, stream, 2 * index);
  double u2 = uniform01(seed, stream, 2 * index + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace ptdp
