// Megatron-LM's transformer layer as kernels (the megatron-2021, megatron-2022, mcore and
// megatron-deepspeed stacks): fp16 activations, fused scale-mask-softmax, bias-GeLU and
// bias-dropout-add (GPT's dropout, a 1-byte mask; LLaMA has none), the attention core unfused or,
// under flash attention, one kernel that keeps the scores on chip.
#include "core/sim/kernel_builder.h"

namespace ptdp::sim {

namespace {

// The attention core: Q K^T, softmax, dropout, P V. Flash attention: the scores stay on chip and
// the causal mask skips the blocks above the diagonal (half the products).
void attention_core_forward(KernelBuilder& x, const LayerShape& d, const SoftwareStack& stack, const RunConfig& cfg) {
  if (d.cp > 1) return cp_attention_forward(x, d);  // flash attention's blocks (stack_refusal)
  const double s = d.s, hd = d.hd;
  if (stack.flash_attention) {
    x.attention("q k^T (flash)", s, s, hd, d.b * d.at / 2);
    x.attention("p v (flash)", s, hd, s, d.b * d.at / 2);
    return;
  }
  // Megatron's fused causal softmax (stack.h) reads half the scores and writes them all.
  const double softmax_bytes = fused_causal_softmax(stack, cfg) ? 1.5 * d.E : 2 * d.E;
  x.attention("q k^T", s, s, hd, d.b * d.at);
  x.membound("scale-mask-softmax", softmax_bytes * d.scores);
  if (!d.llama) x.membound("attention dropout", (2 * d.E + 1) * d.scores);  // 1-byte mask
  x.attention("p v", s, hd, s, d.b * d.at);
}

// Its backward. The fused causal softmax's reads half of the gradient and of the output and
// writes the whole gradient.
void attention_core_backward(KernelBuilder& x, const LayerShape& d, const SoftwareStack& stack, const RunConfig& cfg) {
  if (d.cp > 1) return cp_attention_backward(x, d);
  const double s = d.s, hd = d.hd;
  if (stack.flash_attention) {
    // The fused backward recomputes Q K^T and the softmax on chip: five products over the
    // causal half (the scores, dP, dV, dQ, dK), no s x s traffic.
    x.attention("q k^T again (flash)", s, s, hd, d.b * d.at / 2);
    x.attention("dP = dY V^T (flash)", s, s, hd, d.b * d.at / 2);
    x.attention("dV = P^T dY (flash)", s, hd, s, d.b * d.at / 2);
    x.attention("dQ = dS K (flash)", s, hd, s, d.b * d.at / 2);
    x.attention("dK = dS^T Q (flash)", s, hd, s, d.b * d.at / 2);
    return;
  }
  const double softmax_bytes = fused_causal_softmax(stack, cfg) ? 2 * d.E : 3 * d.E;
  x.attention("dP = dY V^T", s, s, hd, d.b * d.at);
  x.attention("dV = P^T dY", s, hd, s, d.b * d.at);
  if (!d.llama) x.membound("attention dropout backward", (2 * d.E + 1) * d.scores);
  x.membound("softmax backward", softmax_bytes * d.scores);
  x.attention("dQ = dS K", s, hd, s, d.b * d.at);
  x.attention("dK = dS^T Q", s, hd, s, d.b * d.at);
}

// A norm of the b s h residual stream (LayerNorm; llama's RMSNorm moves the same bytes).
void norm_forward(KernelBuilder& x, const LayerShape& d, const char* name) {
  x.membound(name, 2 * d.E * d.bsh * d.rowshare);
}
void norm_backward(KernelBuilder& x, const LayerShape& d, const char* name) {
  x.membound(name, 4 * d.E * d.bsh * d.rowshare);  // x, dy, dx, residual sum
}
// The residual add after proj and fc2; GPT's fuses the bias and the dropout into it.
void residual_forward(KernelBuilder& x, const LayerShape& d, const char* name) {
  x.membound(name, (d.llama ? 3 * d.E : 3 * d.E + 1) * d.bsh * d.rowshare);
}

// QKV, the rotary embedding of q and k (llama) and, without flash attention, grouped-query
// attention's keys and values expanded to every head.
void qkv_forward(KernelBuilder& x, const LayerShape& d, const SoftwareStack& stack, const TpRules& r) {
  column_forward(x, d, r, "qkv", d.qkvt);  // gpt: bias in the GEMM epilogue
  if (d.llama) x.membound("rotary q k", 2 * d.E * d.rows * (d.ht + d.kvt / 2));
  // Megatron's unfused core attention expands k and v to every head (repeat_interleave: read
  // kvt, write 2 ht per row).
  if (d.gqa && !stack.flash_attention) x.membound("expand k v", d.E * d.rows * (d.kvt + 2 * d.ht));
}

void mlp_forward(KernelBuilder& x, const LayerShape& d, const TpRules& r) {
  x.in(kModuleFc);
  column_forward(x, d, r, "fc", d.fc_out);  // llama: gate and up, one GEMM
  if (d.llama) x.membound("swiglu", 3 * d.E * d.rows * d.ft);  // silu(gate) * up
  else x.membound("bias-gelu", 2 * d.E * d.rows * d.ft);
  x.in(kModuleFc2);
  row_forward(x, d, r, "fc2", d.ft);  // llama: down
  residual_forward(x, d, d.llama ? "residual" : "bias-dropout-add");
}

void mlp_backward(KernelBuilder& x, const LayerShape& d, const TpRules& r) {
  // llama has no biases and no dropout: their backward kernels are skipped.
  if (!d.llama) x.in(kModuleFc2, true).membound("bias-dropout-add backward", (3 * d.E + 1) * d.bsh * d.rowshare);
  x.in(kModuleFc2);
  row_backward(x, d, r, "fc2", d.ft);
  if (!d.llama) x.membound("fc2 bias grad", d.E * d.bsh * d.rowshare);  // column sums
  x.in(kModuleFc);
  if (d.llama) {
    x.membound("swiglu backward", 5 * d.E * d.rows * d.ft);  // gate, up, dy in; dgate, dup out
  } else {
    x.membound("gelu backward", 3 * d.E * d.rows * d.ft);
    x.membound("fc bias grad", d.E * d.rows * d.ft);
  }
  column_backward(x, d, r, "fc", d.fc_out);
}

void attention_backward(KernelBuilder& x, const LayerShape& d, const SoftwareStack& stack, const RunConfig& cfg,
                        const TpRules& r) {
  x.in(kModuleProj, true);
  norm_backward(x, d, "ln2 backward");
  if (!d.llama) x.membound("bias-dropout-add backward", (3 * d.E + 1) * d.bsh * d.rowshare);
  x.in(kModuleProj);
  row_backward(x, d, r, "proj", d.ht);
  if (!d.llama) x.membound("proj bias grad", d.E * d.bsh * d.rowshare);
  x.membound("copy to [b, a, s, d]", 2 * d.E * d.rows * d.ht);
  x.in(kModuleQkv, true);
  attention_core_backward(x, d, stack, cfg);
  // Grouped-query attention without flash attention: the expanded k and v gradients summed back
  // to their groups (read 2 ht, write kvt per row).
  if (d.gqa && !stack.flash_attention) x.membound("sum k v gradients", d.E * d.rows * (2 * d.ht + d.kvt));
  if (d.llama) x.membound("rotary backward", 2 * d.E * d.rows * (d.ht + d.kvt / 2));  // of dq and dk
  x.membound("q k v gradients to QKV layout", 2 * d.E * d.rows * d.qkvt);
  x.in(kModuleQkv);
  if (!d.llama) x.membound("qkv bias grad", d.E * d.rows * d.qkvt);
  column_backward(x, d, r, "qkv", d.qkvt);
  norm_backward(x, d, "ln1 backward");
}

}  // namespace

void megatron_layer_forward(KernelBuilder& x, const LayerShape& d, const SoftwareStack& stack, const RunConfig& cfg,
                            bool core_only) {
  const TpRules r = tp_rules(stack, d);
  x.fp8 = d.fp8;  // the linear layers only: attention and the output layer stay 16-bit
  x.weight_cast_share = d.weight_cast_share;
  if (d.fp8) fp8_amax_update(x);
  if (core_only) {
    attention_core_forward(x.in(kModuleQkv), d, stack, cfg);
    return;
  }
  norm_forward(x.in(kModuleQkv, true), d, "ln1");
  qkv_forward(x.in(kModuleQkv), d, stack, r);
  attention_core_forward(x, d, stack, cfg);
  x.membound("copy to [s, b, h]", 2 * d.E * d.rows * d.ht);
  x.in(kModuleProj);
  row_forward(x, d, r, "proj", d.ht);
  residual_forward(x, d, d.llama ? "residual" : "bias-dropout-add");
  norm_forward(x, d, "ln2");
  mlp_forward(x, d, r);
}

void megatron_layer_backward(KernelBuilder& x, const LayerShape& d, const SoftwareStack& stack, const RunConfig& cfg) {
  const TpRules r = tp_rules(stack, d);
  x.fp8 = d.fp8;
  x.weight_cast_share = d.weight_cast_share;
  if (d.fp8) fp8_amax_update(x);
  mlp_backward(x, d, r);
  attention_backward(x, d, stack, cfg, r);
}

}  // namespace ptdp::sim
