// cublasLtMatmulAlgoGetHeuristic and cublasLtMatmul: validate the descriptor and the four layouts
// as cuBLASLt documents (types, shapes, leading dimensions, batches), record in the algorithm
// the alignments the heuristic was promised, hold cublasLtMatmul to them, and queue the product.
#include <cublasLt.h>
#include <vgpu/runtime.h>

#include <algorithm>
#include <climits>
#include <sstream>

#include "cublas/dtype.h"
#include "cublas/handles.h"
#include "cublas/lt_objects.h"
#include "cublas/submit.h"

namespace vgpu::blas {
namespace {

bool is_input_type(uint32_t t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

// What an epilogue of the subset does (cublasLt.h, cublasLtEpilogue_t).
struct Epilogue {
  bool known = true;
  bool bias = false;   // a bias vector added to each column of D
  bool bgrad = false;  // the bias vector is an output: the sums of D's rows
  bool aux = false;    // the GELU input matrix: written (GELU) or read (DGELU)
  Activation act = Activation::None;
};
Epilogue decode_epilogue(uint32_t e) {
  switch (e) {
    case CUBLASLT_EPILOGUE_DEFAULT: return {};
    case CUBLASLT_EPILOGUE_BIAS: return {true, true};
    case CUBLASLT_EPILOGUE_GELU: return {true, false, false, false, Activation::Gelu};
    case CUBLASLT_EPILOGUE_GELU_BIAS: return {true, true, false, false, Activation::Gelu};
    case CUBLASLT_EPILOGUE_GELU_AUX: return {true, false, false, true, Activation::Gelu};
    case CUBLASLT_EPILOGUE_GELU_AUX_BIAS: return {true, true, false, true, Activation::Gelu};
    case CUBLASLT_EPILOGUE_DGELU: return {true, false, false, true, Activation::DGelu};
    case CUBLASLT_EPILOGUE_DGELU_BGRAD: return {true, false, true, true, Activation::DGelu};
    default: return {false};
  }
}

// The epilogue's vectors: the bias of D's type (BIAS_DATA_TYPE -1: D's type); the GELU input
// matrix of D's type too (AUX_DATA_TYPE unset, or set to it), AUX_LD "must be divisible by 8 and be
// no less than the number of rows in the output matrix", AUX_BATCH_STRIDE "must be divisible by 8".
cublasStatus_t check_epilogue_vectors(const cublasLtMatmulDescOpaque_t* desc, const cublasLtMatrixLayoutOpaque_t* D,
                                      const Epilogue& epi) {
  if ((epi.bias || epi.bgrad) && desc->bias_type != -1 && uint32_t(desc->bias_type) != D->type)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (!epi.aux) return CUBLAS_STATUS_SUCCESS;
  if (desc->aux_type != -1 && uint32_t(desc->aux_type) != D->type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc->aux_ld % 8 != 0 || desc->aux_ld < int64_t(D->rows) || desc->aux_stride % 8 != 0 || desc->aux_stride < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

Matrix as_matrix(const cublasLtMatrixLayoutOpaque_t* l, const void* ptr) {
  return Matrix{ptr, cudaDataType(l->type), int64_t(l->rows), int64_t(l->cols), l->ld, l->stride};
}

// Builds the product described by the descriptor and layouts (pointers left null). Returns
// CUBLAS_STATUS_NOT_SUPPORTED for configurations outside the subset (the heuristic then offers
// no algorithm, as cuBLASLt does for an unsupported configuration) and INVALID_VALUE for
// inconsistent ones.
cublasStatus_t build_problem(const cublasLtMatmulDescOpaque_t* desc, const cublasLtMatrixLayoutOpaque_t* A,
                             const cublasLtMatrixLayoutOpaque_t* B, const cublasLtMatrixLayoutOpaque_t* C,
                             const cublasLtMatrixLayoutOpaque_t* D, GemmProblem* out) {
  // The subset: f32 compute and scale with host alpha/beta; TRANSC "currently only CUBLAS_OP_N is
  // supported"; the DEFAULT, BIAS and GELU epilogues (GELU, GELU_BIAS, GELU_AUX, GELU_AUX_BIAS,
  // DGELU, DGELU_BGRAD).
  if (desc->compute != CUBLAS_COMPUTE_32F && desc->compute != CUBLAS_COMPUTE_32F_PEDANTIC)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (desc->scale != CUDA_R_32F || desc->pointer_mode != CUBLASLT_POINTER_MODE_HOST || desc->transc != CUBLAS_OP_N ||
      desc->fill != CUBLAS_FILL_MODE_FULL)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const Epilogue epi = decode_epilogue(desc->epilogue);
  if (!epi.known) return CUBLAS_STATUS_NOT_SUPPORTED;
  for (const auto* l : {A, B, C, D}) {
    if (l->order != CUBLASLT_ORDER_COL || l->plane_offset != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    // ROWS / COLS: "usually only values that can be expressed as int32_t are supported".
    if (l->rows > uint64_t(INT_MAX) || l->cols > uint64_t(INT_MAX)) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  // f32 compute: A and B of one type in {32F, 16F, 16BF}; C and D of A's type or 32F; the bias
  // "the same type as the elements of output matrix (Dtype)" (BIAS_DATA_TYPE -1: D's type).
  if (A->type != B->type || !is_input_type(A->type) || C->type != D->type ||
      (D->type != A->type && D->type != CUDA_R_32F))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool bias = epi.bias || epi.bgrad;
  if (const cublasStatus_t s = check_epilogue_vectors(desc, D, epi); s != CUBLAS_STATUS_SUCCESS) return s;

  auto op_ok = [](int32_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; };
  if (!op_ok(desc->transa) || !op_ok(desc->transb)) return CUBLAS_STATUS_INVALID_VALUE;
  // LD: "must be large enough so that matrix memory locations are not overlapping (e.g. greater
  // or equal to CUBLASLT_MATRIX_LAYOUT_ROWS in case of CUBLASLT_ORDER_COL)"; batch counts and
  // strides as documented (count >= 1, stride non-negative), the same count for every matrix.
  for (const auto* l : {A, B, C, D})
    if (l->ld < int64_t(l->rows) || l->ld < 0 || l->batch < 1 || l->stride < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (A->batch != D->batch || B->batch != D->batch || C->batch != D->batch || desc->bias_stride < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  // Shapes: op(A) m x k, op(B) k x n, C and D m x n. (CUBLAS_OP_C is CUBLAS_OP_T for real types.)
  const bool ta = desc->transa != CUBLAS_OP_N, tb = desc->transb != CUBLAS_OP_N;
  const int64_t m = int64_t(D->rows), n = int64_t(D->cols);
  const int64_t a_rows = int64_t(ta ? A->cols : A->rows), k = int64_t(ta ? A->rows : A->cols);
  const int64_t b_rows = int64_t(tb ? B->cols : B->rows), b_cols = int64_t(tb ? B->rows : B->cols);
  if (a_rows != m || b_rows != k || b_cols != n || C->rows != D->rows || C->cols != D->cols)
    return CUBLAS_STATUS_INVALID_VALUE;

  GemmProblem& p = *out;
  p.trans_a = ta;
  p.trans_b = tb;
  p.m = m;
  p.n = n;
  p.k = k;
  p.batch = D->batch;
  p.a = as_matrix(A, nullptr);
  p.b = as_matrix(B, nullptr);
  p.c = as_matrix(C, nullptr);
  p.d = as_matrix(D, nullptr);
  p.bias = bias ? desc->bias : nullptr;
  p.bias_type = cudaDataType(D->type);
  p.bias_stride = desc->bias_stride;
  p.act = epi.act;
  p.bgrad = epi.bgrad;
  p.aux = epi.aux ? desc->aux : nullptr;
  p.aux_type = cudaDataType(D->type);
  p.aux_ld = desc->aux_ld;
  p.aux_stride = desc->aux_stride;
  return CUBLAS_STATUS_SUCCESS;
}

const char* const kOperand[4] = {"A", "B", "C", "D"};
const char* const kAlignPref[4] = {
    "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES", "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES",
    "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES", "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES"};

// The first batch of an operand whose address is not a multiple of `promised`, or -1.
int64_t misaligned_batch(const void* ptr, int64_t stride_bytes, int64_t batch, uint32_t promised) {
  if (promised <= 1) return -1;
  if (reinterpret_cast<uintptr_t>(ptr) % promised != 0) return 0;
  if (batch > 1 && uint64_t(stride_bytes) % promised != 0) return 1;
  return -1;
}

// A vector of the epilogue (the bias, the GELU input matrix) less aligned, in some batch, than the
// heuristic took it for: reported. The heuristic reads its alignment from the pointer (and batch
// stride) the descriptor holds when it is called.
bool vector_aligned(const char* what, const char* attr, const void* ptr, int64_t stride_bytes, int64_t batch,
                    uint32_t promised) {
  const int64_t bad = misaligned_batch(ptr, stride_bytes, batch, promised);
  if (bad < 0) return true;
  std::ostringstream m;
  m << "cublasLtMatmul: the " << what << " (CUBLASLT_MATMUL_DESC_" << attr << ", batch " << bad << ") is at "
    << describe_alignment(static_cast<const char*>(ptr) + bad * stride_bytes)
    << ", but cublasLtMatmulAlgoGetHeuristic chose the algorithm for one aligned to " << promised
    << " bytes: it takes the expected alignment from the " << attr
    << " value (and batch stride) the descriptor holds when it is called, a null pointer counting as fully aligned "
       "(256 bytes). Set "
    << attr << " to the real buffer (or one equally aligned) before asking the heuristic.";
  report_violation("misaligned operand", m.str());
  return false;
}

// Holds cublasLtMatmul to the alignments the heuristic was promised (the vgpu's check: on a GPU
// the algorithm's vector loads would fault or misbehave). Reports each broken promise.
bool check_alignments(const GemmProblem& p, const AlgoRecord& algo) {
  bool ok = true;
  const Matrix* ms[4] = {&p.a, &p.b, &p.c, &p.d};
  for (int i = 0; i < 4; ++i) {
    const Matrix& x = *ms[i];
    if (i == 2 && p.beta == 0.0f) continue;  // C is not read
    const int64_t bad = misaligned_batch(x.ptr, x.stride * int64_t(dtype_size(x.type)), p.batch, algo.align[i]);
    if (bad < 0) continue;
    const void* at = static_cast<const char*>(x.ptr) + bad * x.stride * int64_t(dtype_size(x.type));
    std::ostringstream m;
    m << "cublasLtMatmul: " << kOperand[i] << " (batch " << bad << ") is at " << describe_alignment(at)
      << ", but the algorithm passed in was chosen by cublasLtMatmulAlgoGetHeuristic for " << kOperand[i]
      << " aligned to " << algo.align[i] << " bytes (" << kAlignPref[i]
      << ", 256 when not set). The algorithm may assume that alignment; on a GPU its vector loads and stores "
         "would fault with a misaligned address or read wrong data. Query the heuristic with the alignment "
         "the operand really has (every batch: pointer and batch stride).";
    report_violation("misaligned operand", m.str());
    ok = false;
  }
  if (p.aux && !vector_aligned("GELU input matrix", "EPILOGUE_AUX_POINTER", p.aux,
                               p.aux_stride * int64_t(dtype_size(p.aux_type)), p.batch, algo.aux_align))
    ok = false;
  if (p.bias && !vector_aligned("bias", "BIAS_POINTER", p.bias, p.bias_stride * int64_t(dtype_size(p.bias_type)),
                                p.batch, algo.bias_align))
    ok = false;
  return ok;
}

}  // namespace

bool epilogue_adds_bias(uint32_t e) { return decode_epilogue(e).bias; }
bool epilogue_has_aux(uint32_t e) { return decode_epilogue(e).aux; }

}  // namespace vgpu::blas

using vgpu::blas::Kind;

extern "C" {

// cublasLtMatmulAlgoGetHeuristic: CUBLAS_STATUS_INVALID_VALUE "if requestedAlgoCount is less or
// equal to zero"; CUBLAS_STATUS_NOT_SUPPORTED (and *returnAlgoCount 0) when no algorithm fits the
// configuration. Otherwise one result: needs no workspace, state SUCCESS.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
  constexpr cublasStatus_t kInvalid = CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t h = vgpu::blas::check_objects(
      "cublasLtMatmulAlgoGetHeuristic", {{lightHandle, Kind::LtHandle, "lightHandle", CUBLAS_STATUS_NOT_INITIALIZED},
                                         {operationDesc, Kind::MatmulDesc, "operationDesc", kInvalid},
                                         {Adesc, Kind::MatrixLayout, "Adesc", kInvalid},
                                         {Bdesc, Kind::MatrixLayout, "Bdesc", kInvalid},
                                         {Cdesc, Kind::MatrixLayout, "Cdesc", kInvalid},
                                         {Ddesc, Kind::MatrixLayout, "Ddesc", kInvalid},
                                         {preference, Kind::Preference, "preference", kInvalid}});
  if (h != CUBLAS_STATUS_SUCCESS) return h;
  if (!returnAlgoCount || !heuristicResultsArray || requestedAlgoCount < 1) return kInvalid;
  *returnAlgoCount = 0;
  vgpu::blas::GemmProblem p;
  const cublasStatus_t s = vgpu::blas::build_problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (s != CUBLAS_STATUS_SUCCESS) return s;

  vgpu::blas::AlgoRecord rec;
  for (int i = 0; i < 4; ++i) rec.align[i] = preference->align[i];
  // BIAS_POINTER: "Routines that don't dereference this pointer, like
  // cublasLtMatmulAlgoGetHeuristic() depend on its value to determine expected pointer alignment."
  // (With batches, every batch's bias: the batch stride counts as well.)
  rec.bias_align = operationDesc->bias ? vgpu::blas::alignment_of(operationDesc->bias) : 256;
  // AUX_POINTER likewise ("depend on its value to determine expected pointer alignment").
  rec.aux_align = operationDesc->aux ? vgpu::blas::alignment_of(operationDesc->aux) : 256;
  if (p.batch > 1 && operationDesc->aux_stride != 0) {
    const uint64_t stride_bytes = uint64_t(operationDesc->aux_stride) * vgpu::blas::dtype_size(p.aux_type);
    rec.aux_align = std::min(rec.aux_align, vgpu::blas::alignment_of(reinterpret_cast<const void*>(stride_bytes)));
  }
  if (p.batch > 1 && operationDesc->bias_stride != 0) {
    const uint64_t stride_bytes = uint64_t(operationDesc->bias_stride) * vgpu::blas::dtype_size(p.bias_type);
    rec.bias_align = std::min(rec.bias_align, vgpu::blas::alignment_of(reinterpret_cast<const void*>(stride_bytes)));
  }
  cublasLtMatmulHeuristicResult_t r{};
  r.algo = vgpu::blas::encode_algo(rec);
  r.workspaceSize = 0;
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  heuristicResultsArray[0] = r;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

// cublasLtMatmul: D = alpha op(A) op(B) + beta C (+ bias), queued on `stream`. The descriptor and
// layouts are read now (the caller may change them as soon as this returns); alpha and beta are
// host values (CUBLASLT_POINTER_MODE_HOST). A null algo means an implicit heuristic, which fits
// the operands as they are (so no alignment promise is checked).
cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B, cublasLtMatrixLayout_t Bdesc,
                              const void* beta, const void* C, cublasLtMatrixLayout_t Cdesc, void* D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
  constexpr cublasStatus_t kInvalid = CUBLAS_STATUS_INVALID_VALUE;
  const cublasStatus_t h = vgpu::blas::check_objects(
      "cublasLtMatmul", {{lightHandle, Kind::LtHandle, "lightHandle", CUBLAS_STATUS_NOT_INITIALIZED},
                         {computeDesc, Kind::MatmulDesc, "computeDesc", kInvalid},
                         {Adesc, Kind::MatrixLayout, "Adesc", kInvalid},
                         {Bdesc, Kind::MatrixLayout, "Bdesc", kInvalid},
                         {Cdesc, Kind::MatrixLayout, "Cdesc", kInvalid},
                         {Ddesc, Kind::MatrixLayout, "Ddesc", kInvalid}});
  if (h != CUBLAS_STATUS_SUCCESS) return h;
  if (!alpha || !beta) return kInvalid;
  vgpu::blas::GemmCall call;
  call.api = "cublasLtMatmul";
  call.stream = stream;
  vgpu::blas::GemmProblem& p = call.p;
  const cublasStatus_t s = vgpu::blas::build_problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (s != CUBLAS_STATUS_SUCCESS) return s;
  p.alpha = *static_cast<const float*>(alpha);
  p.beta = *static_cast<const float*>(beta);
  p.a.ptr = A;
  p.b.ptr = B;
  p.c.ptr = C;
  p.d.ptr = D;
  // In-place (C == D) needs C and D laid out alike.
  if (C == D && (Cdesc->ld != Ddesc->ld || Cdesc->stride != Ddesc->stride || Cdesc->type != Ddesc->type))
    return kInvalid;
  // The BIAS and BGRAD epilogues need their bias vector, the AUX ones their matrix.
  if ((p.bias == nullptr && (p.bgrad || vgpu::blas::epilogue_adds_bias(computeDesc->epilogue))) ||
      (p.aux == nullptr && vgpu::blas::epilogue_has_aux(computeDesc->epilogue)))
    return kInvalid;
  // INVALID_VALUE "if the parameters are unexpectedly NULL, in conflict or in an impossible configuration".
  if (workspaceSizeInBytes > 0 && !workspace) return kInvalid;
  if (algo) {
    vgpu::blas::AlgoRecord rec;
    if (!vgpu::blas::decode_algo(*algo, &rec)) {
      vgpu::report_violation("invalid algorithm",
                             "cublasLtMatmul: algo does not hold an algorithm returned by "
                             "cublasLtMatmulAlgoGetHeuristic (uninitialised or corrupted cublasLtMatmulAlgo_t).");
      return kInvalid;
    }
    if (!vgpu::blas::check_alignments(p, rec)) return kInvalid;
  }
  call.workspace = workspace;
  call.workspace_bytes = workspaceSizeInBytes;
  return vgpu::blas::submit_gemm(call);
}

}  // extern "C"
