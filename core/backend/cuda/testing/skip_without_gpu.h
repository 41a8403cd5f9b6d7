// PTDP_SKIP_WITHOUT_GPU(): in a test body or fixture SetUp, skips the test where no CUDA device
// can be used, with the runtime's reason ("no GPU here: ...").
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/backend/cuda/device_info.h"

#define PTDP_SKIP_WITHOUT_GPU()                                                              \
  do {                                                                                       \
    std::string ptdp_no_gpu_reason_;                                                         \
    if (::ptdp::cuda::device_count(&ptdp_no_gpu_reason_) == 0)                               \
      GTEST_SKIP() << "no GPU here: " << ptdp_no_gpu_reason_;                                \
  } while (0)
