// The GEMM arithmetic over OpenBLAS: widen 16-bit operands to f32, one cblas_sgemm per batch,
// the bias and GELU epilogues in f32, then a single round-to-nearest-even store into D's type.
#include "cublas/gemm_core.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cublas/dtype.h"

namespace vgpu::blas {
namespace {

// Per-thread scratch, grown on demand and kept: no allocation per product once warm.
struct Scratch {
  std::vector<float> a, b, t;
};
Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

float* grow(std::vector<float>& v, int64_t n) {
  if (v.size() < size_t(n)) v.resize(size_t(n));
  return v.data();
}

const char* at(const void* base, cudaDataType t, int64_t elements) {
  return static_cast<const char*>(base) + elements * int64_t(dtype_size(t));
}

// Batch i of a stored operand as f32 with its leading dimension: the memory itself for f32,
// else a compact widened copy in `buf`.
const float* as_f32(const Matrix& x, int64_t i, std::vector<float>& buf, int64_t& ld) {
  const void* base = at(x.ptr, x.type, i * x.stride);
  if (x.type == CUDA_R_32F) {
    ld = x.ld;
    return static_cast<const float*>(base);
  }
  float* out = grow(buf, x.rows * x.cols);
  for (int64_t j = 0; j < x.cols; ++j)
    for (int64_t r = 0; r < x.rows; ++r) out[j * x.rows + r] = load_f32(base, x.type, j * x.ld + r);
  ld = std::max<int64_t>(1, x.rows);
  return out;
}

void add_bias(const GemmProblem& p, int64_t i, float* out, int64_t ldo) {
  if (!p.bias || p.bgrad) return;
  const void* bias = at(p.bias, p.bias_type, i * p.bias_stride);
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t r = 0; r < p.m; ++r) out[j * ldo + r] += load_f32(bias, p.bias_type, r);
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)

// The GELU epilogues on batch i's f32 result (gemm_core.h, Activation).
void activation(const GemmProblem& p, int64_t i, float* out, int64_t ldo) {
  if (p.act == Activation::None) return;
  void* aux = p.aux ? const_cast<char*>(at(p.aux, p.aux_type, i * p.aux_stride)) : nullptr;
  float* grad = nullptr;
  if (p.bgrad) {
    grad = grow(scratch().a, p.m);
    std::fill(grad, grad + p.m, 0.0f);
  }
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t r = 0; r < p.m; ++r) {
      float& v = out[j * ldo + r];
      if (p.act == Activation::Gelu) {
        if (aux) store_f32(aux, p.aux_type, j * p.aux_ld + r, v);
        v = 0.5f * v * (1.0f + std::tanh(kGeluC * (v + 0.044715f * v * v * v)));
      } else {
        const float x = load_f32(aux, p.aux_type, j * p.aux_ld + r);
        const float th = std::tanh(kGeluC * (x + 0.044715f * x * x * x));
        const float du = kGeluC * (1.0f + 3.0f * 0.044715f * x * x);
        v *= 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
        if (grad) grad[r] += v;
      }
    }
  if (grad) {
    void* bias = const_cast<char*>(at(p.bias, p.bias_type, i * p.bias_stride));
    for (int64_t r = 0; r < p.m; ++r) store_f32(bias, p.bias_type, r, grad[r]);
  }
}

// out (m x n, leading dimension ldo) = alpha op(A_i) op(B_i) + beta out, with out already holding
// C_i when beta != 0; BLAS semantics: beta == 0 ignores whatever out holds (NaN included).
void product(const GemmProblem& p, int64_t i, float* out, int64_t ldo) {
  if (p.k == 0 || p.alpha == 0.0f) {  // BLAS: no product term, out = beta out
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t r = 0; r < p.m; ++r) out[j * ldo + r] = p.beta == 0.0f ? 0.0f : p.beta * out[j * ldo + r];
    return;
  }
  Scratch& s = scratch();
  int64_t lda = 0, ldb = 0;
  const float* a = as_f32(p.a, i, s.a, lda);
  const float* b = as_f32(p.b, i, s.b, ldb);
  cblas_sgemm(CblasColMajor, p.trans_a ? CblasTrans : CblasNoTrans, p.trans_b ? CblasTrans : CblasNoTrans, blasint(p.m),
              blasint(p.n), blasint(p.k), p.alpha, a, blasint(lda), b, blasint(ldb), p.beta, out, blasint(ldo));
}

}  // namespace

void compute_gemm(const GemmProblem& p) {
  if (p.m == 0 || p.n == 0 || p.batch == 0) return;
  const bool read_c = p.beta != 0.0f;
  // D in f32 is computed in place when C is not read or is D itself (same layout).
  const bool in_place =
      p.d.type == CUDA_R_32F && (!read_c || (p.c.ptr == p.d.ptr && p.c.type == CUDA_R_32F && p.c.ld == p.d.ld &&
                                             (p.batch == 1 || p.c.stride == p.d.stride)));
  for (int64_t i = 0; i < p.batch; ++i) {
    if (in_place) {
      float* out = const_cast<float*>(reinterpret_cast<const float*>(at(p.d.ptr, p.d.type, i * p.d.stride)));
      product(p, i, out, p.d.ld);
      add_bias(p, i, out, p.d.ld);
      activation(p, i, out, p.d.ld);
      continue;
    }
    float* t = grow(scratch().t, p.m * p.n);
    if (read_c) {
      const void* c = at(p.c.ptr, p.c.type, i * p.c.stride);
      for (int64_t j = 0; j < p.n; ++j)
        for (int64_t r = 0; r < p.m; ++r) t[j * p.m + r] = load_f32(c, p.c.type, j * p.c.ld + r);
    }
    product(p, i, t, p.m);
    add_bias(p, i, t, p.m);
    activation(p, i, t, p.m);
    void* d = const_cast<char*>(at(p.d.ptr, p.d.type, i * p.d.stride));
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t r = 0; r < p.m; ++r) store_f32(d, p.d.type, j * p.d.ld + r, t[j * p.m + r]);
  }
}

// OpenBLAS's OpenMP build is safe to call from several threads at once, and it sizes each call's
// team from the calling thread's omp_get_max_threads() (a per-thread OpenMP setting), not from
// openblas_set_num_threads (process-wide, and overridden by the OpenMP value on every call).
// Every stream worker of every virtual device may run products concurrently, so on a small
// machine a team per worker would oversubscribe the cores many times over (and libgomp's idle
// threads spin); the parallelism here comes from the streams instead. So a product runs with the
// calling thread's OpenMP setting at one thread, restored afterwards (a product may run on a host
// thread, whose setting is ptdp's CPU backend's). The OpenMP functions are looked up at run time:
// libgomp is loaded with OpenBLAS, and the vgpu itself is not built with OpenMP.
namespace {
using SetThreads = void (*)(int);
using GetThreads = int (*)();
SetThreads omp_set() {
  static const auto f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  return f;
}
GetThreads omp_get() {
  static const auto f = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  return f;
}
thread_local int t_product_threads = 0;  // the setting while this thread's last product ran
}  // namespace

OneBlasThread::OneBlasThread() {
  if (!omp_set() || !omp_get()) return;
  saved_ = omp_get()();
  if (saved_ != 1) omp_set()(1);
  t_product_threads = omp_get()();
}

OneBlasThread::~OneBlasThread() {
  if (saved_ > 1) omp_set()(saved_);
}

int openmp_threads_of_last_product_for_testing() { return t_product_threads; }

}  // namespace vgpu::blas
