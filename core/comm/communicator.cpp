#include "core/comm/communicator.h"

namespace ptdp {

ChunkRange chunk_range(int64_t n, int size, int rank) {
  const int64_t base = n / size, extra = n % size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

void check_collective_args(const char* call, const Tensor& in, const Tensor* out, int64_t out_numel) {
  PTDP_CHECK(in.defined(), "{}: undefined input", call);
  if (out) {
    PTDP_CHECK(out->dtype() == in.dtype(), "{}: output is {}, input {}", call, dtype_name(out->dtype()),
               dtype_name(in.dtype()));
    PTDP_CHECK(out->numel() == out_numel, "{}: output has {} elements, needs {}", call, out->numel(), out_numel);
  }
}

}  // namespace ptdp
