#include "core/model/params.h"
#include "core/model/param_source.h"

#include <cmath>

#include "core/common/error.h"
#include "core/common/rng.h"
#include "core/model/tensor_inventory.h"

namespace ptdp {

ParamLayout::ParamLayout(const ModelConfig& c, const ShardSpec& s)
    : arch_(c.arch), tp_size_(s.tp_size), tp_rank_(s.tp_rank) {
  PTDP_CHECK(s.tp_size >= 1 && s.tp_rank >= 0 && s.tp_rank < s.tp_size, "bad tensor-parallel rank");
  PTDP_CHECK(c.heads % s.tp_size == 0, "t={} does not divide {} heads", s.tp_size, c.heads);
  PTDP_CHECK(c.groups() % s.tp_size == 0, "t={} does not divide {} query groups", s.tp_size, c.groups());
  const ModelTensors m = model_tensors(c, c.padded_vocab(s.tp_size));
  const int end = s.layer_end < 0 ? c.layers : s.layer_end;
  const double std = c.init_std, out_std = c.init_std / std::sqrt(2.0 * c.layers);
  auto add_tensor = [&](const ModelTensor& x, const std::string& prefix) {
    const double value = x.init == TensorInit::One ? 1.0 : 0.0;
    const double x_std = x.init == TensorInit::Normal ? std : x.init == TensorInit::ScaledNormal ? out_std : 0.0;
    add(prefix + x.name, x.shape, x.split_dim, !x.small(), x_std, value);
  };
  // The first stage's tensors; a tied word embedding also on the last stage, as a copy.
  for (const ModelTensor& x : m.first) {
    const bool copy = m.tied && &x == &m.embedding() && s.post && !s.pre;
    if (!s.pre && !copy) continue;
    add_tensor(x, "");
    entries_.back().shared_copy = copy;
  }
  for (int l = s.layer_begin; l < end; ++l)
    for (const ModelTensor& x : m.layer) add_tensor(x, "layers." + std::to_string(l) + ".");
  if (s.post)
    for (const ModelTensor& x : m.last) add_tensor(x, "");
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
