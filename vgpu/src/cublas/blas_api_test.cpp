// The classic cuBLAS subset: cublasGemmEx / cublasGemmStridedBatchedEx give the same bytes as the
// cuBLASLt path and the reference, follow the documented argument checks, run on the handle's
// stream; handle state (stream, workspace, math mode) and use after destroy.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <vgpu/runtime.h>

#include <string>

#include "cublas/device_test_util.h"
#include "runtime/test_util.h"

namespace vgpu::blas {
namespace {

using testing::DeviceMatrix;
using testing::HostMatrix;
using vgpu_test::any_contains;

struct Shapes {
  bool ta = false, tb = false;
  int m = 6, n = 5, k = 7, batch = 1;
  cudaDataType ab = CUDA_R_32F, c = CUDA_R_32F;
  float alpha = 1.0f, beta = 1.0f;
};

struct Operands {
  HostMatrix a, b, c;
};
Operands make(const Shapes& s, uint32_t seed) {
  std::mt19937 rng(seed);
  const int ar = s.ta ? s.k : s.m, ac = s.ta ? s.m : s.k, br = s.tb ? s.n : s.k, bc = s.tb ? s.k : s.n;
  Operands o{HostMatrix(s.ab, ar, ac, ar + 1, s.batch), HostMatrix(s.ab, br, bc, br + 2, s.batch),
             HostMatrix(s.c, s.m, s.n, s.m + 3, s.batch)};
  o.a.randomize(rng);
  o.b.randomize(rng);
  o.c.randomize(rng);
  return o;
}

// The same product through cuBLASLt (C = D in place), ptdp's way.
void run_lt(const Shapes& s, DeviceMatrix& a, DeviceMatrix& b, DeviceMatrix& c, cudaStream_t stream) {
  cublasLtHandle_t lt = nullptr;
  ASSERT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  testing::LtPlan plan;
  ASSERT_EQ(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const cublasOperation_t ta = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
  testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
  plan.a = testing::make_layout(a.host);
  plan.b = testing::make_layout(b.host);
  plan.d = testing::make_layout(c.host);
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&plan.pref), CUBLAS_STATUS_SUCCESS);
  testing::set_alignments(plan.pref, testing::operand_alignment(a.dev, a.host),
                          testing::operand_alignment(b.dev, b.host), testing::operand_alignment(c.dev, c.host),
                          testing::operand_alignment(c.dev, c.host));
  cublasLtMatmulHeuristicResult_t r{};
  int count = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(lt, plan.op, plan.a, plan.b, plan.d, plan.d, plan.pref, 1, &r, &count),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatmul(lt, plan.op, &s.alpha, a.dev, plan.a, b.dev, plan.b, &s.beta, c.dev, plan.d, c.dev, plan.d,
                           &r.algo, nullptr, 0, stream),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  cublasLtDestroy(lt);
}

class Blas : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    ASSERT_EQ(cublasSetStream(handle_, stream_), CUBLAS_STATUS_SUCCESS);
  }
  void TearDown() override {
    if (handle_) cublasDestroy(handle_);
    cudaStreamDestroy(stream_);
  }

  cublasStatus_t gemm(const Shapes& s, DeviceMatrix& a, DeviceMatrix& b, DeviceMatrix& c) {
    const cublasOperation_t ta = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    if (s.batch == 1)
      return cublasGemmEx(handle_, ta, tb, s.m, s.n, s.k, &s.alpha, a.dev, s.ab, int(a.host.ld), b.dev, s.ab,
                          int(b.host.ld), &s.beta, c.dev, s.c, int(c.host.ld), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    return cublasGemmStridedBatchedEx(handle_, ta, tb, s.m, s.n, s.k, &s.alpha, a.dev, s.ab, int(a.host.ld),
                                      a.host.stride, b.dev, s.ab, int(b.host.ld), b.host.stride, &s.beta, c.dev, s.c,
                                      int(c.host.ld), c.host.stride, s.batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }

  // GemmEx / StridedBatchedEx, cublasLtMatmul and the reference all agree, byte for byte.
  void check_against_lt(const Shapes& s, uint32_t seed) {
    const Operands o = make(s, seed);
    DeviceMatrix a(o.a), b(o.b), c_blas(o.c), c_lt(o.c);
    ASSERT_EQ(gemm(s, a, b, c_blas), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    run_lt(s, a, b, c_lt, stream_);
    const HostMatrix got = c_blas.download();
    EXPECT_EQ(got.bytes, c_lt.download().bytes) << "ta " << s.ta << " tb " << s.tb << " batch " << s.batch;
    GemmProblem p;
    p.trans_a = s.ta;
    p.trans_b = s.tb;
    p.m = s.m;
    p.n = s.n;
    p.k = s.k;
    p.batch = s.batch;
    p.alpha = s.alpha;
    p.beta = s.beta;
    EXPECT_EQ(got.bytes, testing::reference_gemm(p, o.a, o.b, o.c, o.c, nullptr).bytes);
  }

  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST_F(Blas, GemmExEqualsTheLtPathForEveryTransposeAndType) {
  for (cudaDataType ab : {CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Shapes s;
        s.ab = ab;
        s.c = ab == CUDA_R_16F ? CUDA_R_32F : ab;
        s.ta = ta;
        s.tb = tb;
        s.alpha = 0.5f;
        check_against_lt(s, 300 + ta * 2 + tb);
      }
}

TEST_F(Blas, StridedBatchedExEqualsTheLtStridedPath) {
  for (cudaDataType ab : {CUDA_R_32F, CUDA_R_16BF}) {
    Shapes s;
    s.ab = s.c = ab;
    s.batch = 3;
    s.ta = true;
    s.beta = 0.0f;
    check_against_lt(s, 310);
  }
}

// cuBLAS gemm: m, n, k = 0 are valid; k = 0 leaves C = beta C.
TEST_F(Blas, EmptyInnerDimensionScalesC) {
  Shapes s;
  s.k = 0;
  s.beta = 0.5f;
  check_against_lt(s, 320);
}

// CUBLAS_STATUS_INVALID_VALUE: "m < 0 or n < 0 or k < 0", "lda < max(1, m) if transa ==
// CUBLAS_OP_N and lda < max(1, k) otherwise", likewise ldb and ldc, batchCount < 0.
TEST_F(Blas, DocumentedArgumentErrorsAreInvalidValue) {
  const Shapes s;
  const Operands o = make(s, 330);
  DeviceMatrix a(o.a), b(o.b), c(o.c);
  const float one = 1.0f;
  auto call = [&](int m, int n, int k, int lda, int ldb, int ldc, cublasOperation_t ta = CUBLAS_OP_N) {
    return cublasGemmEx(handle_, ta, CUBLAS_OP_N, m, n, k, &one, a.dev, CUDA_R_32F, lda, b.dev, CUDA_R_32F, ldb, &one,
                        c.dev, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  EXPECT_EQ(call(s.m, s.n, -1, s.m, s.k, s.m), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(call(s.m, s.n, s.k, s.m - 1, s.k, s.m), CUBLAS_STATUS_INVALID_VALUE);               // lda < m
  EXPECT_EQ(call(s.m, s.n, s.k, s.m, s.k - 1, s.m), CUBLAS_STATUS_INVALID_VALUE);               // ldb < k
  EXPECT_EQ(call(s.m, s.n, s.k, s.m, s.k, s.m - 1), CUBLAS_STATUS_INVALID_VALUE);               // ldc < m
  EXPECT_EQ(call(s.m, s.n, s.k, s.k - 1, s.k, s.m, CUBLAS_OP_T), CUBLAS_STATUS_INVALID_VALUE);  // lda < k
  EXPECT_EQ(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, nullptr, a.dev, CUDA_R_32F, s.m, b.dev,
                         CUDA_R_32F, s.k, &one, c.dev, CUDA_R_32F, s.m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &one, a.dev, CUDA_R_32F, s.m,
                                       0, b.dev, CUDA_R_32F, s.k, 0, &one, c.dev, CUDA_R_32F, s.m, 0, -1,
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_INVALID_VALUE);
}

// CUBLAS_STATUS_NOT_SUPPORTED: "the combination of the parameters Atype, Btype and Ctype or the
// algorithm, algo is not supported".
TEST_F(Blas, UnsupportedTypeCombinationIsNotSupported) {
  const Shapes s;
  const Operands o = make(s, 340);
  DeviceMatrix a(o.a), b(o.b), c(o.c);
  const float one = 1.0f;
  EXPECT_EQ(
      cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &one, a.dev, CUDA_R_32F, s.m + 1, b.dev,
                   CUDA_R_16BF, s.k + 2, &one, c.dev, CUDA_R_32F, s.m + 3, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(
      cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &one, a.dev, CUDA_R_16F, s.m + 1, b.dev,
                   CUDA_R_16F, s.k + 2, &one, c.dev, CUDA_R_16BF, s.m + 3, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_NOT_SUPPORTED);
}

TEST_F(Blas, OperandOverrunningItsAllocationIsReported) {
  Shapes s;
  const Operands o = make(s, 350);
  DeviceMatrix a(o.a), b(o.b), c(o.c);
  const float one = 1.0f;
  CaptureViolations cap;
  // One more column than C holds.
  EXPECT_EQ(
      cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n + 1, s.k, &one, a.dev, CUDA_R_32F, s.m + 1, b.dev,
                   CUDA_R_32F, s.k + 2, &one, c.dev, CUDA_R_32F, s.m + 3, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_TRUE(any_contains(cap.messages(), "out of bounds", "cublasGemmEx"));
}

// cublasSetStream "unconditionally resets the cuBLAS library workspace back to the default
// workspace pool"; cublasSetWorkspace wants a 256-byte aligned pointer.
TEST_F(Blas, HandleStateFollowsTheDocumentedRules) {
  cudaStream_t got = nullptr;
  ASSERT_EQ(cublasGetStream(handle_, &got), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, stream_);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, 4096), cudaSuccess);
  EXPECT_EQ(cublasSetWorkspace(handle_, static_cast<char*>(ws) + 128, 1024), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetWorkspace(handle_, ws, 4096), CUBLAS_STATUS_SUCCESS);
  {
    CaptureViolations cap;  // a workspace larger than its allocation
    EXPECT_EQ(cublasSetWorkspace(handle_, ws, 8192), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_TRUE(any_contains(cap.messages(), "out of bounds", "cublasSetWorkspace"));
  }
  EXPECT_EQ(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(
      cublasSetMathMode(handle_, cublasMath_t(CUBLAS_PEDANTIC_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
      CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasSetMathMode(handle_, cublasMath_t(7)), CUBLAS_STATUS_INVALID_VALUE);
  ASSERT_EQ(cublasSetStream(handle_, stream_), CUBLAS_STATUS_SUCCESS);  // workspace back to the default
  cudaFree(ws);
  // With the freed workspace forgotten, products run without any report.
  Shapes s;
  const Operands o = make(s, 360);
  DeviceMatrix a(o.a), b(o.b), c(o.c);
  CaptureViolations cap;
  EXPECT_EQ(gemm(s, a, b, c), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_TRUE(cap.messages().empty());
}

// The workspace set with cublasSetWorkspace is range-checked at every product: freed under the
// handle, it is reported.
TEST_F(Blas, WorkspaceFreedWhileSetIsReportedAtTheNextProduct) {
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, 4096), cudaSuccess);
  ASSERT_EQ(cublasSetWorkspace(handle_, ws, 4096), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cudaFree(ws), cudaSuccess);
  Shapes s;
  const Operands o = make(s, 365);
  DeviceMatrix a(o.a), b(o.b), c(o.c);
  CaptureViolations cap;
  EXPECT_EQ(gemm(s, a, b, c), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_TRUE(any_contains(cap.messages(), "use after free", "cublasGemmEx workspace"));
}

// Without cublasSetStream the handle uses the legacy default stream: the product is ordered
// before a later cudaMemcpy on it.
TEST_F(Blas, AHandleWithoutAStreamUsesTheDefaultStream) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  Shapes s;
  const Operands o = make(s, 370);
  DeviceMatrix a(o.a), b(o.b), c(o.c);
  const float one = 1.0f;
  CaptureViolations cap;
  ASSERT_EQ(
      cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, s.m, s.n, s.k, &one, a.dev, CUDA_R_32F, s.m + 1, b.dev, CUDA_R_32F,
                   s.k + 2, &one, c.dev, CUDA_R_32F, s.m + 3, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      CUBLAS_STATUS_SUCCESS);
  const HostMatrix got = c.download();  // cudaMemcpy on the legacy stream: ordered, no race
  GemmProblem p;
  p.m = s.m;
  p.n = s.n;
  p.k = s.k;
  p.beta = 1.0f;
  EXPECT_EQ(got.bytes, testing::reference_gemm(p, o.a, o.b, o.c, o.c, nullptr).bytes);
  EXPECT_TRUE(cap.messages().empty());
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
}

TEST_F(Blas, HandleUsedAfterDestroyIsReported) {
  cublasHandle_t h = nullptr;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
  CaptureViolations cap;
  EXPECT_EQ(cublasSetStream(h, stream_), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_TRUE(any_contains(cap.messages(), "use after destroy", "cublasSetStream"));
  const float one = 1.0f;
  EXPECT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &one, nullptr, CUDA_R_32F, 1, nullptr, CUDA_R_32F, 1,
                         &one, nullptr, CUDA_R_32F, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cublasDestroy(h), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cap.messages().size(), 3u);
  EXPECT_EQ(cublasSetStream(nullptr, stream_), CUBLAS_STATUS_NOT_INITIALIZED);  // null: documented, not reported
  EXPECT_EQ(cap.messages().size(), 3u);
}

TEST(BlasStatus, EveryStatusHasANameAndADescription) {
  for (cublasStatus_t s :
       {CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_NOT_INITIALIZED, CUBLAS_STATUS_ALLOC_FAILED, CUBLAS_STATUS_INVALID_VALUE,
        CUBLAS_STATUS_ARCH_MISMATCH, CUBLAS_STATUS_MAPPING_ERROR, CUBLAS_STATUS_EXECUTION_FAILED,
        CUBLAS_STATUS_INTERNAL_ERROR, CUBLAS_STATUS_NOT_SUPPORTED, CUBLAS_STATUS_LICENSE_ERROR}) {
    EXPECT_STRNE(cublasGetStatusString(s), cublasGetStatusString(cublasStatus_t(999)));
    EXPECT_EQ(std::string(cublasGetStatusName(s)).rfind("CUBLAS_STATUS_", 0), 0u);
  }
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
}

}  // namespace
}  // namespace vgpu::blas
