// Which attention kernels a run uses (--attention-backend, Megatron-core's flag): auto resolved
// per backend and device, and the refusal of a choice the backend cannot run.
#pragma once
#include <string>

#include "core/tensor/dtype.h"

namespace ptdp {

class Backend;

// auto picks the fastest the backend has; cudnn (cuDNN's fused attention), flash (ptdp's tiled
// kernel: online softmax, no [s, s] probabilities), unfused (the probabilities materialised: what
// Megatron-LM of 2021 ran).
enum class AttentionBackend { Auto, Cudnn, Flash, Unfused };

// The heads cuDNN's fused attention is asked for (cuda::cudnn_shape_ok; the performance model's
// refusal of the rest): f16 or bf16, hd a multiple of 8 up to 256.
inline bool cudnn_takes_heads(DType dt, int hd) {
  return (dt == DType::BF16 || dt == DType::F16) && hd > 0 && hd % 8 == 0 && hd <= 256;
}

// The kernels `requested` means on `be`: auto is cudnn where cuDNN's fused attention runs on the
// backend's device, else unfused (flash only when asked: it has no tensor cores yet). A request for
// cudnn that the backend cannot run is a UsageError naming --attention-backend and the reason.
AttentionBackend resolve_attention_backend(const Backend& be, AttentionBackend requested);

// cudnn (resolved) runs cuDNN's fused attention inside the block ops (Backend::set_cudnn_attention).
// Whether the layers compute attention with the block ops (flash_attention_forward/backward on
// q, k, v split from the fused projection) rather than attention_forward/backward: every choice
// but unfused, once resolved, and always with context parallelism (context_parallel > 1: the ring
// is made of blocks; validate_run refuses --attention-backend unfused there).
bool use_block_attention(const Backend& be, AttentionBackend requested, int context_parallel = 1);

// One rank's attention in a run: b sequences of s tokens, a query heads and g key/value heads of hd
// (after the tensor-parallel split), in dt.
struct AttentionShape {
  int b = 0, s = 0, a = 0, g = 0, hd = 0;
  DType dt = DType::BF16;
};

// What a run computes attention with.
struct AttentionPlan {
  AttentionBackend kernels = AttentionBackend::Unfused;  // resolved: cudnn, flash or unfused
  bool blocks = false;  // the layers call the block ops (use_block_attention)
  std::string note;     // why auto passed over an available cuDNN (empty otherwise)
};

// Resolves `requested` for a run of `shape` and switches be's cuDNN attention on for cudnn (off
// otherwise). auto takes cudnn only where cuDNN also runs the run's own block (f16 or bf16 heads it
// takes, and graphs that build on this device: Backend::cudnn_attention_refusal), else unfused, with
// the reason in note: ptdp's flash kernel, which runs the blocks cuDNN refuses, has no tensor cores.
// With context parallelism (context_parallel > 1) the ring's blocks are not probed: the ones cuDNN
// refuses run ptdp's kernel, as with an explicit cudnn.
AttentionPlan configure_attention(Backend& be, AttentionBackend requested, int context_parallel,
                                  const AttentionShape& shape);

}  // namespace ptdp
