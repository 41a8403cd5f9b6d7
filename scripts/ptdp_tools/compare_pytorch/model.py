"""ptdp's GPT and LLaMA (core/model) in PyTorch, their parameters named, shaped and ordered as ptdp's
flat buffer (checkpoint/layout.py), so that ptdp's weights load into it one to one."""

from __future__ import annotations

import math

from ptdp_tools.checkpoint import layout


def build_model(torch, layers, hidden, heads, seq_length, vocab_size, dtype, device, recompute="none",
                attention="auto", eps=1e-5, arch="gpt", rope_theta=10000.0, kv_heads=0):
    """arch gpt: ptdp's GPT. arch llama: ptdp's LLaMA (RMSNorm with eps, rotary embeddings with base
    rope_theta, SwiGLU, no biases, untied output layer); ptdp's eps and theta default to 1e-5 and
    10000 (core/model/config.h). kv_heads (0: heads): grouped-query attention with that many key/value
    heads (transformers' num_key_value_heads): ptdp's QKV rows are Megatron-core's, per group its
    heads/kv_heads query heads, then its key, then its value; each key/value head serves its group's
    query heads (repeat_interleave, as transformers' LlamaAttention does)."""
    nn, F = torch.nn, torch.nn.functional
    kv_heads = kv_heads or heads
    entries = layout.param_layout(layers, hidden, seq_length, vocab_size, arch=arch, heads=heads,
                                  query_groups=kv_heads)
    hd = hidden // heads
    group = heads // kv_heads  # query heads per key/value head
    use_sdpa = attention == "sdpa" or (attention == "auto" and hasattr(F, "scaled_dot_product_attention"))

    def param(shape):
        return nn.Parameter(torch.zeros(shape, dtype=dtype, device=device))

    def attend(q, k, v):
        """Causal softmax attention of [b, heads, s, hd] tensors."""
        s = q.shape[2]
        if use_sdpa:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        mask = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.matmul(torch.softmax(scores.float(), dim=-1).to(v.dtype), v)

    def split_qkv(qkv):
        """The projection [b, s, (heads + 2 kv_heads) hd] to q [b, heads, s, hd] and k, v [b, kv_heads,
        s, hd]: per group (per head without GQA) the group's query heads, its key, its value."""
        b, s = qkv.shape[:2]
        qkv = qkv.view(b, s, kv_heads, group + 2, hd)
        q = qkv[:, :, :, :group].reshape(b, s, heads, hd).transpose(1, 2)
        return q, qkv[:, :, :, group].transpose(1, 2), qkv[:, :, :, group + 1].transpose(1, 2)

    def expand_kv(x):
        """[b, kv_heads, s, hd] -> [b, heads, s, hd]: key/value head j serves query heads j*group ..."""
        return x if group == 1 else torch.repeat_interleave(x, group, dim=1)

    def rms_norm(x, weight):
        """x / sqrt(mean(x^2) + eps) * weight over the last dimension, computed in f32."""
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)).to(x.dtype) * weight

    # Rotary embeddings, Megatron's non-interleaved convention: dimension i < hd/2 of a head pairs
    # with i + hd/2, both rotating by position * theta^(-2i/hd). Tables in f64, used in the model dtype.
    inv_freq = rope_theta ** (-torch.arange(0, hd // 2, dtype=torch.float64) * 2.0 / hd)
    angles = torch.outer(torch.arange(seq_length, dtype=torch.float64), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)  # [s, hd]
    rope_cos, rope_sin = angles.cos().to(dtype).to(device), angles.sin().to(dtype).to(device)

    def rotate(x):
        """x: [b, heads, s, hd]; x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1)."""
        s = x.shape[2]
        x1, x2 = x[..., :hd // 2], x[..., hd // 2:]
        return x * rope_cos[:s] + torch.cat([-x2, x1], dim=-1) * rope_sin[:s]

    class LlamaLayer(nn.Module):
        def __init__(self, prefix):
            super().__init__()
            for e in entries:
                if e.name.startswith(prefix):
                    setattr(self, e.name[len(prefix):].replace(".", "_"), param(e.shape))

        def forward(self, x):
            b, s, h = x.shape
            a = rms_norm(x, self.ln1_weight)
            q, k, v = split_qkv(F.linear(a, self.qkv_weight))  # per head (per group): q | k | v
            q, k = rotate(q), rotate(k)
            y = attend(q, expand_kv(k), expand_kv(v)).transpose(1, 2).reshape(b, s, h)
            x = x + F.linear(y, self.proj_weight)
            m = rms_norm(x, self.ln2_weight)
            m = F.silu(F.linear(m, self.gate_weight)) * F.linear(m, self.up_weight)
            return x + F.linear(m, self.down_weight)

    class Layer(nn.Module):
        def __init__(self, prefix):
            super().__init__()
            self.prefix = prefix
            for e in entries:
                if e.name.startswith(prefix):
                    setattr(self, e.name[len(prefix):].replace(".", "_"), param(e.shape))

        def forward(self, x):
            b, s, h = x.shape
            a = F.layer_norm(x, (h,), self.ln1_weight, self.ln1_bias, eps)
            q, k, v = split_qkv(F.linear(a, self.qkv_weight, self.qkv_bias))  # per head (per group): q | k | v
            y = attend(q, expand_kv(k), expand_kv(v))  # [b, heads, s, hd]
            y = y.transpose(1, 2).reshape(b, s, h)
            x = x + F.linear(y, self.proj_weight, self.proj_bias)
            m = F.layer_norm(x, (h,), self.ln2_weight, self.ln2_bias, eps)
            m = F.gelu(F.linear(m, self.fc_weight, self.fc_bias), approximate="tanh")
            return x + F.linear(m, self.fc2_weight, self.fc2_bias)

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.entries = entries
            self.wte = param(entries[0].shape)  # [padded V, h]; GPT: tied with the output layer
            self.lnf_weight = param((hidden,))
            if arch == "llama":
                self.output = param(entries[-1].shape)  # [padded V, h], untied
                self.layers = nn.ModuleList([LlamaLayer(f"layers.{i}.") for i in range(layers)])
            else:
                self.wpe = param(entries[1].shape)
                self.lnf_bias = param((hidden,))
                self.layers = nn.ModuleList([Layer(f"layers.{i}.") for i in range(layers)])

        def ptdp_params(self):
            """(ptdp name, parameter) in ptdp's flat-buffer order."""
            out = []
            for e in entries:
                if e.name.startswith("layers."):
                    i, rest = e.name[len("layers."):].split(".", 1)
                    out.append((e.name, getattr(self.layers[int(i)], rest.replace(".", "_"))))
                else:
                    out.append((e.name, getattr(self, e.name.replace(".", "_"))))
            return out

        def forward(self, tokens, targets):
            """Sum over tokens of the cross-entropy; the padded vocabulary never enters the softmax."""
            s = tokens.shape[1]
            x = F.embedding(tokens, self.wte)
            if arch != "llama":
                x = x + self.wpe[:s]
            for layer in self.layers:
                if recompute == "full" and torch.is_grad_enabled():
                    x = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)
                else:
                    x = layer(x)
            if arch == "llama":
                logits = F.linear(rms_norm(x, self.lnf_weight), self.output)[..., :vocab_size]
            else:
                x = F.layer_norm(x, (hidden,), self.lnf_weight, self.lnf_bias, eps)
                logits = F.linear(x, self.wte)[..., :vocab_size]
            return F.cross_entropy(logits.float().reshape(-1, vocab_size), targets.reshape(-1), reduction="sum")

    if recompute == "full":
        import torch.utils.checkpoint  # noqa: F401
    return Gpt()
