#include "core/backend/attention_choice.h"

#include "core/backend/backend.h"
#include "core/common/error.h"

namespace ptdp {

AttentionBackend resolve_attention_backend(const Backend& be, AttentionBackend requested) {
  switch (requested) {
    case AttentionBackend::Auto:
      // flash is not chosen by auto: without tensor cores it is expected to be slower than the
      // unfused path's cuBLASLt GEMMs (docs/CUDA.md), and no GPU has measured it yet.
      return be.cudnn_attention_unavailable().empty() ? AttentionBackend::Cudnn : AttentionBackend::Unfused;
    case AttentionBackend::Cudnn: {
      const std::string why = be.cudnn_attention_unavailable();
      if (!why.empty()) throw UsageError("--attention-backend cudnn: " + why);
      return requested;
    }
    case AttentionBackend::Flash:
    case AttentionBackend::Unfused: return requested;
  }
  return requested;
}

bool use_block_attention(const Backend& be, AttentionBackend requested, int context_parallel) {
  return context_parallel > 1 || resolve_attention_backend(be, requested) != AttentionBackend::Unfused;
}

bool configure_attention(Backend& be, AttentionBackend requested, int context_parallel) {
  be.set_cudnn_attention(resolve_attention_backend(be, requested) == AttentionBackend::Cudnn);
  return use_block_attention(be, requested, context_parallel);
}

}  // namespace ptdp
