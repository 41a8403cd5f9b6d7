#include "core/comm/nccl/nccl_sharing.h"

#include <nccl.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/comm/nccl/nccl_node.h"

namespace ptdp {

namespace {
constexpr int kFirstSharingVersion = 23000;  // NCCL 2.30.0
}  // namespace

int nccl_runtime_version() {
  int v = 0;
  PTDP_NCCL_OK(ncclGetVersion(&v));
  return v;
}

bool nccl_ranks_share_gpus(std::string* why) {
  const int v = nccl_runtime_version();
  const char* env = std::getenv("NCCL_MULTI_RANK_GPU_ENABLE");
  const bool enabled = env && std::strcmp(env, "1") == 0;
  if (v >= kFirstSharingVersion && enabled) return true;
  if (why) {
    if (v < kFirstSharingVersion)
      *why = fmt::format("NCCL {} refuses two ranks on one GPU (NCCL 2.30 and later allow it with "
                         "NCCL_MULTI_RANK_GPU_ENABLE=1)",
                         nccl_version_string());
    else
      *why = fmt::format("NCCL {} lets ranks share a GPU only with NCCL_MULTI_RANK_GPU_ENABLE=1, which is {}",
                         nccl_version_string(), env ? fmt::format("'{}'", env) : std::string("not set"));
  }
  return false;
}

}  // namespace ptdp
