// Context parallelism's a2a exchange (DeepSpeed-Ulysses, Megatron-core's --cp-comm-type a2a): an
// all-to-all turns this rank's rows of every head into the whole sequences of a/C query heads
// (and their kv heads), attention runs on them in sequence order, and a second all-to-all brings
// the output rows home; backward is the transpose. The all-to-all is the communicator's send/recv,
// one message per peer. Head columns are taken and put back with 0/1 selector matrices through
// linear_forward (exact: each output element is one input times 1 plus zeros), so the exchange
// needs no op beyond the backend's.
#include <fmt/format.h>

#include <vector>

#include "core/common/error.h"
#include "core/model/context_attention_detail.h"

namespace ptdp::cp_detail {

namespace {

// The heads of one peer: query heads [p*ha, (p+1)*ha) and kv heads from kv0(p), hg of them.
struct Heads {
  int C, a, g, hd, ha, hg;
  explicit Heads(const Dims& d) : C(d.C), a(d.a), g(d.g), hd(d.hd), ha(d.a / d.C), hg(d.g >= d.C ? d.g / d.C : 1) {
    if (d.a % d.C != 0)
      throw RuntimeError(fmt::format(
          "--cp-comm-type a2a: the {} attention heads of a tensor-parallel rank must be divisible by "
          "--context-parallel-size {} (use --cp-comm-type p2p or allgather)",
          d.a, d.C));
    if (d.g % d.C != 0 && d.C % d.g != 0)
      throw RuntimeError(fmt::format(
          "--cp-comm-type a2a: the {} query groups of a tensor-parallel rank and --context-parallel-size {} "
          "must divide one another (use --cp-comm-type p2p or allgather)",
          d.g, d.C));
  }
  int64_t wq() const { return int64_t(ha) * hd; }
  int64_t wk() const { return int64_t(hg) * hd; }
  int64_t q_col(int p) const { return p * wq(); }
  int64_t kv_col(int p) const { return int64_t(p) * g / C * hd; }  // g < C: the one group p's heads read
};

// The 0/1 matrix that picks columns [col0, col0 + w) of an [n, in] tensor through
// linear_forward ([w, in]), or with put, puts an [n, w] tensor there ([in, w]).
Tensor selector(Backend& be, DType dt, int64_t w, int64_t in, int64_t col0, bool put) {
  Tensor h = Tensor::zeros(put ? Shape{in, w} : Shape{w, in}, DType::F32);
  float* p = h.data<float>();
  for (int64_t o = 0; o < w; ++o) p[put ? (col0 + o) * w + o : o * in + col0 + o] = 1;
  Tensor m = be.empty(h.shape(), dt);
  be.copy(m, h);
  return m;
}

void take_columns(Backend& be, Tensor& out, const Tensor& x, int64_t col0) {
  be.linear_forward(out, x, selector(be, x.dtype(), out.dim(1), x.dim(1), col0, false), nullptr);
}

// x[:, col0 : col0 + w] += piece
void add_columns(Backend& be, Tensor& x, const Tensor& piece, int64_t col0) {
  Tensor t = be.empty(x.shape(), x.dtype());
  be.linear_forward(t, piece, selector(be, x.dtype(), piece.dim(1), x.dim(1), col0, true), nullptr);
  be.add_(x, t);
}

// Sends out[p] to every peer p and returns what each sent (every message of one size; this
// rank's own slot is out[rank] itself).
std::vector<Tensor> exchange(Backend& be, const ContextParallel& cp, const std::vector<Tensor>& out) {
  std::vector<Tensor> in(cp.size);
  std::vector<CommHandle> hs;
  for (int p = 0; p < cp.size; ++p)
    if (p != cp.rank) {
      hs.push_back(cp.group->isend(out[p], p, kTagA2a));
      count(0, out[p].numel(), out[p].dtype());
    }
  for (int p = 0; p < cp.size; ++p) {
    if (p == cp.rank) {
      in[p] = out[p];
      continue;
    }
    in[p] = be.empty(out[p].shape(), out[p].dtype());
    hs.push_back(cp.group->irecv(in[p], p, kTagA2a));
  }
  wait_all(hs);
  count(1, 0, DType::F32);
  return in;
}

// A message of peer rows: [n, wq] then [n, wk] twice, flattened (q, k, v or dq, dk, dv).
struct Triple {
  Tensor all, q, k, v;
  Triple(Tensor t, const Dims& d, const Heads& h) : all(std::move(t)) {
    q = all.view(0, {d.n, h.wq()});
    k = all.view(d.n * h.wq(), {d.n, h.wk()});
    v = all.view(d.n * (h.wq() + h.wk()), {d.n, h.wk()});
  }
};

// Whole sequences [b*s, w] from every peer's rows (pieces[p] [n, w]: peer p's rows).
void assemble(Backend& be, const Dims& d, const std::vector<Tensor>& pieces, Tensor& whole) {
  for (int p = 0; p < d.C; ++p)
    for (int j = 0; j < d.b; ++j)
      for (int h = 0; h < 2; ++h) {
        Tensor dst = d.chunk_rows(whole, j, d.chunk(p, h));
        be.copy(dst, d.half(pieces[p], j, h));
      }
}

// Peer p's rows [n, w] of whole sequences [b*s, w].
void rows_of(Backend& be, const Dims& d, int p, const Tensor& whole, Tensor& piece) {
  for (int j = 0; j < d.b; ++j)
    for (int h = 0; h < 2; ++h) {
      Tensor dst = d.half(piece, j, h);
      be.copy(dst, d.chunk_rows(whole, j, d.chunk(p, h)));
    }
}

}  // namespace

void a2a_forward(Backend& be, const ContextParallel& cp, const Dims& d, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& y, CpAttnCache& cache) {
  const Heads hs(d);
  const DType dt = q.dtype();
  std::vector<Tensor> out(d.C);
  for (int p = 0; p < d.C; ++p) {
    Triple m(be.empty({d.n * (hs.wq() + 2 * hs.wk())}, dt), d, hs);
    take_columns(be, m.q, q, hs.q_col(p));
    take_columns(be, m.k, k, hs.kv_col(p));
    take_columns(be, m.v, v, hs.kv_col(p));
    out[p] = m.all;
  }
  const std::vector<Tensor> in = exchange(be, cp, out);
  std::vector<Tensor> qs, ks, vs;
  for (const Tensor& t : in) {
    const Triple m(t, d, hs);
    qs.push_back(m.q), ks.push_back(m.k), vs.push_back(m.v);
  }
  const int64_t rows = int64_t(d.b) * d.s;
  cache.q_full = be.empty({rows, hs.wq()}, dt);
  cache.k_full = be.empty({rows, hs.wk()}, dt);
  cache.v_full = be.empty({rows, hs.wk()}, dt);
  cache.y_full = be.empty({rows, hs.wq()}, dt);
  cache.lse = be.empty({d.b, hs.ha, d.s}, acc_dtype(dt));
  assemble(be, d, qs, cache.q_full);
  assemble(be, d, ks, cache.k_full);
  assemble(be, d, vs, cache.v_full);
  be.flash_attention_forward(cache.y_full, cache.lse, cache.q_full, cache.k_full, cache.v_full, d.b, d.s, d.s, hs.ha,
                             hs.hg, d.hd, 0, 0, true);
  std::vector<Tensor> back(d.C);
  for (int p = 0; p < d.C; ++p) {
    back[p] = be.empty({d.n, hs.wq()}, dt);
    rows_of(be, d, p, cache.y_full, back[p]);
  }
  const std::vector<Tensor> ys = exchange(be, cp, back);
  be.fill(y, 0);
  for (int p = 0; p < d.C; ++p) add_columns(be, y, ys[p], hs.q_col(p));
}

void a2a_backward(Backend& be, const ContextParallel& cp, const Dims& d, const Tensor& dy, const CpAttnCache& cache,
                  Tensor& dq, Tensor& dk, Tensor& dv) {
  const Heads hs(d);
  const DType dt = dy.dtype();
  std::vector<Tensor> out(d.C);
  for (int p = 0; p < d.C; ++p) {
    out[p] = be.empty({d.n, hs.wq()}, dt);
    take_columns(be, out[p], dy, hs.q_col(p));
  }
  const std::vector<Tensor> dys = exchange(be, cp, out);
  const int64_t rows = int64_t(d.b) * d.s;
  Tensor dyf = be.empty({rows, hs.wq()}, dt), dqf = be.empty({rows, hs.wq()}, dt);
  Tensor dkf = be.empty({rows, hs.wk()}, dt), dvf = be.empty({rows, hs.wk()}, dt);
  assemble(be, d, dys, dyf);
  be.fill(dqf, 0);
  be.fill(dkf, 0);
  be.fill(dvf, 0);
  be.flash_attention_backward(dqf, dkf, dvf, dyf, cache.q_full, cache.k_full, cache.v_full, cache.y_full, cache.lse,
                              d.b, d.s, d.s, hs.ha, hs.hg, d.hd, 0, 0, true);
  std::vector<Tensor> back(d.C);
  for (int p = 0; p < d.C; ++p) {
    Triple m(be.empty({d.n * (hs.wq() + 2 * hs.wk())}, dt), d, hs);
    rows_of(be, d, p, dqf, m.q);
    rows_of(be, d, p, dkf, m.k);
    rows_of(be, d, p, dvf, m.v);
    back[p] = m.all;
  }
  const std::vector<Tensor> in = exchange(be, cp, back);
  be.fill(dq, 0);
  be.fill(dk, 0);
  be.fill(dv, 0);
  for (int p = 0; p < d.C; ++p) {  // g < C: the ranks that share a kv head sum their parts
    const Triple m(in[p], d, hs);
    add_columns(be, dq, m.q, hs.q_col(p));
    add_columns(be, dk, m.k, hs.kv_col(p));
    add_columns(be, dv, m.v, hs.kv_col(p));
  }
}

}  // namespace ptdp::cp_detail
