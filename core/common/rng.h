// Counter-based random numbers: the value at (seed, stream, index) is fixed, whatever order or
// shard asks for it, so every parallel layout initialises the same logical weights.
#pragma once
#include <cstdint>
#include <string_view>

namespace ptdp {

uint64_t splitmix64(uint64_t x);
uint64_t hash_string(std::string_view s);  // FNV-1a, 64-bit
// Uniform in (0, 1), 53-bit resolution.
double uniform01(uint64_t seed, uint64_t stream, uint64_t index);
// Standard normal by Box-Muller on two counter-based uniforms.
double normal01(uint64_t seed, uint64_t stream, uint64_t index);

}  // namespace ptdp
