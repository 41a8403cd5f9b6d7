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

AttentionPlan configure_attention(Backend& be, AttentionBackend requested, int context_parallel,
                                  const AttentionShape& shape) {
  AttentionPlan plan;
  plan.kernels = resolve_attention_backend(be, requested);
  if (requested == AttentionBackend::Auto && plan.kernels == AttentionBackend::Cudnn && context_parallel <= 1) {
    const std::string why = be.cudnn_attention_refusal(shape.b, shape.s, shape.a, shape.g, shape.hd, shape.dt);
    if (!why.empty()) {
      plan.kernels = AttentionBackend::Unfused;
      plan.note = "--attention-backend auto: " + why + "; the unfused attention runs";
    }
  }
  be.set_cudnn_attention(plan.kernels == AttentionBackend::Cudnn);
  plan.blocks = context_parallel > 1 || plan.kernels != AttentionBackend::Unfused;
  return plan;
}

}  // namespace ptdp
