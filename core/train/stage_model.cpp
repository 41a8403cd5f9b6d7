#include "core/train/stage_model.h"

#include "core/common/error.h"
#include "core/model/layer_split.h"

namespace ptdp {

std::vector<Gpt*> StageModel::pointers() const {
  std::vector<Gpt*> v;
  for (const auto& c : chunks) v.push_back(c.get());
  return v;
}

int64_t StageModel::parameters() const {
  int64_t n = 0;
  for (const auto& c : chunks) n += c->params().numel();
  return n;
}

StageModel build_stage_model(const ModelConfig& c, int t, int tp_rank, int stage, const LayerSplit& split,
                             Backend& be, Communicator* tp, uint64_t seed, DType dtype, bool sequence_parallel) {
  PTDP_CHECK(split.layers == c.layers, "build_stage_model: a split of {} layers for a model of {}", split.layers,
             c.layers);
  const int p = split.p, v = split.v;
  StageModel m;
  for (int j = 0; j < v; ++j) {
    ShardSpec shard;
    shard.tp_size = t;
    shard.tp_rank = tp_rank;
    shard.sequence_parallel = sequence_parallel;
    LayerRange r = chunk_layers(split, stage, j);
    shard.layer_begin = r.begin;
    shard.layer_end = r.end;
    shard.pre = stage == 0 && j == 0;
    shard.post = stage == p - 1 && j == v - 1;
    m.chunks.push_back(std::make_unique<Gpt>(c, shard, be, dtype, tp));
    m.chunks.back()->init(seed);
  }
  return m;
}

StageModel build_stage_model(const ModelConfig& c, int t, int tp_rank, int p, int stage, int v, Backend& be,
                             Communicator* tp, uint64_t seed) {
  return build_stage_model(c, t, tp_rank, stage, LayerSplit{c.layers, p, v}, be, tp, seed, DType::F32, false);
}

}  // namespace ptdp
