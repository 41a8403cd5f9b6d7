// The CUDA backend: each op (its arguments checked by Backend, op_contracts.cpp) queues the
// cuBLASLt products (gemm.h) and kernels (kernels.h) on the backend's stream.
#include "core/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "core/backend/cuda/cuda_check.h"
#include "core/backend/cuda/cudnn_attention.h"
#include "core/backend/cuda/device_allocator.h"
#include "core/backend/cuda/device_info.h"
#include "core/backend/cuda/gemm.h"
#include "core/backend/cuda/kernels.h"
#include "core/backend/cuda/op_profile.h"

namespace ptdp {
namespace {

using cuda::GemmShape;

char* bytes(const Tensor& t) { return static_cast<char*>(t.raw()); }

// The (query, key) pairs a block's causal mask leaves visible in one head of one sequence.
double visible_pairs(int sq, int sk, int64_t q_pos, int64_t k_pos, bool causal) {
  if (!causal) return double(sq) * sk;
  double n = 0;
  for (int64_t i = 0; i < sq; ++i) n += double(std::clamp<int64_t>(q_pos + i - k_pos + 1, 0, sk));
  return n;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device), alloc_(cuda::DeviceAllocator::for_device(device)) {
    PTDP_CUDA_CHECK(cudaSetDevice(device_));
    PTDP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    try {
      PTDP_CUDA_CHECK(cudaMallocHost(&host_scalar_, sizeof(double)));
      gemm_ = std::make_unique<cuda::GemmRunner>(device_, stream_);
      prof_ = cuda::OpProfile::from_env(device_);
    } catch (...) {
      if (host_scalar_) cudaFreeHost(host_scalar_);
      cudaStreamDestroy(stream_);
      throw;
    }
  }

  ~CudaBackend() override {
    sum_scratch_ = Tensor();
    rope_table_ = Tensor();
    cudaStreamSynchronize(stream_);
    cudnn_.reset();
    prof_.reset();  // writes PTDP_OP_PROFILE's rows
    for (cudaEvent_t e : marks_) cudaEventDestroy(e);
    gemm_.reset();
    alloc_.forget_stream(stream_);
    cudaStreamDestroy(stream_);
    cudaFreeHost(host_scalar_);
  }

  cudaStream_t stream() const { return stream_; }
  int device_index() const { return device_; }

  Device device() const override { return Device::CUDA; }
  std::string name() const override { return "cuda"; }
  std::span<const DType> compute_dtypes() const override {
    static constexpr DType kDtypes[] = {DType::F32, DType::BF16, DType::F16};
    return kDtypes;
  }

  Tensor empty(Shape shape, DType dtype) override {
    on_device();
    auto st = std::make_shared<Storage>();
    st->bytes = size_t(shape_numel(shape)) * dtype_size(dtype);
    st->device = Device::CUDA;
    st->ptr = alloc_.allocate(st->bytes, stream_);
    st->allocator = &alloc_;
    return Tensor::from_storage(std::move(st), std::move(shape), dtype);
  }

  void do_fill(Tensor& x, double value) override {
    on_device();
    cuda::OpScope r(prof_.get(), "fill", stream_);
    r.count(0, double(x.nbytes()));
    cuda::fill(x.raw(), x.dtype(), x.numel(), value, stream_);
  }

