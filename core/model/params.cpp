#include "core/model/params.h"

#include <cmath>

#include "core/common/error.h"
#include "core/common/rng.h"

namespace ptdp {

ParamLayout::ParamLayout(const ModelConfig& c, const ShardSpec& s) {
  PTDP_CHECK(s.tp_size == 1, "tensor-parallel shards are not built yet");
  const int64_t h = c.hidden, ffn = c.ffn_hidden(), vp = c.padded_vocab(s.tp_size);
  const int end = s.layer_end < 0 ? c.layers : s.layer_end;
  const double std = c.init_std, out_std = c.init_std / std::sqrt(2.0 * c.layers);
  if (s.pre || s.post) add("wte", {vp, h}, true, std);  // tied: the last stage holds a copy
  if (s.pre) add("wpe", {c.seq_length, h}, true, std);
  for (int l = s.layer_begin; l < end; ++l) {
    std::string p = "layers." + std::to_string(l) + ".";
    add(p + "ln1.weight", {h}, false, 0, 1.0);
    add(p + "ln1.bias", {h}, false, 0);
    add(p + "qkv.weight", {3 * h, h}, true, std);
    add(p + "qkv.bias", {3 * h}, false, 0);
    add(p + "proj.weight", {h, h}, true, out_std);
    add(p + "proj.bias", {h}, false, 0);
    add(p + "ln2.weight", {h}, false, 0, 1.0);
    add(p + "ln2.bias", {h}, false, 0);
    add(p + "fc.weight", {ffn, h}, true, std);
    add(p + "fc.bias", {ffn}, false, 0);
    add(p + "fc2.weight", {h, ffn}, true, out_std);
    add(p + "fc2.bias", {h}, false, 0);
  }
  if (s.post) {
    add("lnf.weight", {h}, false, 0, 1.0);
    add("lnf.bias", {h}, false, 0);
  }
}

void ParamLayout::add(std::string name, Shape shape, bool decay, double std, double value) {
  ParamEntry e;
  e.name = std::move(name);
  e.shape = std::move(shape);
  e.offset = total_;
  e.decay = decay;
  e.init_std = std;
  e.init_value = value;
  total_ += shape_numel(e.shape);
  entries_.push_back(std::move(e));
}

const ParamEntry& ParamLayout::at(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return e;
  PTDP_CHECK(false, "no parameter named {}", name);
  __builtin_unreachable();
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
        p[i] = e.init_std > 0 ? static_cast<T>(e.init_std * normal01(seed, stream, i))
                              : static_cast<T>(e.init_value);
    };
    if (flat.dtype() == DType::F32) fill(flat.data<float>() + e.offset);
    else if (flat.dtype() == DType::F64) fill(flat.data<double>() + e.offset);
    else PTDP_CHECK(false, "init_params fills f32 or f64 buffers");
  }
}

}  // namespace ptdp
