// cublasLtMatmul through the public API on vgpu device memory and streams, against a naive
// reference (exact: operands are multiples of 1/4): transposes with ld > rows, strided batches,
// the bias epilogue, 16-bit operands, beta 0 / 1 in place, k = 0; the documented error statuses;
// and the vgpu's checks (extent overrun, broken alignment promises, uninitialised inputs, races).
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <vgpu/runtime.h>

#include <memory>
#include <string>

#include "cublas/device_test_util.h"
#include "cublas/gemm_core.h"
#include "runtime/test_util.h"

namespace vgpu::blas {
namespace {

using testing::DeviceMatrix;
using testing::HostMatrix;
using vgpu_test::any_contains;
using vgpu_test::joined;
using testing::LtPlan;

struct LtCase {
  bool ta = false, tb = false;
  int64_t m = 5, n = 4, k = 3, batch = 1;
  cudaDataType ab = CUDA_R_32F, cd = CUDA_R_32F;
  float alpha = 1.0f, beta = 0.0f;
  bool bias = false;
  bool c_is_d = true;
};

class LtMatmul : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cublasLtCreate(&lt_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&workspace_, kWorkspace), cudaSuccess);
  }
  void TearDown() override {
    cudaStreamSynchronize(stream_);
    cudaFree(workspace_);
    cudaStreamDestroy(stream_);
    cublasLtDestroy(lt_);
  }

  // Operands of one case, on the device.
  struct Operands {
    std::unique_ptr<DeviceMatrix> a, b, c, d, bias;
  };
  Operands make_operands(const LtCase& cs, uint32_t seed) {
    std::mt19937 rng(seed);
    const int64_t ar = cs.ta ? cs.k : cs.m, ac = cs.ta ? cs.m : cs.k;
    const int64_t br = cs.tb ? cs.n : cs.k, bc = cs.tb ? cs.k : cs.n;
    HostMatrix a(cs.ab, ar, ac, ar + 2, cs.batch), b(cs.ab, br, bc, br + 3, cs.batch);
    HostMatrix c(cs.cd, cs.m, cs.n, cs.m + 2, cs.batch), d(cs.cd, cs.m, cs.n, cs.m + 2, cs.batch);
    HostMatrix bias(cs.cd, cs.m, 1, cs.m, cs.batch, cs.m);
    for (HostMatrix* h : {&a, &b, &c, &d, &bias}) h->randomize(rng);
    Operands o;
    o.a = std::make_unique<DeviceMatrix>(a);
    o.b = std::make_unique<DeviceMatrix>(b);
    o.c = std::make_unique<DeviceMatrix>(c);
    o.d = std::make_unique<DeviceMatrix>(d);
    o.bias = std::make_unique<DeviceMatrix>(bias);
    return o;
  }

  // Descriptors as ptdp's GemmRunner makes them; the bias pointer is set before the heuristic when
  // bias_at_heuristic (else only before the product, as GemmRunner does).
  void make_plan(const LtCase& cs, Operands& o, LtPlan& plan, bool bias_at_heuristic = true) {
    ASSERT_EQ(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
    const cublasOperation_t ta = cs.ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb = cs.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    if (cs.bias) {
      const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
      const cudaDataType_t bt = cs.cd;
      const int64_t bias_stride = cs.m;
      testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
      testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof(bt));
      if (cs.batch > 1)
        testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_stride, sizeof(bias_stride));
      if (bias_at_heuristic) testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &o.bias->dev, sizeof(void*));
    }
    plan.a = testing::make_layout(o.a->host);
    plan.b = testing::make_layout(o.b->host);
    plan.d = testing::make_layout(o.d->host);
    if (!cs.c_is_d) plan.c = testing::make_layout(o.c->host);
    ASSERT_EQ(cublasLtMatmulPreferenceCreate(&plan.pref), CUBLAS_STATUS_SUCCESS);
    const uint64_t ws = kWorkspace;
    ASSERT_EQ(
        cublasLtMatmulPreferenceSetAttribute(plan.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
        CUBLAS_STATUS_SUCCESS);
    const DeviceMatrix& c = cs.c_is_d ? *o.d : *o.c;
    testing::set_alignments(plan.pref, testing::operand_alignment(o.a->dev, o.a->host),
                            testing::operand_alignment(o.b->dev, o.b->host), testing::operand_alignment(c.dev, c.host),
                            testing::operand_alignment(o.d->dev, o.d->host));
  }

  cublasStatus_t heuristic(LtPlan& plan, cublasLtMatmulAlgo_t* algo) {
    cublasLtMatmulHeuristicResult_t r{};
    int count = -1;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(lt_, plan.op, plan.a, plan.b, plan.c ? plan.c : plan.d,
                                                            plan.d, plan.pref, 1, &r, &count);
    if (s == CUBLAS_STATUS_SUCCESS) {
      EXPECT_EQ(count, 1);
      EXPECT_EQ(r.state, CUBLAS_STATUS_SUCCESS);
      *algo = r.algo;
    } else {
      EXPECT_EQ(count, 0);
    }
    return s;
  }

  cublasStatus_t matmul(const LtCase& cs, Operands& o, LtPlan& plan, const cublasLtMatmulAlgo_t* algo) {
    const DeviceMatrix& c = cs.c_is_d ? *o.d : *o.c;
    return cublasLtMatmul(lt_, plan.op, &cs.alpha, o.a->dev, plan.a, o.b->dev, plan.b, &cs.beta, c.dev,
                          plan.c ? plan.c : plan.d, o.d->dev, plan.d, algo, workspace_, kWorkspace, stream_);
  }

  // The whole flow of one case, checked element for element against the reference.
  void run_and_check(const LtCase& cs, uint32_t seed) {
    Operands o = make_operands(cs, seed);
    LtPlan plan;
    make_plan(cs, o, plan);
    cublasLtMatmulAlgo_t algo{};
    ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    GemmProblem p;
    p.trans_a = cs.ta;
    p.trans_b = cs.tb;
    p.m = cs.m;
    p.n = cs.n;
    p.k = cs.k;
    p.batch = cs.batch;
    p.alpha = cs.alpha;
    p.beta = cs.beta;
    p.bias_type = cs.cd;
    p.bias_stride = cs.m;
    const HostMatrix expected = testing::reference_gemm(p, o.a->host, o.b->host, cs.c_is_d ? o.d->host : o.c->host,
                                                        o.d->host, cs.bias ? o.bias->host.bytes.data() : nullptr);
    const HostMatrix got = o.d->download();
    EXPECT_EQ(got.bytes, expected.bytes) << "ta " << cs.ta << " tb " << cs.tb << " batch " << cs.batch;
  }

  static constexpr size_t kWorkspace = size_t(1) << 20;
  cublasLtHandle_t lt_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
};

