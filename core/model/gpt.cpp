#include "core/model/gpt.h"

#include <algorithm>

#include "core/backend/nvtx.h"

namespace ptdp {

namespace {
ShardSpec resolve(const ShardSpec& s, const ModelConfig& c) {
  ShardSpec r = s;
  if (r.layer_end < 0) r.layer_end = c.layers;
  return r;
}
}  // namespace

Gpt::Gpt(const ModelConfig& cfg, const ShardSpec& shard, Backend& be, DType dtype, Communicator* tp)
    : cfg_(cfg), shard_(resolve(shard, cfg)), be_(be), dtype_(dtype), tp_(shard.tp_size > 1 ? tp : nullptr),
      layout_(cfg, shard_), vp_(cfg.padded_vocab(shard.tp_size)) {
  if (shard_.tp_size > 1)
    PTDP_CHECK(tp && tp->size() == shard_.tp_size && tp->rank() == shard_.tp_rank,
               "a tensor-parallel shard needs its group (t={}, rank {})", shard_.tp_size, shard_.tp_rank);
  PTDP_CHECK(!shard_.sequence_parallel || shard_.tp_size > 1, "sequence parallelism needs t > 1");
  params_ = be_.empty({layout_.total()}, dtype_);
  grads_ = be_.empty({layout_.total()}, acc_dtype(dtype_));  // f32 accumulation under mixed precision
  be_.fill(params_, 0);
  be_.fill(grads_, 0);
}

Tensor Gpt::param(const std::string& name) const {
  PTDP_CHECK(!src_, "the parameters of a sharded model are gathered unit by unit");
  const ParamEntry& e = layout_.at(name);
  return params_.view(e.offset, e.shape);
}

Tensor Gpt::grad(const std::string& name) const {
  PTDP_CHECK(!src_, "the gradients of a sharded model are reduced unit by unit");
  const ParamEntry& e = layout_.at(name);
  return grads_.view(e.offset, e.shape);
}

void Gpt::init(uint64_t seed) {
  PTDP_CHECK(!src_, "initialise a model before sharding its parameters");
  if (be_.device() == Device::CPU && params_.dtype() == acc_dtype(dtype_)) {
    init_params(layout_, params_, seed);
  } else {  // drawn in f32 on the host, then rounded to bf16/f16 and/or copied to the device
    Tensor host = Tensor::empty({layout_.total()}, acc_dtype(dtype_));
    init_params(layout_, host, seed);
    be_.copy(params_, host);
  }
}

void Gpt::zero_grads() {
  if (!src_) be_.fill(grads_, 0);
}

void Gpt::use_param_source(ParamSource* source) {
  PTDP_CHECK(shard_.pre && shard_.post && shard_.tp_size == 1, "only a whole model (t = p = 1) shards its parameters");
  units_ = param_units(layout_, cfg_.layers);
  src_ = source;
  params_ = Tensor();
  grads_ = Tensor();
}

Gpt::Buf Gpt::params_of(int unit) {
  if (!src_) return {params_, 0};
  return {src_->gather(unit), units_[unit].begin};
}

Gpt::Buf Gpt::grads_of(int unit) {
  if (!src_) return {grads_, 0};
  return {src_->grad_buffer(unit), units_[unit].begin};
}

void Gpt::release(int unit) {
  if (src_) src_->release(unit);
}

void Gpt::reduce(int unit) {
  if (src_) src_->reduce(unit);
}

Tensor Gpt::at(const Buf& b, const std::string& name) const {
  const ParamEntry& e = layout_.at(name);
  return b.t.view(e.offset - b.base, e.shape);
}

LayerDims Gpt::dims(int b) const {
  LayerDims d;
  d.b = b;
  d.s = cfg_.seq_length;
  d.h = cfg_.hidden;
  d.heads = cfg_.heads / shard_.tp_size;
  d.groups = cfg_.groups() / shard_.tp_size;  // whole query groups per rank (validate_run: t divides g)
  d.hd = cfg_.head_dim();
  d.ffn = cfg_.ffn_hidden() / shard_.tp_size;
  d.eps = cfg_.layernorm_eps;
  d.tp = tp_;
  d.bias_owner = shard_.tp_rank == 0;
  d.sp = shard_.sequence_parallel;
  d.recompute_act = recompute_act_;
  d.cp = cp_;
  PTDP_CHECK(!d.sp || d.rows() % shard_.tp_size == 0, "sequence parallelism: t = {} must divide b*s/c = {}",
             shard_.tp_size, d.rows());
  d.llama = cfg_.arch == Arch::Llama;
  d.rope_theta = cfg_.rope_theta;
  d.block = block_ || cp_.size > 1;
  if (d.block && d.llama) d.positions = to_backend(be_, cp_positions(b, d.s, cp_));
  return d;
}

void Gpt::set_attention(bool block, const ContextParallel& cp) {
  PTDP_CHECK(cp.size == 1 || (block && cp.group && cp.group->size() == cp.size),
             "context parallelism needs block attention and its group");
  PTDP_CHECK(cfg_.seq_length % (2 * cp.size) == 0, "context parallelism: 2c = {} must divide the sequence length {}",
             2 * cp.size, cfg_.seq_length);
  block_ = block;
  cp_ = cp;
}

int64_t Gpt::stage_rows(int b) const {
  return int64_t(b) * cfg_.seq_length / cp_.size / (shard_.sequence_parallel ? shard_.tp_size : 1);
}

namespace {

// Context parallelism: the rows of a chunk-ordered local table [s/c, h] and where they sit in
// the whole position table: chunk `rank`, then chunk 2c - 1 - rank, s/(2c) rows each.
template <class Fn>
void each_local_chunk(const Tensor& whole, const Tensor& local, const ContextParallel& cp, Fn&& fn) {
  const int64_t h = whole.dim(1), rows = local.dim(0) / 2;
  const int chunks[2] = {cp.rank, 2 * cp.size - 1 - cp.rank};
  for (int i = 0; i < 2; ++i) {
    Tensor w = whole.view(chunks[i] * rows * h, {rows, h}), l = local.view(i * rows * h, {rows, h});
    fn(w, l);
  }
}

// The position embeddings of this rank's positions [s/c, h] (wpe itself without context parallelism).
Tensor local_positions(Backend& be, const Tensor& wpe, const ContextParallel& cp) {
  if (cp.size == 1) return wpe;
  const int64_t s = wpe.dim(0);
  Tensor local = be.empty({s / cp.size, wpe.dim(1)}, wpe.dtype());
  each_local_chunk(wpe, local, cp, [&](Tensor& w, Tensor& l) { be.copy(l, w); });
  return local;
}

// Adds the gradient of the local table to the rows of the whole one it came from.
void add_local_positions(Backend& be, Tensor& gwpe, const Tensor& local, const ContextParallel& cp) {
  each_local_chunk(gwpe, local, cp, [&](Tensor& w, Tensor& l) { be.add_(w, l); });
}

// The LayerNorm (RMSNorm) parameters: replicated, applied to the rows of this rank only under
// sequence parallelism.
bool norm_param(const std::string& name) {
  return name.rfind("lnf.", 0) == 0 || name.find(".ln1.") != std::string::npos ||
         name.find(".ln2.") != std::string::npos;
}
}  // namespace

void Gpt::sum_sequence_parallel_grads() {
  if (!shard_.sequence_parallel || !tp_) return;
  std::vector<const ParamEntry*> norms;
  int64_t total = 0;
  for (const ParamEntry& e : layout_.entries())
    if (norm_param(e.name)) {
      norms.push_back(&e);
      total += shape_numel(e.shape);
    }
  if (total == 0) return;
  NvtxRange r("sp layernorm grads all-reduce");
  Tensor bucket = be_.empty({total}, grads_.dtype());  // one all-reduce for all of them
  // Each norm gradient and its place in the bucket.
  auto each = [&](auto&& fn) {
    int64_t at = 0;
    for (const ParamEntry* e : norms) {
      const int64_t k = shape_numel(e->shape);
      Tensor grad = grads_.view(e->offset, {k}), packed = bucket.view(at, {k});
      fn(grad, packed);
      at += k;
    }
  };
  each([&](Tensor& grad, Tensor& packed) { be_.copy(packed, grad); });
  tp_->all_reduce(bucket, ReduceOp::Sum);
  each([&](Tensor& grad, Tensor& packed) { be_.copy(grad, packed); });
}

int64_t Gpt::Cache::bytes() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.bytes();
  // The stage's input is also its first layer's kept input (the same tensor): count it once.
  const bool input_kept = !layers.empty() && layers.front().x.defined() && x_in.defined() &&
                          layers.front().x.raw() == x_in.raw();
  // A chunk of no layer that holds the loss: the final LayerNorm's input is the stage's input.
  const bool xl_is_input = xl.defined() && x_in.defined() && xl.raw() == x_in.raw();
  for (const Tensor* t : {&x_in, &xl, &lnf, &mean, &rstd, &logits, &max, &sum_exp})
    if (t->defined() && !(t == &x_in && input_kept) && !(t == &xl && xl_is_input)) n += t->nbytes();
  return n;
}

