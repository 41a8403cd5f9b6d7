// A GPT model shard (the whole model on one rank, or one pipeline stage and/or tensor-parallel
// slice): word + position embeddings, transformer layers, final LayerNorm, output layer tied to
// the word embedding and cross-entropy loss. Parameters and gradients are each one flat buffer.
// With --arch llama: word embedding only, LLaMA layers, final RMSNorm, an untied output layer.
// With t > 1 the word embedding and the output layer are vocab-parallel: the embedding sums
// its shards with one all-reduce; the loss reduces row max, sum of exponentials and target
// logit over the group in forward and communicates nothing in backward.
// With sequence parallelism (ShardSpec::sequence_parallel) the embedding's all-reduce is a
// reduce-scatter to this rank's n/t rows, the stages take and return n/t rows, the final
// LayerNorm runs on them and is all-gathered before the output layer (whose input gradient is
// reduce-scattered); the LayerNorm gradients are partial until sum_sequence_parallel_grads().
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "core/backend/backend.h"
#include "core/model/layer.h"
#include "core/model/param_source.h"
#include "core/model/params.h"

namespace ptdp {

class Gpt {
 public:
  // dtype: the compute dtype of weights and activations: f32, bf16 or f16 (mixed precision:
  // gradients are f32, see backend.h), f64 for gradient checks. tp: the tensor-parallel group
  // (required when shard.tp_size > 1, its size and rank matching the shard).
  Gpt(const ModelConfig& cfg, const ShardSpec& shard, Backend& be, DType dtype = DType::F32,
      Communicator* tp = nullptr);

  const ModelConfig& config() const { return cfg_; }
  const ShardSpec& shard() const { return shard_; }
  const ParamLayout& layout() const { return layout_; }
  Backend& backend() const { return be_; }
  DType dtype() const { return dtype_; }
  Tensor& params() { return params_; }
  Tensor& grads() { return grads_; }
  Tensor param(const std::string& name) const;  // a view into params()
  Tensor grad(const std::string& name) const;   // a view into grads()
  int64_t padded_vocab() const { return vp_; }
  int64_t vocab_start() const { return vp_ / shard_.tp_size * shard_.tp_rank; }

  void init(uint64_t seed);  // Megatron's initialisation, from the seed only
  void zero_grads();
  bool sequence_parallel() const { return shard_.sequence_parallel; }
  // Rows of the activations a stage takes and returns for b sequences: b*s, or b*s/t with
  // sequence parallelism.
  int64_t stage_rows(int b) const;
  // Sequence parallelism: sums the LayerNorm (RMSNorm) weight and bias gradients, computed
  // from this rank's rows only, over the tensor-parallel group, in one all-reduce (Megatron's
  // finalize_model_grads). Once per step, after the last backward pass; nothing without sp.
  void sum_sequence_parallel_grads();
  // ZeRO-3: from now on the parameters and gradients live in `source` (sharded), which the
  // passes ask for unit by unit (param_units); the whole buffers are freed. Whole model, t = 1.
  void use_param_source(ParamSource* source);
  bool sharded() const { return src_ != nullptr; }
  // The attention: block attention (flash) or the unfused kernels, and the context-parallel group
  // (size > 1 needs block): each forward then takes this rank's b*s/c tokens and targets (in
  // cp_positions' order), adds the position embeddings of their positions (GPT; LLaMA: rotates at
  // them) and returns the loss over them; stages take and return b*s/c rows (/t with sp). The
  // position embedding's gradient reaches the rows of this rank's chunks only; the data-parallel
  // and context-parallel reduction sums the rest.
  void set_attention(bool block, const ContextParallel& cp = {});
  // --recompute-activation (LayerDims::recompute_act): every layer's MLP activation recomputed in backward.
  void set_recompute_activation(bool on) { recompute_act_ = on; }
  const ContextParallel& context_parallel() const { return cp_; }

  // Activations of one micro-batch kept between its forward and backward pass.
  struct Cache {
    int b = 0;
    Recompute mode = Recompute::None;
    Tensor tokens, targets;        // [b*s] i32
    Tensor x_in;                   // input of the first layer of this shard
    std::vector<LayerCache> layers;
    Tensor xl, lnf, mean, rstd, logits, max, sum_exp;  // head
    int64_t bytes() const;
  };

  // Forward of b sequences (this rank's b*s/c tokens of them). First stage: `input` holds tokens [b*s] (i32); otherwise the
  // previous stage's activations [stage_rows(b), h] (so is *x_out, and the gradients). Last stage: targets [b*s] give the per-token loss
  // and *loss_sum receives its sum; otherwise *x_out receives this shard's output.
  std::unique_ptr<Cache> forward(int b, const Tensor& input, const Tensor* targets, Recompute mode,
                                 Tensor* x_out, double* loss_sum);
  // Backward. Last stage: loss_scale is d(objective)/d(per-token loss), e.g. 1/(tokens in the
  // global batch); otherwise dy_out is the gradient of this shard's output. Non-first stages
  // receive d(objective)/d(input) in *dx_in. Gradients accumulate into grads().
  // grads_ready(offset), when given, is called each time the gradients from `offset` to the end
  // of grads() are complete for this backward pass (after each layer, the embedding last), so
  // that data-parallel reductions of those buckets can start.
  void backward(Cache& cache, double loss_scale, const Tensor* dy_out, Tensor* dx_in,
                const std::function<void(int64_t offset)>& grads_ready = nullptr);

 private:
  LayerDims dims(int b) const;
  // A unit's parameters or gradients: a buffer and the layout element its first element is.
  struct Buf {
    Tensor t;
    int64_t base = 0;
  };
  Buf params_of(int unit);
  Buf grads_of(int unit);
  void release(int unit);
  void reduce(int unit);
  Tensor at(const Buf& b, const std::string& name) const;
  const char* output_name() const { return cfg_.tied_embedding() ? "wte" : "output"; }
  int unit_of_layer(int l) const { return 1 + l - shard_.layer_begin; }
  int head_unit() const { return 1 + shard_.layer_end - shard_.layer_begin; }
  int64_t valid_vocab() const;  // real (unpadded) vocabulary rows in this shard
  ModelConfig cfg_;
  ShardSpec shard_;
  Backend& be_;
  DType dtype_;
  Communicator* tp_;
  ParamLayout layout_;
  int64_t vp_;
  Tensor params_, grads_;
  ParamSource* src_ = nullptr;
  std::vector<FlatRange> units_;
  bool block_ = false;
  bool recompute_act_ = false;
  ContextParallel cp_;
};

}  // namespace ptdp
