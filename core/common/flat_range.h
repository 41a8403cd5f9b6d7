// A range [begin, end) of elements of a flat buffer (parameters, gradients).
#pragma once
#include <cstdint>

namespace ptdp {

struct FlatRange {
  int64_t begin, end;
  int64_t size() const { return end - begin; }
};

}  // namespace ptdp