TEST_F(LtMatmul, MatchesTheReferenceForEveryTransposeWithLeadingDimensionsAboveRows) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      LtCase cs;
      cs.ta = ta;
      cs.tb = tb;
      cs.m = 6;
      cs.n = 7;
      cs.k = 5;
      cs.alpha = 0.5f;
      run_and_check(cs, 100 + ta * 2 + tb);
    }
}

TEST_F(LtMatmul, StridedBatchesAreIndependentProducts) {
  LtCase cs;
  cs.batch = 3;
  cs.ta = true;
  run_and_check(cs, 110);
  cs.ab = cs.cd = CUDA_R_16BF;
  cs.tb = true;
  run_and_check(cs, 111);
}

TEST_F(LtMatmul, BiasEpilogueAddsTheBiasToEveryColumn) {
  LtCase cs;
  cs.bias = true;
  run_and_check(cs, 120);
  cs.batch = 2;  // with CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE
  cs.ab = cs.cd = CUDA_R_16F;
  run_and_check(cs, 121);
}

TEST_F(LtMatmul, SixteenBitInputsWithF32OrSameTypeOutputs) {
  for (cudaDataType ab : {CUDA_R_16BF, CUDA_R_16F})
    for (cudaDataType cd : {ab, CUDA_R_32F}) {
      LtCase cs;
      cs.ab = ab;
      cs.cd = cd;
      cs.tb = true;
      cs.m = 9;
      cs.n = 4;
      cs.k = 19;
      run_and_check(cs, 130 + (cd == CUDA_R_32F));
    }
}

