// ptdp_cudnn_check: the front end's checks of the cuDNN attention graphs the GPU session runs
// (testing/cudnn_session_blocks.h), for an H100/H200 (sm_90), on a machine without a GPU: it needs
// libcudnn only. scripts/test.sh runs it after compiling the CUDA sources. Exit 0 when every graph
// passes (or, said on stdout, when libcudnn cannot be loaded here), 1 naming each that fails.
#include <fmt/format.h>

#include "core/backend/cuda/cudnn_attention.h"
#include "core/backend/cuda/testing/cudnn_session_blocks.h"

int main() {
  using namespace ptdp;
  if (const std::string& why = cuda::cudnn_unavailable(); !why.empty()) {
    fmt::print("ptdp_cudnn_check: skipped: {}\n", why);
    return 0;
  }
  int checked = 0, failed = 0;
  for (DType dt : {DType::BF16, DType::F16}) {
    for (const cuda::CudnnBlock& blk : testing::cudnn_session_blocks(dt)) {
      ++checked;
      if (const std::string why = cuda::cudnn_validate(blk, 90); !why.empty()) {
        ++failed;
        fmt::print(stderr, "ptdp_cudnn_check: b {} s {} heads {} groups {} (rows of {}/{}) hd {} {}: {}\n", blk.b,
                   blk.sq, blk.a, blk.g, blk.row_a(), blk.row_g(), blk.hd, dtype_name(blk.dt), why);
      }
    }
  }
  fmt::print("ptdp_cudnn_check: {} of {} attention graphs pass the front end's checks for sm_90 (cuDNN {})\n",
             checked - failed, checked, cuda::cudnn_version_text());
  // The checks are real: a head of 12 (not a multiple of 8) is refused.
  const bool real = !cuda::cudnn_validate(cuda::CudnnBlock{1, 64, 64, 4, 4, 12, true, DType::BF16}, 90).empty();
  if (!real) fmt::print(stderr, "ptdp_cudnn_check: a head of 12 passed the front end's checks\n");
  return failed || !real ? 1 : 0;
}