  void do_copy(Tensor& dst, const Tensor& src) override {
    const bool dd = dst.device() == Device::CUDA, sd = src.device() == Device::CUDA;
    if (!dd && !sd) return dst.copy_from(src);
    if (dst.numel() == 0) return;
    on_device();
    // Device to device: "copy" (HBM bytes read and written); host <-> device: "upload" / "download"
    // (the bytes that cross the bus).
    cuda::OpScope r(prof_.get(), dd && sd ? "copy" : dd ? "upload" : "download", stream_);
    r.count(0, dd && sd ? double(src.nbytes() + dst.nbytes()) : double(dd ? dst.nbytes() : src.nbytes()));
    if (dd && sd) {
      if (dst.dtype() == src.dtype())
        PTDP_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream_));
      else
        cuda::convert(dst.raw(), dst.dtype(), src.raw(), src.dtype(), dst.numel(), stream_);
      return;
    }
    if (dd) {  // host -> device, converted on the host first
      Tensor tmp;
      const Tensor* h = &src;
      if (src.dtype() != dst.dtype()) {
        tmp = Tensor::empty({src.numel()}, dst.dtype());
        tmp.copy_from(src);
        h = &tmp;
      }
      PTDP_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), h->raw(), dst.nbytes(), cudaMemcpyHostToDevice, stream_));
      PTDP_CUDA_CHECK(cudaStreamSynchronize(stream_));
      return;
    }
    // device -> host, converted on the host after
    if (src.dtype() == dst.dtype()) {
      PTDP_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), dst.nbytes(), cudaMemcpyDeviceToHost, stream_));
      PTDP_CUDA_CHECK(cudaStreamSynchronize(stream_));
      return;
    }
    Tensor tmp = Tensor::empty({src.numel()}, src.dtype());
    PTDP_CUDA_CHECK(cudaMemcpyAsync(tmp.raw(), src.raw(), src.nbytes(), cudaMemcpyDeviceToHost, stream_));
    PTDP_CUDA_CHECK(cudaStreamSynchronize(stream_));
    dst.copy_from(tmp);
  }

  int64_t mark() override {
    on_device();
    if (next_mark_ == marks_.size()) {
      cudaEvent_t e = nullptr;
      PTDP_CUDA_CHECK(cudaEventCreate(&e));
      marks_.push_back(e);
    }
    PTDP_CUDA_CHECK(cudaEventRecord(marks_[next_mark_], stream_));
    return int64_t(next_mark_++);
  }
  double elapsed_ms(int64_t from, int64_t to) override {
    PTDP_CHECK(from >= 0 && to >= 0 && size_t(from) < next_mark_ && size_t(to) < next_mark_,
               "elapsed_ms: marks {} and {} are not current (the backend holds {})", from, to, next_mark_);
    on_device();
    PTDP_CUDA_CHECK(cudaEventSynchronize(marks_[to]));
    float ms = 0;
    PTDP_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[from], marks_[to]));
    return ms;
  }
  void release_marks() override { next_mark_ = 0; }  // the events are reused

  void profile_restart() override {
    if (prof_) prof_->restart();
  }

  void synchronize() override {
    on_device();
    PTDP_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  void do_linear_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b) override {
    on_device();
    cuda::OpScope r(prof_.get(), "linear_forward", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    const double e = double(dtype_size(dt));
    r.count(2.0 * n * in * out, e * (double(n) * in + double(out) * in + double(n) * out + (b ? out : 0)));
    const GemmShape g{.trans_a = true, .trans_b = false, .m = out, .n = n, .k = in, .lda = in, .ldb = in,
                      .ldc = out, .ab = dt, .c = dt};
    gemm_->run(g, 1.0f, w.raw(), x.raw(), 0.0f, y.raw(), b ? b->raw() : nullptr);
  }

  void do_linear_backward(Tensor* dx, bool acc, Tensor& dw, Tensor* db, const Tensor& dy, const Tensor& x,
                          const Tensor& w) override {
    on_device();
    cuda::OpScope r(prof_.get(), "linear_backward", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    {
      const double e = double(dtype_size(dt)), nin = double(n) * in, nout = double(n) * out, w_el = double(out) * in;
      // dx = dy w (reads w, dy; writes dx, reads it too when accumulating); dw += dy^T x in f32; db.
      const double dx_bytes = dx ? e * (w_el + nout + nin * (acc ? 2 : 1)) : 0;
      r.count(2.0 * nin * out * (dx ? 2 : 1), dx_bytes + e * (nin + nout) + 8 * w_el + (db ? e * nout + 8.0 * out : 0));
    }
    if (dx) {  // dx = dy w
      const GemmShape g{.trans_a = false, .trans_b = false, .m = in, .n = n, .k = out, .lda = in, .ldb = out,
                        .ldc = in, .ab = dt, .c = dt};
      gemm_->run(g, 1.0f, w.raw(), dy.raw(), acc ? 1.0f : 0.0f, dx->raw());
    }
    {  // dw += dy^T x, in f32
      const GemmShape g{.trans_a = false, .trans_b = true, .m = in, .n = out, .k = n, .lda = in, .ldb = out,
                        .ldc = in, .ab = dt, .c = DType::F32};
      gemm_->run(g, 1.0f, x.raw(), dy.raw(), 1.0f, dw.raw());
    }
    if (db) {
      Tensor partials = empty({cuda::column_sum_chunks(n) * out}, DType::F32);
      cuda::column_sum_accumulate(db->data<float>(), dy.raw(), dt, n, out, partials.data<float>(), stream_);
    }
  }

  // fc and its GeLU in one cuBLASLt product (GELU_AUX_BIAS): writes pre and y, reads x, w, b.
  void do_linear_gelu_forward(Tensor& y, Tensor& pre, const Tensor& x, const Tensor& w, const Tensor& b) override {
    on_device();
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), in = x.dim(1), out = w.dim(0);
    const GemmShape g{.trans_a = true, .trans_b = false, .m = out, .n = n, .k = in, .lda = in, .ldb = in,
                      .ldc = out, .ab = dt, .c = dt};
    if (!gemm_->has_gelu(g, w.raw(), x.raw(), y.raw(), b.raw(), pre.raw(), false))
      return Backend::do_linear_gelu_forward(y, pre, x, w, b);  // no such cuBLASLt product: the two ops
    cuda::OpScope r(prof_.get(), "linear_gelu_forward", stream_);
    const double e = double(dtype_size(dt));
    r.count(2.0 * n * in * out, e * (double(n) * in + double(out) * in + 2.0 * n * out + out));  // the GEMM's FLOPs
    PTDP_CHECK(gemm_->run_gelu(g, w.raw(), x.raw(), y.raw(), b.raw(), pre.raw()), "linear_gelu_forward: no product");
  }

  // fc2's dw and db as linear_backward's (first: the next op is fc's linear_backward), then dpre =
  // (dy w2) gelu'(pre) in one cuBLASLt product (DGELU) in place of its dx and gelu_backward.
  void do_linear_gelu_backward(Tensor& dpre, Tensor& dw2, Tensor* db2, const Tensor& dy, const Tensor& y,
                               const Tensor& w2, const Tensor& pre) override {
    on_device();
    const DType dt = y.dtype();
    const int64_t n = y.dim(0), in = y.dim(1), out = w2.dim(0);
    const GemmShape g{.trans_a = false, .trans_b = false, .m = in, .n = n, .k = out, .lda = in, .ldb = out,
                      .ldc = in, .ab = dt, .c = dt};
    if (!gemm_->has_gelu(g, w2.raw(), dy.raw(), dpre.raw(), nullptr, pre.raw(), true))
      return Backend::do_linear_gelu_backward(dpre, dw2, db2, dy, y, w2, pre);
    do_linear_backward(nullptr, false, dw2, db2, dy, y, w2);
    cuda::OpScope r(prof_.get(), "linear_gelu_backward", stream_);
    const double e = double(dtype_size(dt));
    r.count(2.0 * n * in * out, e * (double(out) * in + double(n) * out + 2.0 * n * in));  // the GEMM's FLOPs
    PTDP_CHECK(gemm_->run_dgelu(g, w2.raw(), dy.raw(), dpre.raw(), pre.raw()), "linear_gelu_backward: no product");
  }

  void do_layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, const Tensor& x, const Tensor& g, const Tensor& b,
                            double eps) override {
    on_device();
    cuda::OpScope r(prof_.get(), "layernorm_forward", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), c = x.dim(1);
    r.count(8.0 * n * c, double(dtype_size(dt)) * (2.0 * n * c + 2.0 * c) + 8.0 * n);
    cuda::layernorm_forward(y.raw(), mean.data<float>(), rstd.data<float>(), x.raw(), g.raw(), b.raw(), dt, n, c,
                            static_cast<float>(eps), stream_);
  }

  void do_layernorm_backward(Tensor& dx, Tensor& dg, Tensor& db, const Tensor& dy, const Tensor& x, const Tensor& g,
                             const Tensor& mean, const Tensor& rstd, const Tensor* residual) override {
    on_device();
    cuda::OpScope r(prof_.get(), "layernorm_backward", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), c = x.dim(1);
    Tensor partials = empty({2 * cuda::column_sum_chunks(n) * c}, DType::F32);
    r.count(12.0 * n * c, double(dtype_size(dt)) * (3.0 * n * c + c) + 8.0 * n + 4.0 * partials.numel() * 2 + 16.0 * c);
    cuda::layernorm_backward(dx.raw(), dg.data<float>(), db.data<float>(), dy.raw(), x.raw(), g.raw(),
                             mean.data<float>(), rstd.data<float>(), residual ? residual->raw() : nullptr, dt, n, c,
                             partials.data<float>(), stream_);
  }

  void do_gelu_forward(Tensor& y, const Tensor& x) override {
    on_device();
    cuda::OpScope r(prof_.get(), "gelu_forward", stream_);
    const DType dt = x.dtype();
    r.count(12.0 * x.numel(), 2.0 * dtype_size(dt) * x.numel());
    cuda::gelu_forward(y.raw(), x.raw(), dt, x.numel(), stream_);
  }

  void do_gelu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) override {
    on_device();
    cuda::OpScope r(prof_.get(), "gelu_backward", stream_);
    const DType dt = x.dtype();
    r.count(20.0 * x.numel(), 3.0 * dtype_size(dt) * x.numel());
    cuda::gelu_backward(dx.raw(), x.raw(), dy.raw(), dt, x.numel(), stream_);
  }

  // x += r and the norm in one pass: x and r read, the sum and y written.
  void do_add_layernorm_forward(Tensor& y, Tensor& mean, Tensor& rstd, Tensor& x, const Tensor& r, const Tensor& g,
                                const Tensor& b, double eps) override {
    on_device();
    cuda::OpScope p(prof_.get(), "add_layernorm_forward", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), c = x.dim(1);
    p.count(9.0 * n * c, double(dtype_size(dt)) * (4.0 * n * c + 2.0 * c) + 8.0 * n);
    cuda::add_layernorm_forward(y.raw(), mean.data<float>(), rstd.data<float>(), x.raw(), r.raw(), g.raw(), b.raw(), dt,
                                n, c, static_cast<float>(eps), stream_);
  }

  void do_add_rmsnorm_forward(Tensor& y, Tensor& rstd, Tensor& x, const Tensor& r, const Tensor& g,
                              double eps) override {
    on_device();
    cuda::OpScope p(prof_.get(), "add_rmsnorm_forward", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), c = x.dim(1);
    p.count(5.0 * n * c, double(dtype_size(dt)) * (4.0 * n * c + c) + 4.0 * n);
    cuda::add_rmsnorm_forward(y.raw(), rstd.data<float>(), x.raw(), r.raw(), g.raw(), dt, n, c,
                              static_cast<float>(eps), stream_);
  }

  void do_rmsnorm_forward(Tensor& y, Tensor& rstd, const Tensor& x, const Tensor& g, double eps) override {
    on_device();
    cuda::OpScope r(prof_.get(), "rmsnorm_forward", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), c = x.dim(1);
    r.count(4.0 * n * c, double(dtype_size(dt)) * (2.0 * n * c + c) + 4.0 * n);
    cuda::rmsnorm_forward(y.raw(), rstd.data<float>(), x.raw(), g.raw(), dt, n, c, static_cast<float>(eps), stream_);
  }

  void do_rmsnorm_backward(Tensor& dx, Tensor& dg, const Tensor& dy, const Tensor& x, const Tensor& g,
                           const Tensor& rstd, const Tensor* residual) override {
    on_device();
    cuda::OpScope r(prof_.get(), "rmsnorm_backward", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), c = x.dim(1);
    Tensor partials = empty({cuda::column_sum_chunks(n) * c}, DType::F32);
    r.count(8.0 * n * c, double(dtype_size(dt)) * (4.0 * n * c + c) + 4.0 * n + 8.0 * partials.numel() + 8.0 * c);
    cuda::rmsnorm_backward(dx.raw(), dg.data<float>(), dy.raw(), x.raw(), g.raw(), rstd.data<float>(),
                           residual ? residual->raw() : nullptr, dt, n, c, partials.data<float>(), stream_);
  }

  // cos and sin come from a table [2, s, hd/2] computed once per (s, hd, theta) on the device in
  // f64 and kept (the last one) by the backend.
  void do_rope(Tensor& y, const Tensor& x, int s, int a, int hd, double theta, bool inverse) override {
    on_device();
    cuda::OpScope r(prof_.get(), "rope", stream_);
    const DType dt = x.dtype();
    if (x.numel() == 0) return;
    if (!rope_table_.defined() || rope_s_ != s || rope_hd_ != hd || rope_theta_ != theta) {
      rope_table_ = empty({2, s, hd / 2}, DType::F32);
      cuda::rope_table(rope_table_.data<float>(), s, hd, theta, stream_);
      rope_s_ = s;
      rope_hd_ = hd;
      rope_theta_ = theta;
    }
    r.count(4.0 * x.numel(), 2.0 * dtype_size(dt) * x.numel() + 4.0 * s * hd);  // q and k rotated, v copied
    cuda::rope(y.raw(), x.raw(), rope_table_.data<float>(), dt, x.dim(0), s, a, hd, inverse, stream_);
  }

  void do_swiglu_forward(Tensor& y, const Tensor& x) override {
    on_device();
    cuda::OpScope r(prof_.get(), "swiglu_forward", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), f = x.dim(1) / 2;
    r.count(8.0 * n * f, 3.0 * dtype_size(dt) * n * f);
    cuda::swiglu_forward(y.raw(), x.raw(), dt, n, f, stream_);
  }

  void do_swiglu_backward(Tensor& dx, const Tensor& x, const Tensor& dy) override {
    on_device();
    cuda::OpScope r(prof_.get(), "swiglu_backward", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0), f = x.dim(1) / 2;
    r.count(16.0 * n * f, 5.0 * dtype_size(dt) * n * f);
    cuda::swiglu_backward(dx.raw(), x.raw(), dy.raw(), dt, n, f, stream_);
  }

  void do_gqa_expand(Tensor& y, const Tensor& x, int a, int g, int hd) override {
    on_device();
    cuda::OpScope r(prof_.get(), "gqa_expand", stream_);
    const DType dt = x.dtype();
    const int64_t n = x.dim(0);
    r.count(0, dtype_size(dt) * double(n) * (3.0 * a + a + 2.0 * g) * hd);
    cuda::gqa_expand(y.raw(), x.raw(), dt, n, a, g, hd, stream_);
  }

  void do_gqa_reduce(Tensor& dx, const Tensor& dy, int a, int g, int hd) override {
    on_device();
    cuda::OpScope r(prof_.get(), "gqa_reduce", stream_);
    const DType dt = dx.dtype();
    const int64_t n = dx.dim(0);
    r.count(2.0 * n * a * hd, dtype_size(dt) * double(n) * (3.0 * a + a + 2.0 * g) * hd);
    cuda::gqa_reduce(dx.raw(), dy.raw(), dt, n, a, g, hd, stream_);
  }

  // The heads of the whole micro-batch at once: q, k, v permuted to one [s, 3 hd] block per
  // (sequence, head), so that each product is a single strided batch of b * a GEMMs.
  void do_attention_forward(Tensor& y, Tensor& probs, const Tensor& qkv, int b, int s, int a, int hd) override {
    on_device();
    cuda::OpScope r(prof_.get(), "attention_forward", stream_);
    const DType dt = qkv.dtype();
    const int64_t n = int64_t(b) * s, hl = int64_t(a) * hd, ss = int64_t(s) * s;
    if (b == 0) return;
    const size_t e = dtype_size(dt);
    const int64_t heads = int64_t(b) * a, w = 3 * int64_t(hd);
    const float scale = 1.0f / std::sqrt(float(hd));
    Tensor qh = empty({heads * s * w}, dt), yh = empty({heads * s * hd}, dt);
    {  // permute in (3 nh read and written), q k^T (reads q, k; writes the full s x s scores), the softmax
       // in place, p v (reads p, v; writes y), permute out (nh read and written)
      const double nh = double(n) * hl, p = double(heads) * ss;
      r.count(4.0 * p * hd, double(e) * (6 * nh + (2 * nh + p) + 2 * p + (p + 2 * nh) + 2 * nh));
    }
    cuda::permute_heads(qh.raw(), qkv.raw(), dt, b, s, a, w, true, stream_);
    // scores = q k^T / sqrt(hd)
    const GemmShape qk{.trans_a = true, .trans_b = false, .m = s, .n = s, .k = hd, .lda = w, .ldb = w, .ldc = s,
                       .batch = heads, .stride_a = s * w, .stride_b = s * w, .stride_c = ss, .ab = dt, .c = dt};
    gemm_->run(qk, scale, bytes(qh) + hd * e, qh.raw(), 0.0f, probs.raw());
    cuda::causal_softmax_forward(probs.raw(), dt, heads * s, s, stream_);
    // y = p v
    const GemmShape pv{.trans_a = false, .trans_b = false, .m = hd, .n = s, .k = s, .lda = w, .ldb = s, .ldc = hd,
                       .batch = heads, .stride_a = s * w, .stride_b = ss, .stride_c = s * hd, .ab = dt, .c = dt};
    gemm_->run(pv, 1.0f, bytes(qh) + 2 * hd * e, probs.raw(), 0.0f, yh.raw());
    cuda::permute_heads(y.raw(), yh.raw(), dt, b, s, a, hd, false, stream_);
  }

  void do_attention_backward(Tensor& dqkv, const Tensor& dy, const Tensor& qkv, const Tensor& probs, int b, int s,
                             int a, int hd) override {
    on_device();
    cuda::OpScope r(prof_.get(), "attention_backward", stream_);
    const DType dt = qkv.dtype();
    const int64_t n = int64_t(b) * s, hl = int64_t(a) * hd, ss = int64_t(s) * s;
    if (b == 0) return;
    const size_t e = dtype_size(dt);
    const int64_t heads = int64_t(b) * a, w = 3 * int64_t(hd);
    const float scale = 1.0f / std::sqrt(float(hd));
    Tensor qh = empty({heads * s * w}, dt), dqh = empty({heads * s * w}, dt), dyh = empty({heads * s * hd}, dt);
    Tensor ds = empty({heads, s, s}, dt);  // dP, then dS in place
    {  // permutes in (3 nh and nh, read and written), dP = dY V^T, dV = P^T dY, the softmax backward
       // (reads dP and P, writes dS), dQ = dS K, dK = dS^T Q, permute out (3 nh read and written)
      const double nh = double(n) * hl, p = double(heads) * ss;
      r.count(8.0 * p * hd, double(e) * (8 * nh + (2 * nh + p) + (nh + p + nh) + 3 * p + 2 * (p + 2 * nh) + 6 * nh));
    }
    cuda::permute_heads(qh.raw(), qkv.raw(), dt, b, s, a, w, true, stream_);
    cuda::permute_heads(dyh.raw(), dy.raw(), dt, b, s, a, hd, true, stream_);
    const char* q = bytes(qh);
    char* dq = bytes(dqh);
    // dP = dY V^T
    const GemmShape dp{.trans_a = true, .trans_b = false, .m = s, .n = s, .k = hd, .lda = w, .ldb = hd, .ldc = s,
                       .batch = heads, .stride_a = s * w, .stride_b = s * hd, .stride_c = ss, .ab = dt, .c = dt};
    gemm_->run(dp, 1.0f, q + 2 * hd * e, dyh.raw(), 0.0f, ds.raw());
    // dV = P^T dY
    const GemmShape dv{.trans_a = false, .trans_b = true, .m = hd, .n = s, .k = s, .lda = hd, .ldb = s, .ldc = w,
                       .batch = heads, .stride_a = s * hd, .stride_b = ss, .stride_c = s * w, .ab = dt, .c = dt};
    gemm_->run(dv, 1.0f, dyh.raw(), probs.raw(), 0.0f, dq + 2 * hd * e);
    cuda::causal_softmax_backward(ds.raw(), probs.raw(), dt, heads * s, s, scale, stream_);
    // dQ = dS K, dK = dS^T Q
    const GemmShape dqs{.trans_a = false, .trans_b = false, .m = hd, .n = s, .k = s, .lda = w, .ldb = s, .ldc = w,
                        .batch = heads, .stride_a = s * w, .stride_b = ss, .stride_c = s * w, .ab = dt, .c = dt};
    gemm_->run(dqs, 1.0f, q + hd * e, ds.raw(), 0.0f, dq);
    const GemmShape dks{.trans_a = false, .trans_b = true, .m = hd, .n = s, .k = s, .lda = w, .ldb = s, .ldc = w,
                        .batch = heads, .stride_a = s * w, .stride_b = ss, .stride_c = s * w, .ab = dt, .c = dt};
    gemm_->run(dks, 1.0f, q, ds.raw(), 0.0f, dq + hd * e);
    cuda::permute_heads(dqkv.raw(), dqh.raw(), dt, b, s, a, w, false, stream_);
  }

  std::string cudnn_attention_unavailable() const override { return cuda::cudnn_unavailable(); }
  void set_cudnn_attention(bool on) override {
    if (!on) {
      cudnn_.reset();
    } else if (!cudnn_) {
      on_device();
      cudnn_ = std::make_unique<cuda::CudnnAttention>(stream_);
    }
  }
  // Builds the block's graphs where cuDNN is available (switching cuDNN attention on; the caller
  // switches it off again if it picks other kernels).
  std::string cudnn_attention_refusal(int b, int s, int a, int g, int hd, DType dt) override {
    if (std::string why = cudnn_attention_unavailable(); !why.empty()) return why;
    set_cudnn_attention(true);
    return cudnn_->refusal(cuda::CudnnBlock{b, s, s, a, g, hd, true, dt});
  }

  // Block attention: cuDNN's fused attention where it is switched on and takes the block (a causal
  // block on the diagonal, or one whose every key is visible), else ptdp's kernel
  // (flash_attention.cu: tiled, online softmax, no [s, s] buffer). Counted as the products over the
  // visible (query, key) pairs and one pass over the inputs and outputs.
  void do_flash_attention_forward(Tensor& y, Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, int b,
                                  int sq, int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos,
                                  bool causal) override {
    on_device();
    const DType dt = q.dtype();
    const std::optional<cuda::CudnnBlock> blk = cudnn_block(b, sq, sk, a, g, hd, q_pos, k_pos, causal, dt);
    cuda::OpScope r(prof_.get(), blk ? "cudnn_attention_forward" : "flash_attention_forward", stream_);
    const double pairs = double(b) * a * visible_pairs(sq, sk, q_pos, k_pos, causal);
    r.count(4.0 * pairs * hd, double(dtype_size(dt)) * (q.numel() + k.numel() + v.numel() + y.numel()) +
                                  4.0 * lse.numel());
    if (blk) {
      Tensor ws = workspace(cudnn_->forward_workspace(*blk));
      cudnn_->forward(*blk, y.raw(), lse.data<float>(), q.raw(), k.raw(), v.raw(), ws.defined() ? ws.raw() : nullptr);
      return;
    }
    const cuda::FlashShape s{b, sq, sk, a, g, hd, q_pos, k_pos, causal};
    cuda::flash_attention_forward(y.raw(), lse.data<float>(), q.raw(), k.raw(), v.raw(), dt, s, stream_);
  }

  // cuDNN's blocks write dq, dk and dv themselves (no zeroing, no temporaries, no add).
  bool do_flash_attention_backward_overwrite(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dy, const Tensor& q,
                                             const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse, int b,
                                             int sq, int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos,
                                             bool causal) override {
    on_device();
    const std::optional<cuda::CudnnBlock> blk = cudnn_block(b, sq, sk, a, g, hd, q_pos, k_pos, causal, q.dtype());
    if (blk) cudnn_backward(*blk, dq, dk, dv, dy, q, k, v, y, lse, q_pos, k_pos, false);
    return blk.has_value();
  }

  void do_flash_attention_backward(Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dy, const Tensor& q,
                                   const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse, int b, int sq,
                                   int sk, int a, int g, int hd, int64_t q_pos, int64_t k_pos, bool causal) override {
    on_device();
    const DType dt = q.dtype();
    if (const std::optional<cuda::CudnnBlock> blk = cudnn_block(b, sq, sk, a, g, hd, q_pos, k_pos, causal, dt)) {
      cudnn_backward(*blk, dq, dk, dv, dy, q, k, v, y, lse, q_pos, k_pos, true);
      return;
    }
    cuda::OpScope r(prof_.get(), "flash_attention_backward", stream_);
    const double pairs = double(b) * a * visible_pairs(sq, sk, q_pos, k_pos, causal);
    const double e = double(dtype_size(dt));
    const double io = q.numel() + dy.numel() + k.numel() + v.numel();
    const double grads = dq.numel() + dk.numel() + dv.numel();
    // S and dP in both the dk/dv and the dq pass, dV, dK and dQ: 7 products of hd per pair
    r.count(14.0 * pairs * hd, e * (2.0 * y.numel() + 2.0 * io + 2.0 * grads) + 16.0 * lse.numel());
    Tensor delta = empty({int64_t(b) * a * sq}, DType::F32);
    const cuda::FlashShape s{b, sq, sk, a, g, hd, q_pos, k_pos, causal};
    cuda::flash_attention_backward(dq.raw(), dk.raw(), dv.raw(), dy.raw(), q.raw(), k.raw(), v.raw(), y.raw(),
                                   lse.data<float>(), delta.data<float>(), dt, s, stream_);
  }

  void do_attention_merge(Tensor& y, Tensor& lse, const Tensor& y2, const Tensor& lse2, int b, int sq, int a,
                          int hd) override {
    on_device();
    cuda::OpScope r(prof_.get(), "attention_merge", stream_);
    const DType dt = y.dtype();
    r.count(6.0 * y.numel(), 3.0 * dtype_size(dt) * y.numel() + 12.0 * lse.numel());
    cuda::attention_merge(y.raw(), lse.data<float>(), y2.raw(), lse2.data<float>(), dt, b, sq, a, hd, stream_);
  }

  void do_qkv_split(Tensor& q, Tensor& k, Tensor& v, const Tensor& qkv, int a, int g, int hd) override {
    on_device();
    cuda::OpScope r(prof_.get(), "qkv_split", stream_);
    r.count(0, 2.0 * double(qkv.nbytes()));
    cuda::qkv_split(q.raw(), k.raw(), v.raw(), qkv.raw(), qkv.dtype(), qkv.dim(0), a, g, hd, stream_);
  }

  void do_qkv_join(Tensor& dqkv, const Tensor& dq, const Tensor& dk, const Tensor& dv, int a, int g,
                   int hd) override {
    on_device();
    cuda::OpScope r(prof_.get(), "qkv_join", stream_);
    r.count(0, 2.0 * double(dqkv.nbytes()));
    cuda::qkv_join(dqkv.raw(), dq.raw(), dk.raw(), dv.raw(), dqkv.dtype(), dqkv.dim(0), a, g, hd, stream_);
  }

  void do_rope_rows(Tensor& y, const Tensor& x, const Tensor& positions, int heads, int hd, double theta,
                    bool inverse) override {
    on_device();
    cuda::OpScope r(prof_.get(), "rope_rows", stream_);
    r.count(6.0 * x.numel(), 2.0 * double(x.nbytes()) + 4.0 * x.dim(0));
    cuda::rope_rows(y.raw(), x.raw(), positions.data<int32_t>(), x.dtype(), x.dim(0), heads, hd, theta, inverse,
                    stream_);
  }

  void do_embedding_forward(Tensor& x, const Tensor& tokens, const Tensor& wte, int64_t vocab_start, const Tensor* wpe,
                            int s) override {
    on_device();
    cuda::OpScope r(prof_.get(), "embedding_forward", stream_);
    const DType dt = wte.dtype();
    const int64_t n = tokens.numel(), h = wte.dim(1);
    r.count(double(n) * h, double(dtype_size(dt)) * n * h * (wpe ? 3 : 2) + 4.0 * n);
    cuda::embedding_forward(x.raw(), tokens.data<int32_t>(), wte.raw(), wte.dim(0), vocab_start,
                            wpe ? wpe->raw() : nullptr, dt, n, h, s, stream_);
  }

  void do_embedding_backward(Tensor& dwte, Tensor* dwpe, const Tensor& dx, const Tensor& tokens, int64_t vocab_start,
                             int s) override {
    on_device();
    cuda::OpScope r(prof_.get(), "embedding_backward", stream_);
    const DType dt = dx.dtype();
    const int64_t n = tokens.numel(), h = dwte.dim(1);
    r.count(double(n) * h * (dwpe ? 2 : 1), double(n) * h * (dtype_size(dt) + 8.0 * (dwpe ? 2 : 1)) + 4.0 * n);
    cuda::embedding_backward(dwte.data<float>(), dwpe ? dwpe->data<float>() : nullptr, dx.raw(), dt,
                             tokens.data<int32_t>(), dwte.dim(0), vocab_start, n, h, s, stream_);
  }

  void do_xent_row_max(Tensor& max, const Tensor& logits, int64_t v_valid) override {
    on_device();
    cuda::OpScope r(prof_.get(), "xent_row_max", stream_);
    const DType dt = logits.dtype();
    r.count(double(logits.numel()), double(dtype_size(dt)) * logits.numel() + 4.0 * logits.dim(0));
    cuda::xent_row_max(max.data<float>(), logits.raw(), dt, logits.dim(0), logits.dim(1), v_valid, stream_);
  }

  void do_xent_sum_exp(Tensor& se, const Tensor& logits, const Tensor& max, int64_t v_valid) override {
    on_device();
    cuda::OpScope r(prof_.get(), "xent_sum_exp", stream_);
    const DType dt = logits.dtype();
    r.count(3.0 * logits.numel(), double(dtype_size(dt)) * logits.numel() + 8.0 * logits.dim(0));
    cuda::xent_sum_exp(se.data<float>(), logits.raw(), max.data<float>(), dt, logits.dim(0), logits.dim(1), v_valid,
                       stream_);
  }

  void do_xent_target_logit(Tensor& tgt, const Tensor& logits, const Tensor& targets, int64_t vocab_start,
                            int64_t v_valid) override {
    on_device();
    cuda::OpScope r(prof_.get(), "xent_target_logit", stream_);
    const DType dt = logits.dtype();
    cuda::xent_target_logit(tgt.data<float>(), logits.raw(), dt, targets.data<int32_t>(), logits.dim(0),
                            logits.dim(1), vocab_start, v_valid, stream_);
  }

  void do_xent_loss(Tensor& loss, const Tensor& max, const Tensor& se, const Tensor& tgt) override {
    on_device();
    cuda::OpScope r(prof_.get(), "xent_loss", stream_);
    const int64_t n = loss.numel();
    cuda::xent_loss(loss.data<float>(), max.data<float>(), se.data<float>(), tgt.data<float>(), n, stream_);
  }

  void do_xent_backward(Tensor& dlogits, const Tensor& logits, const Tensor& max, const Tensor& se,
                        const Tensor& targets, int64_t vocab_start, int64_t v_valid, double scale) override {
    on_device();
    cuda::OpScope r(prof_.get(), "xent_backward", stream_);
    const DType dt = logits.dtype();
    const int64_t n = logits.dim(0);
    r.count(4.0 * logits.numel(), 2.0 * dtype_size(dt) * logits.numel() + 12.0 * n);
    cuda::xent_backward(dlogits.raw(), logits.raw(), max.data<float>(), se.data<float>(), dt,
                        targets.data<int32_t>(), n, logits.dim(1), vocab_start, v_valid, static_cast<float>(scale),
                        stream_);
  }

  void do_add(Tensor& y, const Tensor& a, const Tensor& b) override {
    on_device();
    cuda::OpScope r(prof_.get(), "add", stream_);
    const DType dt = y.dtype();
    r.count(double(y.numel()), 3.0 * dtype_size(dt) * y.numel());
    cuda::add(y.raw(), a.raw(), b.raw(), dt, y.numel(), stream_);
  }

  void do_add_(Tensor& y, const Tensor& x) override {
    on_device();
    cuda::OpScope r(prof_.get(), "add_", stream_);
    const DType dt = y.dtype();
    r.count(double(y.numel()), 3.0 * dtype_size(dt) * y.numel());
    cuda::add_inplace(y.raw(), x.raw(), dt, y.numel(), stream_);
  }

  void do_scale_(Tensor& y, double alpha) override {
    on_device();
    cuda::OpScope r(prof_.get(), "scale_", stream_);
    const DType dt = y.dtype();
    r.count(double(y.numel()), 2.0 * dtype_size(dt) * y.numel());
    cuda::scale_inplace(y.raw(), dt, alpha, y.numel(), stream_);
  }

  double do_sum(const Tensor& x) override { return reduce(x, false, "sum"); }
  double do_sum_squares(const Tensor& x) override { return reduce(x, true, "sum_squares"); }

  void do_adamw(Tensor& param, const Tensor& grad, Tensor& m, Tensor& v, const AdamWParams& p) override {
    on_device();
    cuda::OpScope r(prof_.get(), "adamw", stream_);
    const int64_t n = param.numel();
    r.count(12.0 * n, 28.0 * n);  // reads param, grad, m, v; writes param, m, v (f32)
    const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta1, double(p.step))));
    const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta2, double(p.step))));
    const float decay = static_cast<float>(1.0 - p.lr * p.weight_decay);
    cuda::adamw(param.data<float>(), grad.data<float>(), m.data<float>(), v.data<float>(), n, float(p.lr),
                float(p.beta1), float(p.beta2), float(p.eps), decay, c1, c2, stream_);
  }

  // Up to AdamWTable::kMax segments per launch: one kernel does scale_, adamw and copy's work.
  void do_adamw_multi(Tensor& params, Tensor& grads, Tensor& m, Tensor& v, Tensor* lowp,
                      std::span<const AdamWSegment> segments, const AdamWParams& p, double grad_scale) override {
    on_device();
    cuda::OpScope r(prof_.get(), "adamw_multi", stream_);
    int64_t n = 0;
    for (const AdamWSegment& s : segments) n += s.size;
    const double per = 28.0 + (grad_scale != 1.0 ? 4.0 : 0.0) + (lowp ? double(dtype_size(lowp->dtype())) : 0.0);
    r.count(13.0 * n, per * n);
    const float c1 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta1, double(p.step))));
    const float c2 = static_cast<float>(1.0 / (1.0 - std::pow(p.beta2, double(p.step))));
    cuda::AdamWTable t{};
    const auto flush = [&] {
      if (t.count == 0) return;
      cuda::adamw_multi(params.data<float>(), grads.data<float>(), m.data<float>(), v.data<float>(),
                        lowp ? lowp->raw() : nullptr, lowp ? lowp->dtype() : DType::F32, t, float(p.lr),
                        float(p.beta1), float(p.beta2), float(p.eps), c1, c2, grad_scale, stream_);
      t.count = 0;
    };
    for (const AdamWSegment& s : segments) {
      if (s.size == 0) continue;
      t.entry[t.count++] = {s.param, s.grad, s.state, s.lowp, s.size,
                            static_cast<float>(1.0 - p.lr * s.weight_decay)};
      if (t.count == cuda::AdamWTable::kMax) flush();
    }
    flush();
  }

 private:
  void on_device() {
    int current = -1;
    PTDP_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device_) PTDP_CUDA_CHECK(cudaSetDevice(device_));
  }

  // The block as cuDNN's when cuDNN attention is on and takes it (cuda::cudnn_block_of).
  std::optional<cuda::CudnnBlock> cudnn_block(int b, int sq, int sk, int a, int g, int hd, int64_t q_pos,
                                              int64_t k_pos, bool causal, DType dt) {
    if (!cudnn_) return std::nullopt;
    const std::optional<cuda::CudnnBlock> blk = cuda::cudnn_block_of(b, sq, sk, a, g, hd, q_pos, k_pos, causal, dt);
    if (!blk || !cudnn_->takes(*blk)) return std::nullopt;
    return blk;
  }

  // A cuDNN workspace of `bytes` (none for 0).
  Tensor workspace(int64_t bytes) { return bytes > 0 ? empty({(bytes + 3) / 4}, DType::F32) : Tensor(); }

  // cuDNN's backward of block `blk`: S (again), dP, dV, dK and dQ, 5 products of hd per visible pair.
  // cuDNN writes its gradients: into dq, dk and dv themselves, or (accumulate) into temporaries
  // then added into them.
  void cudnn_backward(const cuda::CudnnBlock& blk, Tensor& dq, Tensor& dk, Tensor& dv, const Tensor& dy,
                      const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& y, const Tensor& lse,
                      int64_t q_pos, int64_t k_pos, bool accumulate) {
    cuda::OpScope r(prof_.get(), "cudnn_attention_backward", stream_);
    const DType dt = blk.dt;
    const double pairs = double(blk.b) * blk.a * visible_pairs(blk.sq, blk.sk, q_pos, k_pos, blk.causal);
    const double grads = dq.numel() + dk.numel() + dv.numel();
    const double io = q.numel() + dy.numel() + k.numel() + v.numel() + y.numel();
    r.count(10.0 * pairs * blk.hd,
            double(dtype_size(dt)) * (io + (accumulate ? 4.0 : 1.0) * grads) + 4.0 * lse.numel());
    Tensor ws = workspace(cudnn_->backward_workspace(blk));
    Tensor gq = accumulate ? empty(dq.shape(), dt) : dq, gk = accumulate ? empty(dk.shape(), dt) : dk,
           gv = accumulate ? empty(dv.shape(), dt) : dv;
    cudnn_->backward(blk, gq.raw(), gk.raw(), gv.raw(), dy.raw(), q.raw(), k.raw(), v.raw(), y.raw(),
                     lse.data<float>(), ws.defined() ? ws.raw() : nullptr);
    if (!accumulate) return;
    for (auto [acc, part] : {std::pair{&dq, &gq}, std::pair{&dk, &gk}, std::pair{&dv, &gv}})
      cuda::add_inplace(acc->raw(), part->raw(), dt, acc->numel(), stream_);
  }

  double reduce(const Tensor& x, bool squares, const char* op) {
    on_device();
    cuda::OpScope r(prof_.get(), op, stream_);
    const DType dt = x.dtype();
    if (x.numel() == 0) return 0.0;
    r.count(2.0 * x.numel(), double(dtype_size(dt)) * x.numel());
    if (!sum_scratch_.defined()) sum_scratch_ = empty({cuda::kSumPartials + 1}, DType::F64);
    double* out = sum_scratch_.data<double>();
    cuda::sum(out, x.raw(), dt, x.numel(), squares, out + 1, stream_);
    PTDP_CUDA_CHECK(cudaMemcpyAsync(host_scalar_, out, sizeof(double), cudaMemcpyDeviceToHost, stream_));
    PTDP_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return *host_scalar_;
  }

  const int device_;
  cuda::DeviceAllocator& alloc_;
  cudaStream_t stream_ = nullptr;
  double* host_scalar_ = nullptr;  // pinned
  std::unique_ptr<cuda::GemmRunner> gemm_;
  std::unique_ptr<cuda::OpProfile> prof_;  // PTDP_OP_PROFILE: GPU time per op (null: off)
  std::unique_ptr<cuda::CudnnAttention> cudnn_;  // set_cudnn_attention(true): cuDNN's graphs on stream_
  Tensor sum_scratch_;  // the f64 result and the partial sums
  Tensor rope_table_;   // rope's cos and sin for (rope_s_, rope_hd_, rope_theta_)
  int rope_s_ = 0, rope_hd_ = 0;
  double rope_theta_ = 0;
  std::vector<cudaEvent_t> marks_;  // mark(): events, reused after release_marks()
  size_t next_mark_ = 0;
};

CudaBackend& as_cuda(Backend& backend, const char* what) {
  auto* c = dynamic_cast<CudaBackend*>(&backend);
  PTDP_CHECK(c != nullptr, "{}: the {} backend is not a CUDA backend", what, backend.name());
  return *c;
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) {
  std::string reason;
  const int count = cuda::device_count(&reason);
  if (count == 0) throw RuntimeError("the CUDA backend needs a GPU: " + reason);
  if (device < 0 || device >= count)
    throw RuntimeError(fmt::format("CUDA device {} does not exist ({} device(s) here)", device, count));
  return std::make_unique<CudaBackend>(device);
}

cudaStream_t cuda_stream(Backend& backend) { return as_cuda(backend, "cuda_stream").stream(); }
int cuda_device(Backend& backend) { return as_cuda(backend, "cuda_device").device_index(); }

}  // namespace ptdp
