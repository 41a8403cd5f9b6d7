// Which attention kernels a run uses (--attention-backend, Megatron-core's flag): auto resolved
// per backend and device, and the refusal of a choice the backend cannot run.
#pragma once
#include <cstdint>
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

// cuDNN's deterministic backward on Hopper forms dQ from a dP workspace of b*a*sq*sk*2 bytes (the
// lengths rounded up to 64: its front end's formula). ptdp bounds it: a block that needs more than
// kCudnnBackwardWorkspaceCap runs its backward as calls over consecutive key/value groups (each
// head's gradients are its own; a group's key and value gradients sum over its query heads, all in
// one call). At s = 2048 the GPU session's shapes need 0.5 GB and run in one call; at s = 8192 a
// LLaMA-3 8B layer's 32 heads would need 4.3 GB and run in four calls of 1 GiB.
inline constexpr int64_t kCudnnBackwardWorkspaceCap = int64_t(1) << 30;
inline int64_t cudnn_dp_workspace_bytes(int64_t b, int64_t a, int64_t sq, int64_t sk) {
  auto up = [](int64_t n) { return (n + 63) / 64 * 64; };
  return b * a * up(sq) * up(sk) * 2;
}
// The groups each backward call covers: the most (a divisor of g) whose workspace fits cap, else one.
inline int cudnn_backward_groups(int b, int sq, int sk, int a, int g, int64_t cap = kCudnnBackwardWorkspaceCap) {
  int gc = g;
  while (gc > 1 && cudnn_dp_workspace_bytes(b, int64_t(a) / g * gc, sq, sk) > cap) {
    do --gc;
    while (g % gc != 0);
  }
  return gc;
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
