#include "core/backend/attention_choice.h"

#include "core/backend/backend.h"
#include "core/common/error.h"

namespace ptdp {

std::string cudnn_attention_unavailable(const Backend& be) {
  if (be.device() != Device::CUDA)
    return "the " + be.name() + " backend has no cuDNN (cuDNN's fused attention runs on the CUDA backend)";
#ifdef PTDP_VGPU
  return "the virtual GPU has no cuDNN (its tests run --attention-backend flash or unfused)";
#else
  return "this ptdp has no cuDNN attention path yet (--attention-backend flash is ptdp's own fused kernel)";
#endif
}

AttentionBackend resolve_attention_backend(const Backend& be, AttentionBackend requested) {
  switch (requested) {
    case AttentionBackend::Auto:
      if (be.device() != Device::CUDA) return AttentionBackend::Unfused;
      return cudnn_attention_unavailable(be).empty() ? AttentionBackend::Cudnn : AttentionBackend::Flash;
    case AttentionBackend::Cudnn: {
      const std::string why = cudnn_attention_unavailable(be);
      if (!why.empty()) throw UsageError("--attention-backend cudnn: " + why);
      return requested;
    }
    case AttentionBackend::Flash:
    case AttentionBackend::Unfused: return requested;
  }
  return requested;
}

bool use_block_attention(const Backend& be, AttentionBackend requested) {
  return resolve_attention_backend(be, requested) != AttentionBackend::Unfused;
}

}  // namespace ptdp
