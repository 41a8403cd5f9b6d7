// cuBLASLt's GELU epilogues through the public API (cublasLt.h, cublasLtEpilogue_t):
// GELU_AUX_BIAS (D = GELU(AB + bias) and the GELU input kept in the aux matrix) and DGELU_BGRAD
// (D = AB GELU'(aux) and the bias gradient, the sums of D's rows, written to the bias vector),
// against a reference in double with the tanh approximation of GELU; the rules for the aux
// matrix (its leading dimension a multiple of 8 and at least D's rows, its pointer set, its type
// D's) and the vgpu's checks (what the epilogue writes counts as initialised, a read of an aux
// matrix nothing wrote is reported).
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <vgpu/runtime.h>

#include <cmath>
#include <random>

#include "cublas/device_test_util.h"
#include "runtime/test_util.h"

namespace vgpu::blas {
namespace {

using testing::DeviceMatrix;
using testing::HostMatrix;
using testing::LtPlan;
using vgpu_test::any_contains;
using vgpu_test::joined;

double gelu(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
double dgelu(double x) {
  const double th = std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x));
  return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
}

// D (m x n) = A (m x k) B (k x n) with an epilogue, column-major, no transposes.
class LtEpilogue : public ::testing::Test {
 protected:
  static constexpr int64_t m = 16, n = 5, k = 3, aux_ld = 24;
  void SetUp() override {
    ASSERT_EQ(cublasLtCreate(&lt_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    cudaStreamDestroy(stream_);
    cublasLtDestroy(lt_);
  }

  // aux_then: the aux pointer of the product, when another than the heuristic's.
  cublasStatus_t run(cudaDataType t, cublasLtEpilogue_t epi, DeviceMatrix& a, DeviceMatrix& b, DeviceMatrix& d,
                     void* bias, void* aux, int64_t ld_aux = aux_ld, void* aux_then = nullptr) {
    LtPlan plan;
    EXPECT_EQ(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    if (bias) testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
    if (aux) testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
    testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof(ld_aux));
    const int32_t aux_type = t;
    testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, sizeof(aux_type));
    plan.a = testing::make_layout(a.host);
    plan.b = testing::make_layout(b.host);
    plan.d = testing::make_layout(d.host);
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&plan.pref), CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulHeuristicResult_t r{};
    int count = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt_, plan.op, plan.a, plan.b, plan.d, plan.d, plan.pref, 1, &r,
                                                      &count);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    if (aux_then) testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_then, sizeof(aux_then));
    const float alpha = 1.0f, beta = 0.0f;
    s = cublasLtMatmul(lt_, plan.op, &alpha, a.dev, plan.a, b.dev, plan.b, &beta, d.dev, plan.d, d.dev, plan.d,
                       &r.algo, nullptr, 0, stream_);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return s;
  }

  // (AB)[r][c] in double.
  static double product(const HostMatrix& a, const HostMatrix& b, int64_t r, int64_t c) {
    double s = 0;
    for (int64_t i = 0; i < k; ++i) s += double(a.get(0, r, i)) * b.get(0, i, c);
    return s;
  }

  cublasLtHandle_t lt_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

TEST_F(LtEpilogue, GeluAuxBiasKeepsTheGeluInputAndAppliesGelu) {
  for (cudaDataType t : {CUDA_R_32F, CUDA_R_16BF}) {
    std::mt19937 rng(7);
    HostMatrix ha(t, m, k, m), hb(t, k, n, k), hbias(t, m, 1, m);
    for (HostMatrix* h : {&ha, &hb, &hbias}) h->randomize(rng);
    DeviceMatrix a(ha), b(hb), d(HostMatrix(t, m, n, m)), aux(HostMatrix(t, aux_ld, n, aux_ld)), bias(hbias);
    ASSERT_EQ(run(t, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, a, b, d, bias.dev, aux.dev), CUBLAS_STATUS_SUCCESS);
    const HostMatrix got = d.download(), pre = aux.download();
    const double tol = t == CUDA_R_32F ? 1e-6 : 1e-2;
    for (int64_t c = 0; c < n; ++c)
      for (int64_t r = 0; r < m; ++r) {
        const double x = product(ha, hb, r, c) + hbias.get(0, r, 0);  // exact: multiples of 1/4
        EXPECT_EQ(pre.get(0, r, c), float(x)) << r << "," << c;
        EXPECT_NEAR(got.get(0, r, c), gelu(x), tol * (1 + std::abs(gelu(x)))) << r << "," << c;
      }
  }
}

