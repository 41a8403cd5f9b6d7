#include "core/model/params.h"
#include "core/model/param_source.h"

#include <cmath>

#include "core/common/error.h"
#include "core/common/rng.h"

namespace ptdp {

ParamLayout::ParamLayout(const ModelConfig& c, const ShardSpec& s)
    : arch_(c.arch), tp_size_(s.tp_size), tp_rank_(s.tp_rank) {
  PTDP_CHECK(s.tp_size >= 1 && s.tp_rank >= 0 && s.tp_rank < s.tp_size, "bad tensor-parallel rank");
  PTDP_CHECK(c.heads % s.tp_size == 0, "t={} does not divide {} heads", s.tp_size, c.heads);
  PTDP_CHECK(c.groups() % s.tp_size == 0, "t={} does not divide {} query groups", s.tp_size, c.groups());
  const int64_t h = c.hidden, qkv = c.qkv_width(), ffn = c.ffn_hidden(), vp = c.padded_vocab(s.tp_size);
  const int end = s.layer_end < 0 ? c.layers : s.layer_end;
  const double std = c.init_std, out_std = c.init_std / std::sqrt(2.0 * c.layers);
  if (c.arch == Arch::Llama) {
    add_llama(c, s, end, std, out_std);
    return;
  }
  if (s.pre || s.post) {
    add("wte", {vp, h}, 0, true, std);  // vocab-parallel; tied: the last stage holds a copy
    entries_.back().shared_copy = s.post && !s.pre;
  }
  if (s.pre) add("wpe", {c.seq_length, h}, -1, true, std);
  for (int l = s.layer_begin; l < end; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    add(p + "ln1.weight", {h}, -1, false, 0, 1.0);
    add(p + "ln1.bias", {h}, -1, false, 0);
    // Column-parallel: whole heads (whole query groups) per rank. Rows: per head q | k | v, or with
    // grouped-query attention per group its query heads, then its key, then its value (Megatron-core).
    add(p + "qkv.weight", {qkv, h}, 0, true, std);
    add(p + "qkv.bias", {qkv}, 0, false, 0);
    add(p + "proj.weight", {h, h}, 1, true, out_std);  // row-parallel
    add(p + "proj.bias", {h}, -1, false, 0);
    add(p + "ln2.weight", {h}, -1, false, 0, 1.0);
    add(p + "ln2.bias", {h}, -1, false, 0);
    add(p + "fc.weight", {ffn, h}, 0, true, std);  // column-parallel
    add(p + "fc.bias", {ffn}, 0, false, 0);
    add(p + "fc2.weight", {h, ffn}, 1, true, out_std);  // row-parallel
    add(p + "fc2.bias", {h}, -1, false, 0);
  }
  if (s.post) {
    add("lnf.weight", {h}, -1, false, 0, 1.0);
    add("lnf.bias", {h}, -1, false, 0);
  }
}

// LLaMA: no biases, no position table, RMSNorm weights only, the SwiGLU MLP's gate and up
// column-parallel and adjacent (each rank's slices form one [2f/t, h] matrix: one GEMM), down
// row-parallel, and an untied output layer on the last stage.
void ParamLayout::add_llama(const ModelConfig& c, const ShardSpec& s, int end, double std, double out_std) {
  const int64_t h = c.hidden, qkv = c.qkv_width(), ffn = c.ffn_hidden(), vp = c.padded_vocab(s.tp_size);
  if (s.pre) add("wte", {vp, h}, 0, true, std);
  for (int l = s.layer_begin; l < end; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    add(p + "ln1.weight", {h}, -1, false, 0, 1.0);
    add(p + "qkv.weight", {qkv, h}, 0, true, std);  // as gpt's (grouped-query attention included)
    add(p + "proj.weight", {h, h}, 1, true, out_std);
    add(p + "ln2.weight", {h}, -1, false, 0, 1.0);
    add(p + "gate.weight", {ffn, h}, 0, true, std);
    add(p + "up.weight", {ffn, h}, 0, true, std);
    add(p + "down.weight", {h, ffn}, 1, true, out_std);
  }
  if (s.post) {
    add("lnf.weight", {h}, -1, false, 0, 1.0);
    add("output", {vp, h}, 0, true, std);  // vocab-parallel
  }
}

void ParamLayout::add(std::string name, Shape full, int split_dim, bool decay, double std, double value) {
  ParamEntry e;
  e.name = std::move(name);
  e.full_shape = full;
  e.shape = full;
  e.split_dim = tp_size_ > 1 ? split_dim : -1;
  if (e.split_dim >= 0) {
    PTDP_CHECK(full[e.split_dim] % tp_size_ == 0, "{}: dimension {} not divisible by t={}", e.name,
               full[e.split_dim], tp_size_);
    e.shape[e.split_dim] = full[e.split_dim] / tp_size_;
    e.split_offset = e.shape[e.split_dim] * tp_rank_;
  }
  e.tp_replicated = tp_size_ > 1 && e.split_dim < 0;
  e.offset = total_;
  e.decay = decay;
  e.init_std = std;
  e.init_value = value;
  total_ += shape_numel(e.shape);
  entries_.push_back(std::move(e));
}

int64_t ParamLayout::logical_index(const ParamEntry& e, int64_t i) {
  if (e.split_dim < 0) return i;
  if (e.shape.size() == 1) return i + e.split_offset;
  const int64_t cols = e.shape[1], full_cols = e.full_shape[1];
  const int64_t row = i / cols, col = i % cols;
  return e.split_dim == 0 ? (row + e.split_offset) * full_cols + col : row * full_cols + col + e.split_offset;
}

const ParamEntry* ParamLayout::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

const ParamEntry& ParamLayout::at(const std::string& name) const {
  const ParamEntry* e = find(name);
  PTDP_CHECK(e != nullptr, "no parameter named {}", name);
  return *e;
}

void init_params(const ParamLayout& layout, Tensor& flat, uint64_t seed) {
  PTDP_CHECK(flat.numel() == layout.total(), "flat buffer has {} elements, layout {}", flat.numel(),
             layout.total());
  for (const auto& e : layout.entries()) {
    const int64_t n = shape_numel(e.shape);
    const uint64_t stream = hash_string(e.name);
    auto fill = [&](auto* p) {
      using T = std::remove_pointer_t<decltype(p)>;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < n; ++i)
        p[i] = e.init_std > 0 ? static_cast<T>(e.init_std * normal01(seed, stream, ParamLayout::logical_index(e, i)))
                              : static_cast<T>(e.init_value);
    };
    if (flat.dtype() == DType::F32) fill(flat.data<float>() + e.offset);
    else if (flat.dtype() == DType::F64) fill(flat.data<double>() + e.offset);
    else PTDP_CHECK(false, "init_params fills f32 or f64 buffers");
  }
}

std::vector<FlatRange> param_units(const ParamLayout& layout, int layers) {
  std::vector<FlatRange> u;
  int64_t at = 0;
  for (int l = 0; l <= layers; ++l) {
    const int64_t end = l < layers ? layout.at("layers." + std::to_string(l) + ".ln1.weight").offset
                                   : layout.at("lnf.weight").offset;
    u.push_back({at, end});
    at = end;
  }
  u.push_back({at, layout.total()});
  return u;
}

}  // namespace ptdp