std::unique_ptr<Gpt::Cache> Gpt::forward(int b, const Tensor& input, const Tensor* targets, Recompute mode,
                                         Tensor* x_out, double* loss_sum) {
  const LayerDims d = dims(b);
  const int64_t n = d.rows(), nl = d.local_rows();  // nl: the rows of this rank (n/t with sp)
  auto c = std::make_unique<Cache>();
  c->b = b;
  c->mode = mode;
  if (shard_.pre) {
    PTDP_CHECK(input.dtype() == DType::I32 && input.numel() == n, "first stage takes {} token ids", n);
    c->tokens = input;
    c->x_in = be_.empty({nl, d.h}, dtype_);
    Tensor part = partial_rows(be_, d, c->x_in);
    const Buf w = params_of(0);
    Tensor wpe = cfg_.tied_embedding() ? local_positions(be_, at(w, "wpe"), cp_) : Tensor();  // llama: no table
    // wpe is added once, by tensor-parallel rank 0, before the sum.
    be_.embedding_forward(part, input, at(w, "wte"), vocab_start(), d.bias_owner && wpe.defined() ? &wpe : nullptr,
                          d.s / cp_.size);
    release(0);
    reduce_rows(d, part, c->x_in);  // sum the vocab shards (sp: reduce-scatter to this rank's rows)
  } else {
    PTDP_CHECK(input.numel() == nl * d.h, "stage input must be [{}, {}]", nl, d.h);
    c->x_in = input;
  }
  Tensor x = c->x_in;
  c->layers.resize(shard_.layer_end - shard_.layer_begin);
  for (int l = shard_.layer_begin; l < shard_.layer_end; ++l) {
    Tensor y = be_.empty({nl, d.h}, dtype_);
    const Buf w = params_of(unit_of_layer(l));
    layer_forward(be_, d, LayerWeights::view(w.t, layout_, l, w.base), x, y, c->layers[l - shard_.layer_begin], mode);
    release(unit_of_layer(l));
    x = y;
  }
  if (!shard_.post) {
    PTDP_CHECK(x_out != nullptr, "a stage without the head returns its output");
    *x_out = x;
    return c;
  }
  PTDP_CHECK(targets && targets->numel() == n, "the last stage needs {} targets", n);
  c->targets = *targets;
  c->xl = x;
  c->lnf = be_.empty({nl, d.h}, dtype_);
  const DType stat = acc_dtype(dtype_);  // statistics and the loss in f32 under mixed precision
  c->mean = be_.empty({nl}, stat);
  c->rstd = be_.empty({nl}, stat);
  const bool tied = cfg_.tied_embedding();
  const Buf hw = params_of(head_unit());
  const Buf ow = tied ? params_of(0) : hw;  // the output layer: the word embedding, or its own (llama)
  if (tied) be_.layernorm_forward(c->lnf, c->mean, c->rstd, x, at(hw, "lnf.weight"), at(hw, "lnf.bias"), d.eps);
  else be_.rmsnorm_forward(c->lnf, c->rstd, x, at(hw, "lnf.weight"), d.eps);
  const int64_t v_shard = vp_ / shard_.tp_size;
  c->logits = be_.empty({n, v_shard}, dtype_);
  be_.linear_forward(c->logits, sp_gather(be_, d, c->lnf), at(ow, output_name()), nullptr);  // sp: all-gather
  release(head_unit());
  if (tied) release(0);
  const int64_t v_valid = valid_vocab();  // padded columns never enter the softmax
  c->max = be_.empty({n}, stat);
  c->sum_exp = be_.empty({n}, stat);
  Tensor tgt = be_.empty({n}, stat), loss = be_.empty({n}, stat);
  be_.xent_row_max(c->max, c->logits, v_valid);
  if (tp_) tp_->all_reduce(c->max, ReduceOp::Max);
  be_.xent_sum_exp(c->sum_exp, c->logits, c->max, v_valid);
  if (tp_) tp_->all_reduce(c->sum_exp, ReduceOp::Sum);
  be_.xent_target_logit(tgt, c->logits, *targets, vocab_start(), v_valid);
  if (tp_) tp_->all_reduce(tgt, ReduceOp::Sum);
  be_.xent_loss(loss, c->max, c->sum_exp, tgt);
  if (loss_sum) *loss_sum = be_.sum(loss);
  return c;
}

