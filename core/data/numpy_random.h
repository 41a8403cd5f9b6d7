// NumPy's legacy generator, numpy.random.RandomState(seed) for an integer seed, reproduced
// bit for bit: MT19937 seeded by init_genrand, RandomState.shuffle / permutation of a 1-D array
// (Fisher-Yates from the end, each j drawn by random_interval: the smallest all-ones mask >= i,
// draws rejected while above i; one 32-bit draw when i < 2^32, else a 64-bit draw made of two
// 32-bit draws, the first one high). Megatron-core builds its dataset indices with it.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace ptdp {

class NumpyRandomState {
 public:
  // RandomState(seed); NumPy accepts 0 <= seed < 2^32 (a UsageError naming `what` otherwise).
  explicit NumpyRandomState(uint64_t seed, const char* what = "seed");

  uint32_t next_uint32();
  uint64_t next_uint64();
  // Uniform in [0, max] by masked rejection (NumPy's random_interval).
  uint64_t interval(uint64_t max);

  // RandomState.shuffle(x) for a 1-D array x (any element type: NumPy swaps raw items).
  template <class T>
  void shuffle(std::span<T> x) {
    for (size_t i = x.size(); i-- > 1;) std::swap(x[i], x[interval(i)]);
  }
  // RandomState.permutation(n): shuffle(arange(n)).
  std::vector<int64_t> permutation(int64_t n);

 private:
  void regenerate();
  uint32_t key_[624];
  int pos_ = 624;
};

}  // namespace ptdp