TEST_F(LtEpilogue, DgeluBgradAppliesTheGeluGradientAndWritesTheBiasGradient) {
  for (cudaDataType t : {CUDA_R_32F, CUDA_R_16BF}) {
    std::mt19937 rng(11);
    HostMatrix ha(t, m, k, m), hb(t, k, n, k), haux(t, aux_ld, n, aux_ld);
    for (HostMatrix* h : {&ha, &hb, &haux}) h->randomize(rng);
    DeviceMatrix a(ha), b(hb), d(HostMatrix(t, m, n, m)), aux(haux), bias(HostMatrix(t, m, 1, m));
    ASSERT_EQ(run(t, CUBLASLT_EPILOGUE_DGELU_BGRAD, a, b, d, bias.dev, aux.dev), CUBLAS_STATUS_SUCCESS);
    const HostMatrix got = d.download(), db = bias.download();
    const double tol = t == CUDA_R_32F ? 1e-5 : 1e-2;
    for (int64_t r = 0; r < m; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < n; ++c) {
        const double want = product(ha, hb, r, c) * dgelu(haux.get(0, r, c));
        sum += want;
        EXPECT_NEAR(got.get(0, r, c), want, tol * (1 + std::abs(want))) << r << "," << c;
      }
      EXPECT_NEAR(db.get(0, r, 0), sum, tol * (1 + std::abs(sum))) << "bias gradient " << r;
    }
  }
}

TEST_F(LtEpilogue, TheAuxMatrixFollowsCublasLtsRules) {
  const cudaDataType t = CUDA_R_32F;
  std::mt19937 rng(3);
  HostMatrix ha(t, m, k, m), hb(t, k, n, k);
  ha.randomize(rng);
  hb.randomize(rng);
  DeviceMatrix a(ha), b(hb), d(HostMatrix(t, m, n, m)), aux(HostMatrix(t, aux_ld, n, aux_ld)),
      bias(HostMatrix(t, m, 1, m));
  // AUX_LD "must be divisible by 8 and be no less than the number of rows in the output matrix".
  EXPECT_EQ(run(t, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, a, b, d, bias.dev, aux.dev, 20), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(run(t, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, a, b, d, bias.dev, aux.dev, 8), CUBLAS_STATUS_INVALID_VALUE);
  // The epilogue's buffers must be given.
  EXPECT_EQ(run(t, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, a, b, d, bias.dev, nullptr), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(run(t, CUBLASLT_EPILOGUE_DGELU_BGRAD, a, b, d, nullptr, aux.dev), CUBLAS_STATUS_INVALID_VALUE);
  // An aux matrix less aligned at the product than at the heuristic (which reads AUX_POINTER's
  // alignment) is reported and refused.
  {
    vgpu::CaptureViolations cap;
    void* shifted = static_cast<char*>(aux.dev) + 16;  // ld 24 floats: the matrix still fits
    EXPECT_EQ(run(t, CUBLASLT_EPILOGUE_GELU_AUX_BIAS, a, b, d, bias.dev, aux.dev, 16, shifted),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_TRUE(any_contains(cap.messages(), "misaligned operand", "EPILOGUE_AUX_POINTER", "aligned to 256 bytes"))
        << joined(cap.messages());
  }
  // An aux matrix nothing wrote, read by DGELU, is reported (initcheck).
  void* fresh = nullptr;
  ASSERT_EQ(cudaMalloc(&fresh, aux.host.bytes.size()), cudaSuccess);
  vgpu::CaptureViolations cap;
  EXPECT_EQ(run(t, CUBLASLT_EPILOGUE_DGELU_BGRAD, a, b, d, bias.dev, fresh), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(any_contains(cap.messages(), "cublasLtMatmul aux")) << joined(cap.messages());
  cudaFree(fresh);
}

}  // namespace
}  // namespace vgpu::blas
