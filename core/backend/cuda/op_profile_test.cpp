// PTDP_OP_PROFILE: a CUDA backend sums the GPU time of each top-level op and appends the table to
// the file when it is destroyed; two backends append to one file under its lock.
#include <gtest/gtest.h>

#ifdef PTDP_HAVE_CUDA
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <unistd.h>

#include "core/backend/cuda/cuda_backend.h"
#include "core/backend/cuda/device_info.h"
#include "core/backend/cuda/op_profile.h"
#include "core/backend/cuda/testing/op_profile_rows.h"
#include "core/backend/cuda/testing/skip_without_gpu.h"

namespace ptdp {
namespace {

namespace fs = std::filesystem;

using testing::OpProfileRow;

// op -> calls, time and how many rows named it (one per backend); the file's first line.
std::map<std::string, OpProfileRow> read_profile(const fs::path& path, std::string* header) {
  std::ifstream in(path);
  std::getline(in, *header);
  return testing::read_op_profile(path.string());
}

TEST(CudaOpProfile, SumsEachTopLevelOpAndAppendsOneRowPerOpAndBackend) {
  PTDP_SKIP_WITHOUT_GPU();
  const fs::path path = fs::temp_directory_path() / ("ptdp_op_profile_" + std::to_string(::getpid()) + ".csv");
  fs::remove(path);
  ::setenv("PTDP_OP_PROFILE", path.c_str(), 1);
  for (int backend = 0; backend < 2; ++backend) {
    auto gpu = make_cuda_backend(0);
    Tensor x = gpu->empty({64, 32}, DType::F32), w = gpu->empty({48, 32}, DType::F32);
    Tensor y = gpu->empty({64, 48}, DType::F32);
    gpu->fill(x, 0.5);
    gpu->fill(w, 0.25);
    for (int i = 0; i < 3; ++i) gpu->linear_forward(y, x, w, nullptr);
    EXPECT_NEAR(gpu->sum(y), 64.0 * 48 * 32 * 0.125, 1e-6);
  }
  ::unsetenv("PTDP_OP_PROFILE");
  std::string header;
  const auto ops = read_profile(path, &header);
  fs::remove(path);
  EXPECT_EQ(header, "device,op,calls,total_ms,gflop,gbyte");
  ASSERT_EQ(ops.count("linear_forward"), 1u);
  const OpProfileRow& lin = ops.at("linear_forward");
  EXPECT_EQ(lin.calls, 6);
  EXPECT_EQ(lin.rows, 2);
  EXPECT_GE(lin.ms, 0.0);
  // 2 n in out FLOPs a call; x, w read and y written once, f32.
  EXPECT_NEAR(lin.gflop, 6 * 2.0 * 64 * 32 * 48 / 1e9, 1e-9);
  EXPECT_NEAR(lin.gbyte, 6 * 4.0 * (64 * 32 + 48 * 32 + 64 * 48) / 1e9, 1e-9);
  EXPECT_EQ(ops.at("fill").calls, 4);
  EXPECT_NEAR(ops.at("fill").gbyte, 2 * 4.0 * (64 * 32 + 48 * 32) / 1e9, 1e-9);
  EXPECT_EQ(ops.at("sum").calls, 2);
  EXPECT_EQ(ops.size(), 3u);  // nothing else ran
}

TEST(CudaOpProfile, NestedScopesCountOnlyTheOutermostOp) {
  PTDP_SKIP_WITHOUT_GPU();
  auto gpu = make_cuda_backend(0);
  const fs::path path = fs::temp_directory_path() / ("ptdp_op_nested_" + std::to_string(::getpid()) + ".csv");
  {
    cuda::OpProfile prof(path.string(), 0);
    {
      cuda::OpScope outer(&prof, "outer", cuda_stream(*gpu));
      cuda::OpScope inner(&prof, "inner", cuda_stream(*gpu));
    }
    { cuda::OpScope again(&prof, "inner", cuda_stream(*gpu)); }
    const auto& t = prof.totals();
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t.at("outer").calls, 1);
    EXPECT_EQ(t.at("inner").calls, 1);
  }
  EXPECT_TRUE(fs::exists(path));
  fs::remove(path);
}

TEST(CudaOpProfile, RestartForgetsWhatCameBefore) {
  PTDP_SKIP_WITHOUT_GPU();
  const fs::path path = fs::temp_directory_path() / ("ptdp_op_restart_" + std::to_string(::getpid()) + ".csv");
  fs::remove(path);
  ::setenv("PTDP_OP_PROFILE", path.c_str(), 1);
  {
    auto gpu = make_cuda_backend(0);
    Tensor x = gpu->empty({16}, DType::F32);
    gpu->fill(x, 1.0);
    gpu->scale_(x, 2.0);
    gpu->profile_restart();  // the warm-up ends
    gpu->scale_(x, 2.0);
  }
  ::unsetenv("PTDP_OP_PROFILE");
  std::string header;
  const auto ops = read_profile(path, &header);
  fs::remove(path);
  EXPECT_EQ(ops.count("fill"), 0u);
  ASSERT_EQ(ops.count("scale_"), 1u);
  EXPECT_EQ(ops.at("scale_").calls, 1);
}

TEST(CudaOpProfile, NoFileWithoutTheVariable) {
  ::unsetenv("PTDP_OP_PROFILE");
  EXPECT_EQ(cuda::OpProfile::from_env(0), nullptr);
}

}  // namespace
}  // namespace ptdp
#endif