TEST_F(LtMatmul, BetaZeroAndBetaOneInPlaceAndWithASeparateC) {
  for (float beta : {0.0f, 1.0f})
    for (bool c_is_d : {true, false}) {
      LtCase cs;
      cs.beta = beta;
      cs.c_is_d = c_is_d;
      cs.ab = cs.cd = CUDA_R_16BF;
      run_and_check(cs, 140 + c_is_d);
      cs.ab = cs.cd = CUDA_R_32F;
      run_and_check(cs, 142 + c_is_d);
    }
}

// BLAS semantics for an empty inner dimension: D = beta C (+ bias).
TEST_F(LtMatmul, EmptyInnerDimensionGivesBetaCPlusBias) {
  for (float beta : {0.0f, 1.0f}) {
    LtCase cs;
    cs.k = 0;
    cs.beta = beta;
    cs.bias = true;
    run_and_check(cs, 150);
  }
}

// cublasLtMatrixLayout LD "must be large enough so that matrix memory locations are not
// overlapping (e.g. greater or equal to CUBLASLT_MATRIX_LAYOUT_ROWS)".
TEST_F(LtMatmul, LeadingDimensionBelowRowsIsInvalidValue) {
  LtCase cs;
  Operands o = make_operands(cs, 160);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  const int64_t small = cs.m - 1;
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(plan.d, CUBLASLT_MATRIX_LAYOUT_LD, &small, sizeof(small)),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulAlgo_t unused{};
  EXPECT_EQ(heuristic(plan, &unused), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_INVALID_VALUE);
}

TEST_F(LtMatmul, InconsistentShapesAreInvalidValue) {
  LtCase cs;
  Operands o = make_operands(cs, 170);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  // op(B) must be k x n: transposing B alone breaks it.
  const cublasOperation_t t = CUBLAS_OP_T;
  testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &t, sizeof(t));
  EXPECT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_INVALID_VALUE);
  // Different batch counts.
  const cublasOperation_t n = CUBLAS_OP_N;
  testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n));
  const int32_t two = 2;
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(plan.a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &two, sizeof(two)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_INVALID_VALUE);
}

TEST_F(LtMatmul, UnsupportedTypeCombinationHasNoAlgorithm) {
  LtCase cs;
  Operands o = make_operands(cs, 180);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulAlgo_t algo{};
  // A f32 with B bf16.
  const uint32_t bf16 = CUDA_R_16BF;
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(plan.b, CUBLASLT_MATRIX_LAYOUT_TYPE, &bf16, sizeof(bf16)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_NOT_SUPPORTED);
  // f16 inputs into a bf16 D.
  const uint32_t f16 = CUDA_R_16F;
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(plan.a, CUBLASLT_MATRIX_LAYOUT_TYPE, &f16, sizeof(f16)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(plan.b, CUBLASLT_MATRIX_LAYOUT_TYPE, &f16, sizeof(f16)),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(plan.d, CUBLASLT_MATRIX_LAYOUT_TYPE, &bf16, sizeof(bf16)),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_NOT_SUPPORTED);
  // f16 compute is outside the subset.
  cublasLtMatmulDesc_t half = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&half, CUBLAS_COMPUTE_16F, CUDA_R_16F), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t r{};
  int count = -1;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(lt_, half, plan.a, plan.a, plan.a, plan.a, plan.pref, 1, &r, &count),
            CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(count, 0);
  cublasLtMatmulDescDestroy(half);
}

