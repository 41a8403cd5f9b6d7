// The cuDNN attention blocks the GPU session's attention stages run (GPT 1.3B, LLaMA-7B, LLaMA-3
// 8B's GQA, the same at s = 8192 with its backward's calls over runs of groups, Figure 7's 128 heads
// of 32), for the front end's checks of their graphs without a GPU: CudaCudnnGraphs and
// ptdp_cudnn_check.
#pragma once
#include <vector>

#include "core/backend/cuda/cudnn_attention.h"

namespace ptdp::testing {

inline std::vector<cuda::CudnnBlock> cudnn_session_blocks(DType dt) {
  return {cuda::CudnnBlock{4, 2048, 2048, 16, 16, 128, true, dt},
          cuda::CudnnBlock{2, 2048, 2048, 32, 32, 128, true, dt},
          cuda::CudnnBlock{2, 2048, 2048, 32, 8, 128, true, dt},
          cuda::CudnnBlock{1, 8192, 8192, 32, 8, 128, true, dt},
          cuda::CudnnBlock{1, 8192, 8192, 8, 2, 128, true, dt, 32, 8},  // one of its backward's calls
          cuda::CudnnBlock{1, 2048, 2048, 128, 128, 32, true, dt}};
}

}  // namespace ptdp::testing
