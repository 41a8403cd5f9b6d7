// Queues a validated GEMM on its stream with the range, race and initialisation checks the vgpu
// adds (see submit.h).
#include "cublas/submit.h"

#include <vgpu/runtime.h>

#include <sstream>
#include <vector>

#include "cublas/dtype.h"

namespace vgpu::blas {
namespace {

struct Operand {
  const char* name;  // "A", "B", "C", "D", "bias"
  Matrix m;
  int64_t batch;
  Access access;
  bool used;
};

// Calls fn(ptr, bytes) for each contiguous run of the elements the matrix really holds (the
// columns of every batch; padding rows between columns and batches excluded).
template <class Fn>
void for_each_run(const Matrix& m, int64_t batch, Fn fn) {
  const size_t es = dtype_size(m.type);
  const char* base = static_cast<const char*>(m.ptr);
  if (m.rows == 0 || m.cols == 0 || batch == 0) return;
  const bool packed_cols = m.ld == m.rows || m.cols == 1;
  if (packed_cols && (batch == 1 || m.stride == m.rows * m.cols)) {
    fn(base, size_t(extent_elements(m, batch)) * es);
    return;
  }
  for (int64_t i = 0; i < batch; ++i) {
    const char* b = base + i * m.stride * int64_t(es);
    if (packed_cols) {
      fn(b, size_t(m.rows * m.cols) * es);
      continue;
    }
    for (int64_t j = 0; j < m.cols; ++j) fn(b + j * m.ld * int64_t(es), size_t(m.rows) * es);
  }
}

}  // namespace

int64_t extent_elements(const Matrix& m, int64_t batch) {
  if (m.rows == 0 || m.cols == 0 || batch == 0) return 0;
  return (batch - 1) * m.stride + (m.cols - 1) * m.ld + m.rows;
}

uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  uint32_t al = 1;
  while (al < 256 && a % (al * 2) == 0) al *= 2;
  return al;
}

std::string describe_alignment(const void* p) {
  std::ostringstream m;
  m << p << ", aligned to " << alignment_of(p) << (alignment_of(p) == 256 ? "+" : "") << " bytes";
  return m.str();
}

cublasStatus_t submit_gemm(const GemmCall& call) {
  const GemmProblem& p = call.p;
  const bool product = p.m > 0 && p.n > 0 && p.batch > 0;
  Matrix bias{p.bias, p.bias_type, p.m, 1, p.m, p.bias_stride};
  Matrix aux{p.aux, p.aux_type, p.m, p.n, p.aux_ld, p.aux_stride};
  const bool writes_aux = p.act == Activation::Gelu;
  // What the GPU kernel touches: A and B when there is a product term, C when beta != 0 (BLAS:
  // "when beta is zero, C does not have to be a valid input"), the bias (written by BGRAD), the
  // GELU input matrix (written by GELU_AUX, read by DGELU), and D.
  const Operand ops[] = {
      {"A", p.a, p.batch, Access::Read, product && p.k > 0},
      {"B", p.b, p.batch, Access::Read, product && p.k > 0},
      {"C", p.c, p.batch, Access::Read, product && p.beta != 0.0f},
      {"bias", bias, p.bias_stride == 0 ? 1 : p.batch, p.bgrad ? Access::Write : Access::Read,
       product && p.bias != nullptr},
      {"aux", aux, p.batch, writes_aux ? Access::Write : Access::Read, product && p.aux != nullptr},
      {"D", p.d, p.batch, Access::Write, product},
  };
  bool ok = true;
  std::vector<Range> ranges;
  ranges.reserve(6);
  const std::string api = call.api;
  for (const Operand& o : ops) {
    if (!o.used) continue;
    const size_t bytes = size_t(extent_elements(o.m, o.batch)) * dtype_size(o.m.type);
    // The vgpu's own rule: the whole extent over all batches must lie in one device allocation.
    if (!check_range(o.m.ptr, bytes, api + " " + o.name)) ok = false;
    ranges.push_back(Range{o.m.ptr, bytes, o.access});
  }
  if (call.workspace && call.workspace_bytes > 0 &&
      !check_range(call.workspace, call.workspace_bytes, api + " workspace"))
    ok = false;
  if (!ok) return CUBLAS_STATUS_INVALID_VALUE;
  if (!product) return CUBLAS_STATUS_SUCCESS;  // nothing to compute or touch

  enqueue(call.stream, capture_site(call.api), std::move(ranges), [call, bias, aux, writes_aux]() -> cudaError_t {
    const GemmProblem& q = call.p;
    const std::string api = call.api;
    // Reads of never-written device memory are reported (checked here, on the worker, so that
    // earlier work of the stream has written what it writes).
    auto check = [&](const char* name, const Matrix& m, int64_t batch) {
      const std::string what = api + " " + name;
      for_each_run(m, batch, [&](const void* ptr, size_t bytes) { check_initialized(ptr, bytes, what); });
    };
    if (q.k > 0) {
      check("A", q.a, q.batch);
      check("B", q.b, q.batch);
    }
    if (q.beta != 0.0f) check("C", q.c, q.batch);
    if (q.bias && !q.bgrad) check("bias", bias, q.bias_stride == 0 ? 1 : q.batch);
    if (q.aux && !writes_aux) check("aux", aux, q.batch);
    {
      const OneBlasThread one;
      compute_gemm(q);
    }
    auto written = [](const void* ptr, size_t bytes) { mark_initialized(ptr, bytes); };
    for_each_run(q.d, q.batch, written);
    if (q.aux && writes_aux) for_each_run(aux, q.batch, written);
    if (q.bias && q.bgrad) for_each_run(bias, q.bias_stride == 0 ? 1 : q.batch, written);
    return cudaSuccess;
  }, /*self_contained=*/true);
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace vgpu::blas
