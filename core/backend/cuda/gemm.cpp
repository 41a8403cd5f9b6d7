#include "core/backend/cuda/gemm.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/device_guard.h"
#include "core/backend/cuda/kernels.h"
#include "core/common/error.h"

namespace ptdp::cuda {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: PTDP_CHECK(false, "GEMM operands in f32, bf16 or f16, not {}", dtype_name(t));
  }
  return CUDA_R_32F;
}

// The largest power of two (up to 256) that divides v.
int64_t pow2_dividing(uint64_t v) {
  int64_t a = 1;
  while (a < 256 && v % uint64_t(a * 2) == 0) a *= 2;
  return a;
}
int64_t alignment(const void* p) { return pow2_dividing(reinterpret_cast<uintptr_t>(p)); }

// The alignment (bytes) that every column and every batch of an operand keeps: that of its
// address, its leading dimension and its batch stride.
int64_t operand_alignment(const void* p, int64_t ld, int64_t stride, int64_t batch, DType t) {
  int64_t a = alignment(p);
  a = std::min(a, pow2_dividing(uint64_t(ld) * dtype_size(t)));
  if (batch > 1) a = std::min(a, pow2_dividing(uint64_t(stride) * dtype_size(t)));
  return a;
}

cublasLtMatrixLayout_t make_layout(DType t, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  PTDP_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, cuda_type(t), uint64_t(rows), uint64_t(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    PTDP_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    PTDP_CUBLAS_CHECK(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
  }
  return l;
}

}  // namespace

struct GemmRunner::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool has_algo = false;
  ~Plan() {
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

GemmRunner::GemmRunner(int device, cudaStream_t stream) : device_(device), stream_(stream) {
  DeviceGuard guard(device_);
  PTDP_CUBLAS_CHECK(cublasLtCreate(&lt_));
  PTDP_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
}

GemmRunner::~GemmRunner() {
  plans_.clear();
  if (blas_) cublasDestroy(blas_);
  if (lt_) cublasLtDestroy(lt_);
  if (workspace_) cudaFree(workspace_);
}

GemmRunner::Plan& GemmRunner::plan(const GemmShape& g, const Epilogue& e, const void* a, const void* b,
                                   const void* c) {
  const Key key{g.trans_a, g.trans_b, g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch, g.stride_a, g.stride_b, g.stride_c,
                int64_t(g.ab), int64_t(g.c), int64_t(e.kind), operand_alignment(a, g.lda, g.stride_a, g.batch, g.ab),
                operand_alignment(b, g.ldb, g.stride_b, g.batch, g.ab),
                operand_alignment(c, g.ldc, g.stride_c, g.batch, g.c), e.bias ? alignment(e.bias) : 0,
                e.aux ? alignment(e.aux) : 0};
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  auto p = std::make_unique<Plan>();
  PTDP_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  PTDP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  PTDP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (e.kind != CUBLASLT_EPILOGUE_DEFAULT)
    PTDP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e.kind, sizeof(e.kind)));
  // The vectors are set before the heuristic, which may pick an algorithm for their alignment;
  // later calls of this plan have vectors of the same alignment (it is part of the key).
  if (e.bias) {
    const cudaDataType_t bt = cuda_type(g.c);
    PTDP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt)));
    PTDP_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e.bias, sizeof(e.bias)));
  }
  if (e.aux) {
    const int64_t ld = g.ldc;
    PTDP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof(ld)));
    PTDP_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &e.aux, sizeof(e.aux)));
  }
  p->a = make_layout(g.ab, g.trans_a ? g.k : g.m, g.trans_a ? g.m : g.k, g.lda, g.batch, g.stride_a);
  p->b = make_layout(g.ab, g.trans_b ? g.n : g.k, g.trans_b ? g.k : g.n, g.ldb, g.batch, g.stride_b);
  p->c = make_layout(g.c, g.m, g.n, g.ldc, g.batch, g.stride_c);

  cublasLtMatmulPreference_t pref = nullptr;
  PTDP_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, cublasStatus_t (*)(cublasLtMatmulPreference_t)> own_pref(
      pref, cublasLtMatmulPreferenceDestroy);
  const uint64_t ws = kWorkspaceBytes;
  PTDP_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  const uint32_t al[4] = {uint32_t(key[15]), uint32_t(key[16]), uint32_t(key[17]), uint32_t(key[17])};
  const cublasLtMatmulPreferenceAttributes_t which[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; ++i)
    PTDP_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, which[i], &al[i], sizeof(al[i])));

  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t s =
      cublasLtMatmulAlgoGetHeuristic(lt_, p->op, p->a, p->b, p->c, p->c, pref, 1, &result, &count);
  if (s == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    p->algo = result.algo;
    p->has_algo = true;
  } else if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) {
    throw_cublas_error("cublasLtMatmulAlgoGetHeuristic", s, __FILE__, __LINE__);
  }
  return *plans_.emplace(key, std::move(p)).first->second;
}

