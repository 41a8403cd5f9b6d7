// FLOP and parameter accounting. GPT: the paper's Eq. (2) and Eq. (3) (with activation
// recomputation, factor 96) and model FLOPs without recomputation (factor 72). LLaMA: the same
// accounting counted from its matrices (docs/SIMULATOR.md, "LLaMA").
#pragma once
#include <cstdint>

#include "core/model/config.h"

namespace ptdp {

// Eq. (2): P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)).
double params_eq2(const ModelConfig& c);
// Parameters the model really holds (unpadded vocabulary), counted from its tensors
// (tensor_inventory.h). gpt: Eq. (2) plus the final LayerNorm; llama: l (4h^2 + 3hf + 2h) + 2Vh + h
// (untied output layer, no biases, no position table). With g query groups (grouped-query
// attention) the QKV matrix has h (h + 2 g h/a) entries instead of 3h^2 (llama2-70b: 68,976,648,192).
int64_t params_exact(const ModelConfig& c);
// Forward FLOPs of one token: l (2 (4h^2 + 3hf) + 4sh) + 2hV for llama, 24 l h^2 + 4 l s h + 2hV
// for gpt (Megatron's counting: attention 2 * 2 s h per layer, f = 4h). With g query groups the
// QKV GEMM is 2h(h + 2g h/a) instead of 6h^2: Megatron's num_floating_point_operations
// (12 B s l h^2 (1 + g/a + s/h) for attention, before its causal halving of the s/h term).
double flops_forward_per_token(const ModelConfig& c);
// Hardware FLOPs per iteration with full recomputation: forward, backward (twice the forward)
// and the layers' forward again. gpt (4h MLP, multi-head attention): exactly Eq. (3),
// F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)); otherwise (llama, grouped-query attention,
// --ffn-hidden-size) B s (4 F_layers + 3 F_logits) from the matrices, which is Eq. (3) generalised.
double flops_eq3(const ModelConfig& c, int64_t global_batch);
// Model FLOPs, no recomputation: 3 B s F_forward (gpt: 72 B s l h^2 (1 + s/(6h) + V/(12 l h))).
double flops_model(const ModelConfig& c, int64_t global_batch);
// Megatron-LM's num_floating_point_operations (training.py, transformer_flops) for one global
// batch: 3 passes x 2 FLOPs per multiply-add over the QKV and output projections (grouped-query
// attention: h (h + 2 g h/a) for QKV), the MLP (SwiGLU: three matrices of f), the causal
// attention halved (s^2 h per layer, QK^T and its product with V) and the logits over the
// vocabulary padded for t tensor-parallel ranks. What `--log-format megatron` prints as
// "throughput per GPU" and TensorBoard's "throughput".
double flops_megatron(const ModelConfig& c, int64_t global_batch, int tp);

}  // namespace ptdp