int64_t Gpt::valid_vocab() const {
  const int64_t v_shard = vp_ / shard_.tp_size;
  return std::clamp<int64_t>(cfg_.vocab_size - vocab_start(), 0, v_shard);
}

void Gpt::backward(Cache& c, double loss_scale, const Tensor* dy_out, Tensor* dx_in,
                   const std::function<void(int64_t)>& grads_ready) {
  const LayerDims d = dims(c.b);
  const int64_t nl = d.local_rows();
  Tensor dx;
  if (shard_.post) {
    // The logits' gradient overwrites them: one [n, v/t] buffer at the head's peak, not two.
    Tensor dlogits = std::move(c.logits);
    c.logits = Tensor();
    be_.xent_backward(dlogits, dlogits, c.max, c.sum_exp, c.targets, vocab_start(), valid_vocab(), loss_scale);
    Tensor dlnf = be_.empty({nl, d.h}, dtype_);
    Tensor part = partial_rows(be_, d, dlnf);
    const bool tied = cfg_.tied_embedding();
    const Buf hw = params_of(head_unit()), hg = grads_of(head_unit());
    const Buf ow = tied ? params_of(0) : hw, og = tied ? grads_of(0) : hg;
    Tensor gout = at(og, output_name());
    be_.linear_backward(&part, false, gout, nullptr, dlogits, sp_gather(be_, d, c.lnf), at(ow, output_name()));
    if (tied) release(0);
    reduce_rows(d, part, dlnf);  // the output layer's input is replicated: sum its gradient (sp: reduce-scatter)
    dx = be_.empty({nl, d.h}, dtype_);
    be_.fill(dx, 0);
    Tensor gw = at(hg, "lnf.weight");
    if (tied) {
      Tensor gb = at(hg, "lnf.bias");
      be_.layernorm_backward(dx, gw, gb, dlnf, c.xl, at(hw, "lnf.weight"), c.mean, c.rstd);
    } else {
      be_.rmsnorm_backward(dx, gw, dlnf, c.xl, at(hw, "lnf.weight"), c.rstd);
    }
    release(head_unit());
    reduce(head_unit());
    if (grads_ready) grads_ready(layout_.at("lnf.weight").offset);
  } else {
    PTDP_CHECK(dy_out != nullptr, "a stage without the head needs the gradient of its output");
    dx = *dy_out;
  }
  for (int l = shard_.layer_end - 1; l >= shard_.layer_begin; --l) {
    const Buf wb = params_of(unit_of_layer(l)), gb = grads_of(unit_of_layer(l));
    LayerWeights g = LayerWeights::view(gb.t, layout_, l, gb.base);
    Tensor dxl = be_.empty({nl, d.h}, dtype_);
    layer_backward(be_, d, LayerWeights::view(wb.t, layout_, l, wb.base), g, c.layers[l - shard_.layer_begin], dx, dxl,
                   c.mode);
    release(unit_of_layer(l));
    reduce(unit_of_layer(l));
    dx = dxl;
    if (grads_ready) grads_ready(layout_.at("layers." + std::to_string(l) + ".ln1.weight").offset);
  }
  if (shard_.pre) {
    const Buf eg = grads_of(0);
    Tensor gwte = at(eg, "wte"), gwpe = cfg_.tied_embedding() ? at(eg, "wpe") : Tensor();
    // Context parallelism: the gradient of this rank's rows of wpe, added to them.
    Tensor gwpe_local = gwpe;
    if (gwpe.defined() && cp_.size > 1) {
      gwpe_local = be_.empty({d.s / cp_.size, d.h}, gwpe.dtype());
      be_.fill(gwpe_local, 0);
    }
    // sp: the gradient of the reduce-scatter is the all-gather of this rank's rows
    be_.embedding_backward(gwte, gwpe.defined() ? &gwpe_local : nullptr, sp_gather(be_, d, dx), c.tokens,
                           vocab_start(), d.s / cp_.size);
    if (gwpe.defined() && cp_.size > 1) add_local_positions(be_, gwpe, gwpe_local, cp_);
    reduce(0);
  } else {
    PTDP_CHECK(dx_in != nullptr, "a stage without the embedding returns the gradient of its input");
    *dx_in = dx;
  }
  if (grads_ready) grads_ready(0);
  c = Cache{};
}

}  // namespace ptdp