void GemmRunner::run(const GemmShape& g, float alpha, const void* a, const void* b, float beta, void* c,
                     const void* bias) {
  PTDP_CHECK(g.m >= 0 && g.n >= 0 && g.k >= 0 && g.batch >= 1, "bad GEMM shape m={} n={} k={} batch={}", g.m, g.n,
             g.k, g.batch);
  PTDP_CHECK(!bias || (g.batch == 1 && beta == 0.0f), "a GEMM bias needs a single product with beta = 0");
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) {  // D = beta C (+ bias)
    if (beta == 1.0f && !bias) return;
    PTDP_CHECK(beta == 0.0f && g.batch == 1 && g.ldc == g.m, "GEMM with k = 0 supports beta 0 or 1 only");
    PTDP_CUDA_CHECK(cudaMemsetAsync(c, 0, size_t(g.m * g.n) * dtype_size(g.c), stream_));
    if (bias) bias_broadcast(c, bias, g.c, g.m, g.n, g.ldc, stream_);
    return;
  }
  if (bias && alignment(bias) >= 16 && run_epilogue(g, {CUBLASLT_EPILOGUE_BIAS, bias, nullptr}, alpha, a, b, c))
    return;
  if (bias) {  // y = bias, then y += x w^T
    bias_broadcast(c, bias, g.c, g.m, g.n, g.ldc, stream_);
    beta = 1.0f;
  }
  Plan& p = plan(g, {}, a, b, c);
  if (!p.has_algo) return run_fallback(g, alpha, a, b, beta, c);
  PTDP_CUBLAS_CHECK(cublasLtMatmul(lt_, p.op, &alpha, a, p.a, b, p.b, &beta, c, p.c, c, p.c, &p.algo, workspace_,
                                   kWorkspaceBytes, stream_));
}

bool GemmRunner::run_epilogue(const GemmShape& g, const Epilogue& e, float alpha, const void* a, const void* b,
                              void* c) {
  Plan& p = plan(g, e, a, b, c);
  if (!p.has_algo) return false;
  if (e.bias)
    PTDP_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &e.bias, sizeof(e.bias)));
  if (e.aux)
    PTDP_CUBLAS_CHECK(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &e.aux, sizeof(e.aux)));
  const float beta = 0.0f;
  PTDP_CUBLAS_CHECK(cublasLtMatmul(lt_, p.op, &alpha, a, p.a, b, p.b, &beta, c, p.c, c, p.c, &p.algo, workspace_,
                                   kWorkspaceBytes, stream_));
  return true;
}

// AUX_LD "must be divisible by 8"; the vectors at least 16-byte aligned (as the bias path asks).
static bool gelu_epilogue_fits(const GemmShape& g, const void* bias, const void* aux) {
  return g.batch == 1 && g.k > 0 && g.m > 0 && g.n > 0 && g.ldc % 8 == 0 && alignment(aux) >= 16 &&
         (!bias || alignment(bias) >= 16);
}

bool GemmRunner::has_gelu(const GemmShape& g, const void* a, const void* b, const void* c, const void* bias,
                          const void* aux, bool backward) {
  if (!gelu_epilogue_fits(g, bias, aux)) return false;
  const Epilogue e{backward ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, aux};
  return plan(g, e, a, b, c).has_algo;
}

bool GemmRunner::run_gelu(const GemmShape& g, const void* a, const void* b, void* c, const void* bias, void* aux) {
  if (!gelu_epilogue_fits(g, bias, aux)) return false;
  return run_epilogue(g, {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, bias, aux}, 1.0f, a, b, c);
}

bool GemmRunner::run_dgelu(const GemmShape& g, const void* a, const void* b, void* c, const void* aux) {
  if (!gelu_epilogue_fits(g, nullptr, aux)) return false;
  return run_epilogue(g, {CUBLASLT_EPILOGUE_DGELU, nullptr, aux}, 1.0f, a, b, c);
}

void GemmRunner::run_fallback(const GemmShape& g, float alpha, const void* a, const void* b, float beta, void* c) {
  for (int64_t v : {g.m, g.n, g.k, g.lda, g.ldb, g.ldc, g.batch})
    PTDP_CHECK(v <= INT_MAX, "GEMM dimension {} too large for the cuBLAS fallback", v);
  ++fallbacks_;
  if (!blas_) {
    DeviceGuard guard(device_);
    PTDP_CUBLAS_CHECK(cublasCreate(&blas_));
    PTDP_CUBLAS_CHECK(cublasSetStream(blas_, stream_));
    PTDP_CUBLAS_CHECK(cublasSetWorkspace(blas_, workspace_, kWorkspaceBytes));
    PTDP_CUBLAS_CHECK(cublasSetMathMode(blas_, CUBLAS_DEFAULT_MATH));
  }
  PTDP_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      blas_, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, int(g.m), int(g.n),
      int(g.k), &alpha, a, cuda_type(g.ab), int(g.lda), g.stride_a, b, cuda_type(g.ab), int(g.ldb), g.stride_b, &beta,
      c, cuda_type(g.c), int(g.ldc), g.stride_c, int(g.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace ptdp::cuda
