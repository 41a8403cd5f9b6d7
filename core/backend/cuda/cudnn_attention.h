// cuDNN's fused flash attention (--attention-backend cudnn) for the CUDA backend's block attention
// ops: the sdpa and sdpa_backward graphs of cuDNN's C++ front end (header-only, fetched by
// scripts/cudnn_frontend.sh), built once per block shape and run on the backend's stream. ptdp does
// not link cuDNN: libcudnn.so.9 is loaded on first use (PTDP_CUDNN_LIBRARY names another file), so
// a machine without cuDNN runs everything else and is told why cudnn is refused. Without the
// front end (the virtual GPU, or a build that could not fetch it) cudnn_unavailable() says so.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/backend/attention_choice.h"
#include "core/tensor/dtype.h"

namespace ptdp::cuda {

// Why cuDNN's fused attention cannot run in this process (no front end in this build, libcudnn not
// loadable, a cuDNN older than 9), empty when it can. Loads libcudnn once, on the first call.
const std::string& cudnn_unavailable();
// The loaded cuDNN's version (91500 for 9.15.0), 0 when none.
int64_t cudnn_version();
// That version as text: "9.15.0".
inline std::string cudnn_version_text() {
  const int64_t v = cudnn_version();
  return std::to_string(v / 10000) + '.' + std::to_string(v / 100 % 100) + '.' + std::to_string(v % 100);
}

// One block of Backend::flash_attention_forward's layout: q [b*sq, a*hd], k and v [b*sk, g*hd],
// lse [b, a, sq] f32, causal with the query and key tokens at the same positions.
struct CudnnBlock {
  int b = 0, sq = 0, sk = 0, a = 0, g = 0, hd = 0;
  bool causal = false;
  DType dt = DType::BF16;
  // A run of consecutive key/value groups of a wider block: the heads of the rows its tensors lie in
  // (q [b*sq, a_rows*hd], k [b*sk, g_rows*hd], lse [b, a_rows, sq]); 0: a and g themselves.
  int a_rows = 0, g_rows = 0;
  int row_a() const { return a_rows > 0 ? a_rows : a; }
  int row_g() const { return g_rows > 0 ? g_rows : g; }
};

// The blocks cuDNN's fused attention is asked for: f16 or bf16, hd a multiple of 8 up to 256, a/g
// whole, causal only on the diagonal (sq = sk). Others run ptdp's flash kernel.
inline bool cudnn_shape_ok(const CudnnBlock& k) {
  return cudnn_takes_heads(k.dt, k.hd) && k.b > 0 && k.sq > 0 && k.sk > 0 && k.g > 0 && k.a % k.g == 0 &&
         (!k.causal || k.sq == k.sk);
}

// A block of Backend::flash_attention_forward's arguments as the one cuDNN is asked for, if it is
// one: causal on the diagonal (the same positions), or every key visible to every query (then
// without the mask), and cudnn_shape_ok. Otherwise none: ptdp's flash kernel runs it.
inline std::optional<CudnnBlock> cudnn_block_of(int b, int sq, int sk, int a, int g, int hd, int64_t q_pos,
                                                int64_t k_pos, bool causal, DType dt) {
  const bool all_visible = k_pos + sk - 1 <= q_pos;
  if (causal && !all_visible && !(q_pos == k_pos && sq == sk)) return std::nullopt;
  const CudnnBlock blk{b, sq, sk, a, g, hd, causal && !all_visible, dt};
  if (!cudnn_shape_ok(blk)) return std::nullopt;
  return blk;
}

// The front end's own checks of both graphs of a block for a GPU of compute capability sm (90:
// Hopper), without one at hand: empty when they pass, else the reason (needs libcudnn, no GPU).
std::string cudnn_validate(const CudnnBlock& blk, int sm);

// The graphs of one backend (one cuDNN handle on its stream), cached per block shape.
class CudnnAttention {
 public:
  explicit CudnnAttention(cudaStream_t stream);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Whether cuDNN runs this block: cudnn_shape_ok and both graphs built (the first call per shape
  // builds them; a shape cuDNN refuses is remembered with the reason, see refused()).
  bool takes(const CudnnBlock& blk);
  // Why cuDNN does not run blk (not cudnn_shape_ok, or its graphs do not build here), empty when it
  // does; builds them as takes() does, without telling stderr (the caller says what runs instead).
  std::string refusal(const CudnnBlock& blk);
  // Bytes of workspace forward and backward need (after takes()).
  int64_t forward_workspace(const CudnnBlock& blk);
  int64_t backward_workspace(const CudnnBlock& blk);
  // How many calls backward makes for blk (cudnn_backward_groups; PTDP_CUDNN_BACKWARD_WORKSPACE=BYTES
  // in the environment when the CudnnAttention is made sets another bound than kCudnnBackwardWorkspaceCap).
  int backward_calls(const CudnnBlock& blk);
  // y and lse overwritten (lse: the natural log-sum-exp of each row's scaled scores).
  void forward(const CudnnBlock& blk, void* y, float* lse, const void* q, const void* k, const void* v,
               void* workspace);
  // dq, dk and dv overwritten (not accumulated) from the final y and lse; in backward_calls(blk)
  // calls, each over consecutive key/value groups, with one workspace of backward_workspace(blk).
  void backward(const CudnnBlock& blk, void* dq, void* dk, void* dv, const void* dy, const void* q, const void* k,
                const void* v, const void* y, const float* lse, void* workspace);
  // "shape: reason" for each block shape cuDNN refused (ptdp's kernel ran those; each also said once
  // on stderr).
  std::vector<std::string> refused() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace ptdp::cuda
