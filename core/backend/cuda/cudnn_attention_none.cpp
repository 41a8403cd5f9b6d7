// cudnn_attention.h in a build without cuDNN's front end (the virtual GPU, which has no cuDNN, or a
// CUDA build whose configure found no headers from scripts/cudnn_frontend.sh): every entry says why.
#include "core/backend/cuda/cudnn_attention.h"

#include "core/common/error.h"

namespace ptdp::cuda {

const std::string& cudnn_unavailable() {
#ifdef PTDP_VGPU
  static const std::string why = "the virtual GPU has no cuDNN (its tests run --attention-backend flash or unfused)";
#else
  static const std::string why =
      "this ptdp was built without cuDNN's front end (scripts/cudnn_frontend.sh fetches its headers; then "
      "configure the build again)";
#endif
  return why;
}
int64_t cudnn_version() { return 0; }
std::string cudnn_validate(const CudnnBlock&, int) { return cudnn_unavailable(); }

struct CudnnAttention::Impl {};

CudnnAttention::CudnnAttention(cudaStream_t) { throw RuntimeError("cuDNN attention: " + cudnn_unavailable()); }
CudnnAttention::~CudnnAttention() = default;
bool CudnnAttention::takes(const CudnnBlock&) { return false; }
std::string CudnnAttention::refusal(const CudnnBlock&) { return cudnn_unavailable(); }
int64_t CudnnAttention::forward_workspace(const CudnnBlock&) { return 0; }
int64_t CudnnAttention::backward_workspace(const CudnnBlock&) { return 0; }
int CudnnAttention::backward_calls(const CudnnBlock&) { return 1; }
void CudnnAttention::forward(const CudnnBlock&, void*, float*, const void*, const void*, const void*, void*) {
  throw RuntimeError("cuDNN attention: " + cudnn_unavailable());
}
void CudnnAttention::backward(const CudnnBlock&, void*, void*, void*, const void*, const void*, const void*,
                              const void*, const void*, const float*, void*) {
  throw RuntimeError("cuDNN attention: " + cudnn_unavailable());
}
std::vector<std::string> CudnnAttention::refused() const { return {}; }

}  // namespace ptdp::cuda