TEST_F(LtMatmul, HeuristicWithRequestedCountBelowOneIsInvalidValue) {
  LtCase cs;
  Operands o = make_operands(cs, 190);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulHeuristicResult_t r{};
  int count = -1;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(lt_, plan.op, plan.a, plan.b, plan.d, plan.d, plan.pref, 0, &r, &count),
            CUBLAS_STATUS_INVALID_VALUE);
}

TEST_F(LtMatmul, BiasEpilogueWithoutABiasPointerIsInvalidValue) {
  LtCase cs;
  cs.bias = true;
  Operands o = make_operands(cs, 200);
  LtPlan plan;
  make_plan(cs, o, plan, /*bias_at_heuristic=*/false);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_INVALID_VALUE);
}

// The vgpu's rule: every operand's full extent over all batches lies in one device allocation.
TEST_F(LtMatmul, OperandExtentOverrunningItsAllocationIsReported) {
  LtCase cs;
  cs.batch = 2;
  Operands o = make_operands(cs, 210);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  // A batch stride one column larger than the allocation allows.
  const int64_t stride = o.d->host.stride + o.d->host.ld;
  ASSERT_EQ(
      cublasLtMatrixLayoutSetAttribute(plan.d, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
      CUBLAS_STATUS_SUCCESS);
  CaptureViolations cap;
  EXPECT_EQ(matmul(cs, o, plan, nullptr), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_TRUE(any_contains(cap.messages(), "out of bounds", "cublasLtMatmul D", "overrunning"))
      << joined(cap.messages());
}

TEST_F(LtMatmul, WorkspaceLargerThanItsAllocationIsReported) {
  LtCase cs;
  Operands o = make_operands(cs, 215);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  CaptureViolations cap;
  EXPECT_EQ(cublasLtMatmul(lt_, plan.op, &cs.alpha, o.a->dev, plan.a, o.b->dev, plan.b, &cs.beta, o.d->dev, plan.d,
                           o.d->dev, plan.d, &algo, workspace_, 2 * kWorkspace, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_TRUE(any_contains(cap.messages(), "out of bounds", "cublasLtMatmul workspace")) << joined(cap.messages());
  // A workspace size with a null workspace: "parameters ... unexpectedly NULL, in conflict" (no report).
  EXPECT_EQ(cublasLtMatmul(lt_, plan.op, &cs.alpha, o.a->dev, plan.a, o.b->dev, plan.b, &cs.beta, o.d->dev, plan.d,
                           o.d->dev, plan.d, &algo, nullptr, 64, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cap.messages().size(), 1u) << joined(cap.messages());
}

// MIN_ALIGNMENT_*_BYTES promise the heuristic an alignment; cublasLtMatmul must keep it.
TEST_F(LtMatmul, OperandLessAlignedThanTheHeuristicWasPromisedIsReported) {
  LtCase cs;
  cs.m = 4;
  cs.n = 4;
  cs.k = 4;
  Operands o = make_operands(cs, 220);
  LtPlan plan;
  make_plan(cs, o, plan);
  testing::set_alignments(plan.pref, 256, 16, 256, 256);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  // B read 8 bytes (two f32 elements) into a roomier copy of it: aligned to 8, not 16.
  const HostMatrix& hb = o.b->host;
  HostMatrix roomy_host(hb.type, hb.rows, hb.cols + 1, hb.ld);
  std::mt19937 rng(221);
  roomy_host.randomize(rng);
  DeviceMatrix roomy(roomy_host);
  const void* shifted = static_cast<char*>(roomy.dev) + 8;
  CaptureViolations cap;
  const float alpha = 1.0f, beta = 0.0f;
  EXPECT_EQ(cublasLtMatmul(lt_, plan.op, &alpha, o.a->dev, plan.a, shifted, plan.b, &beta, o.d->dev, plan.d, o.d->dev,
                           plan.d, &algo, workspace_, kWorkspace, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_TRUE(any_contains(cap.messages(), "misaligned operand", "B (batch 0)", "aligned to 8 bytes"))
      << joined(cap.messages());
  EXPECT_TRUE(any_contains(cap.messages(), "aligned to 16 bytes", "MIN_ALIGNMENT_B_BYTES")) << joined(cap.messages());
  // Correctly aligned, the same algorithm is fine.
  EXPECT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_SUCCESS);
}

// BIAS_POINTER: "Routines that don't dereference this pointer, like
// cublasLtMatmulAlgoGetHeuristic() depend on its value to determine expected pointer alignment."
TEST_F(LtMatmul, BiasPointerUnsetAtHeuristicTimeThenA16ByteAlignedBiasIsReported) {
  LtCase cs;
  cs.bias = true;
  Operands o = make_operands(cs, 230);
  LtPlan plan;
  make_plan(cs, o, plan, /*bias_at_heuristic=*/false);  // ptdp's GemmRunner order
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  // A bias 16 bytes into a larger buffer: 16-byte aligned, not 256.
  DeviceMatrix big(HostMatrix(cs.cd, cs.m + 8, 1, cs.m + 8));
  const void* bias16 = static_cast<char*>(big.dev) + 16;
  testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias16, sizeof(bias16));
  {
    CaptureViolations cap;
    EXPECT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_TRUE(any_contains(cap.messages(), "misaligned operand", "BIAS_POINTER", "aligned to 16 bytes"))
        << joined(cap.messages());
  }
  // The same bias set before the heuristic: the algorithm is chosen for it and runs.
  cublasLtMatmulAlgo_t fitted{};
  ASSERT_EQ(heuristic(plan, &fitted), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(matmul(cs, o, plan, &fitted), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

// The descriptor is read at the call: changing it right after (as ptdp does with BIAS_POINTER)
// does not change the queued product.
TEST_F(LtMatmul, DescriptorChangedRightAfterTheCallDoesNotChangeTheQueuedProduct) {
  LtCase cs;
  cs.bias = true;
  Operands o = make_operands(cs, 240);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  const HostMatrix d_before = o.d->host;
  ASSERT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_SUCCESS);
  const void* other = nullptr;
  const cublasLtEpilogue_t plain = CUBLASLT_EPILOGUE_DEFAULT;
  testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &other, sizeof(other));
  testing::set_desc(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &plain, sizeof(plain));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  GemmProblem p;
  p.m = cs.m;
  p.n = cs.n;
  p.k = cs.k;
  p.bias_type = cs.cd;
  const HostMatrix expected =
      testing::reference_gemm(p, o.a->host, o.b->host, d_before, d_before, o.bias->host.bytes.data());
  EXPECT_EQ(o.d->download().bytes, expected.bytes);
}

TEST_F(LtMatmul, ReadingUninitialisedDeviceMemoryIsReported) {
  LtCase cs;
  Operands o = make_operands(cs, 250);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  void* fresh = nullptr;  // same size as A, never written
  ASSERT_EQ(cudaMalloc(&fresh, o.a->host.bytes.size()), cudaSuccess);
  {
    CaptureViolations cap;
    const float alpha = 1.0f, beta = 0.0f;
    EXPECT_EQ(cublasLtMatmul(lt_, plan.op, &alpha, fresh, plan.a, o.b->dev, plan.b, &beta, o.d->dev, plan.d, o.d->dev,
                             plan.d, &algo, workspace_, kWorkspace, stream_),
              CUBLAS_STATUS_SUCCESS);
    cudaStreamSynchronize(stream_);
    EXPECT_TRUE(any_contains(cap.messages(), "uninitialized read", "cublasLtMatmul A")) << joined(cap.messages());
  }
  cudaFree(fresh);
}

// The product's ranges reach the race checker: D written on one stream and read on another with
// no ordering between them is a race.
TEST_F(LtMatmul, RaceCheckerSeesTheProductsRanges) {
  LtCase cs;
  Operands o = make_operands(cs, 260);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  std::vector<unsigned char> host(o.d->host.bytes.size());
  {
    CaptureViolations cap;
    ASSERT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_SUCCESS);
    cudaMemcpyAsync(host.data(), o.d->dev, host.size(), cudaMemcpyDeviceToHost, other);
    cudaStreamSynchronize(other);
    cudaStreamSynchronize(stream_);
    EXPECT_TRUE(any_contains(cap.messages(), "race", "cublasLtMatmul")) << joined(cap.messages());
  }
  cudaStreamDestroy(other);
}

TEST_F(LtMatmul, DescriptorsUsedAfterDestroyAreReported) {
  LtCase cs;
  Operands o = make_operands(cs, 270);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutDestroy(plan.b), CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayout_t dead = plan.b;
  plan.b = nullptr;
  CaptureViolations cap;
  const float alpha = 1.0f, beta = 0.0f;
  EXPECT_EQ(cublasLtMatmul(lt_, plan.op, &alpha, o.a->dev, plan.a, o.b->dev, dead, &beta, o.d->dev, plan.d, o.d->dev,
                           plan.d, &algo, workspace_, kWorkspace, stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_TRUE(any_contains(cap.messages(), "use after destroy", "Bdesc", "cublasLtMatrixLayout_t"))
      << joined(cap.messages());
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(dead), CUBLAS_STATUS_INVALID_VALUE);  // destroyed twice
  cublasLtHandle_t h = nullptr;
  ASSERT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtDestroy(h), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmul(h, plan.op, &alpha, o.a->dev, plan.a, o.b->dev, plan.a, &beta, o.d->dev, plan.d, o.d->dev,
                           plan.d, &algo, workspace_, kWorkspace, stream_),
            CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_TRUE(any_contains(cap.messages(), "use after destroy", "lightHandle")) << joined(cap.messages());
  EXPECT_EQ(cap.messages().size(), 3u) << joined(cap.messages());
}

TEST_F(LtMatmul, AlgorithmNotFromTheHeuristicIsReported) {
  LtCase cs;
  Operands o = make_operands(cs, 280);
  LtPlan plan;
  make_plan(cs, o, plan);
  const cublasLtMatmulAlgo_t zero{};
  CaptureViolations cap;
  EXPECT_EQ(matmul(cs, o, plan, &zero), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_TRUE(any_contains(cap.messages(), "invalid algorithm")) << joined(cap.messages());
}

// Products queued on several streams run concurrently on their workers (OpenBLAS called from
// several threads at once) and each gives its own right answer.
TEST_F(LtMatmul, ProductsOnSeveralStreamsAtOnceAreEachRight) {
  constexpr int kStreams = 4, kPerStream = 6;
  LtCase cs;
  cs.m = 24;
  cs.n = 20;
  cs.k = 32;
  cs.ta = true;
  std::vector<cudaStream_t> streams(kStreams);
  for (auto& st : streams) ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  std::vector<Operands> ops;
  std::vector<std::unique_ptr<LtPlan>> plans;
  std::vector<cublasLtMatmulAlgo_t> algos(kStreams * kPerStream);
  for (int i = 0; i < kStreams * kPerStream; ++i) {
    ops.push_back(make_operands(cs, uint32_t(500 + i)));
    plans.push_back(std::make_unique<LtPlan>());
    make_plan(cs, ops.back(), *plans.back());
    ASSERT_EQ(heuristic(*plans.back(), &algos[size_t(i)]), CUBLAS_STATUS_SUCCESS);
  }
  for (int i = 0; i < kStreams * kPerStream; ++i) {
    Operands& o = ops[size_t(i)];
    LtPlan& plan = *plans[size_t(i)];
    ASSERT_EQ(cublasLtMatmul(lt_, plan.op, &cs.alpha, o.a->dev, plan.a, o.b->dev, plan.b, &cs.beta, o.d->dev, plan.d,
                             o.d->dev, plan.d, &algos[size_t(i)], nullptr, 0, streams[size_t(i % kStreams)]),
              CUBLAS_STATUS_SUCCESS);
  }
  for (auto& st : streams) ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
  for (int i = 0; i < kStreams * kPerStream; ++i) {
    Operands& o = ops[size_t(i)];
    GemmProblem p;
    p.trans_a = cs.ta;
    p.m = cs.m;
    p.n = cs.n;
    p.k = cs.k;
    EXPECT_EQ(o.d->download().bytes,
              testing::reference_gemm(p, o.a->host, o.b->host, o.d->host, o.d->host, nullptr).bytes)
        << "product " << i;
  }
  for (auto& st : streams) cudaStreamDestroy(st);
}

// A product runs OpenBLAS on one OpenMP thread, on a stream's worker or on the calling thread (an
// idle stream), and leaves the thread's own setting as it was.
TEST_F(LtMatmul, ProductsRunOpenBlasOnOneThreadAndKeepTheThreadsSetting) {
  LtCase cs;
  Operands o = make_operands(cs, 290);
  LtPlan plan;
  make_plan(cs, o, plan);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(heuristic(plan, &algo), CUBLAS_STATUS_SUCCESS);
  using MaxThreads = int (*)();
  using SetThreads = void (*)(int);
  const auto max_threads = reinterpret_cast<MaxThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  const auto set_threads = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  ASSERT_NE(max_threads, nullptr) << "libgomp is not loaded with OpenBLAS";
  ASSERT_NE(set_threads, nullptr);
  const int before = max_threads();
  set_threads(3);
  ASSERT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_SUCCESS);  // the stream is idle: it runs here
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(vgpu::blas::openmp_threads_of_last_product_for_testing(), 1);
  EXPECT_EQ(max_threads(), 3);
  set_threads(before);
  struct Probe {
    int seen = -1;
  } probe;
  vgpu_test::Gate gate;
  gate.block(stream_);
  ASSERT_EQ(matmul(cs, o, plan, &algo), CUBLAS_STATUS_SUCCESS);  // behind the gate: on the worker
  ASSERT_EQ(cudaLaunchHostFunc(
                stream_,
                [](void* p) { static_cast<Probe*>(p)->seen = vgpu::blas::openmp_threads_of_last_product_for_testing(); },
                &probe),
            cudaSuccess);
  gate.release();
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(probe.seen, 1);
}

TEST(LtDescriptors, AttributesReadBackWithTheirDocumentedSizesAndDefaults) {
  cublasLtMatmulDesc_t d = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  uint32_t epi = 0;
  size_t written = 0;
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi), &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(epi, uint32_t(CUBLASLT_EPILOGUE_DEFAULT));
  EXPECT_EQ(written, sizeof(uint32_t));
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, nullptr, 0, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof(void*));
  const int64_t wrong_size = CUBLAS_OP_T;  // TRANSA is an int32_t
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &wrong_size, sizeof(wrong_size)),
            CUBLAS_STATUS_INVALID_VALUE);
  const int32_t t = CUBLAS_OP_T;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)), CUBLAS_STATUS_SUCCESS);
  int32_t back = 0;
  EXPECT_EQ(cublasLtMatmulDescGetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &back, sizeof(back), nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(back, CUBLAS_OP_T);
  EXPECT_EQ(cublasLtMatmulDescDestroy(d), CUBLAS_STATUS_SUCCESS);

  cublasLtMatmulPreference_t p = nullptr;
  ASSERT_EQ(cublasLtMatmulPreferenceCreate(&p), CUBLAS_STATUS_SUCCESS);
  uint32_t align = 0;
  EXPECT_EQ(cublasLtMatmulPreferenceGetAttribute(p, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align, sizeof(align),
                                                 nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(align, 256u);  // "uint32_t, default: 256"
  EXPECT_EQ(cublasLtMatmulPreferenceDestroy(p), CUBLAS_STATUS_SUCCESS);

  cublasLtMatrixLayout_t l = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&l, CUDA_R_16BF, 3, 4, 5), CUBLAS_STATUS_SUCCESS);
  int32_t batch = 0;
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof(batch), nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(batch, 1);
  int64_t ld = 0;
  EXPECT_EQ(cublasLtMatrixLayoutGetAttribute(l, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof(ld), nullptr),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(ld, 5);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(l), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace vgpu::blas
