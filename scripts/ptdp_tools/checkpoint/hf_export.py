"""A ptdp checkpoint as a Hugging Face model folder (`ptdp export-hf`, `ptdp_checkpoint.py export-hf`:
cli.py), its shards gathered into one model first (gather.py).

GPT -> transformers' GPT2LMHeadModel, LLaMA -> LlamaForCausalLM: `config.json` and
`model.safetensors` (f32, or bf16/f16 on request), so that `AutoModelForCausalLM.from_pretrained`
loads the folder and computes the loss ptdp computes on the same tokens.

The mapping (docs/PYTORCH.md, "Export to Hugging Face"):
- the padded vocabulary rows of `wte` / `output` are dropped (ptdp's softmax never sees them);
- GPT-2's Conv1D layers store [in, out]: ptdp's [out, in] matrices are transposed, and its QKV
  rows (head by head: q, k, v) become GPT-2's columns (all heads' q, then k, then v);
- LLaMA's QKV rows (group by group: the group's query heads, its key, its value) split into
  q_proj, k_proj and v_proj; ptdp's rotary convention (dimension i pairs with i + head_dim/2) is
  transformers' rotate_half, so no permutation is needed;
- the norm epsilon and rotary base come from the checkpoint (format version 7), or from the caller
  for older checkpoints that did not record them.
- bos_token_id and eos_token_id come from the caller (cli.py: the tokenizer's ids), else null.
Needs numpy; safetensors is written here (an 8-byte header length, a JSON header, the raw bytes).
"""

from __future__ import annotations

import json
import os
import struct

from ptdp_tools import atomic
from ptdp_tools.checkpoint import gather
from ptdp_tools.checkpoint.reader import CheckpointError, Shard

# ptdp's defaults (core/model/config.h) for checkpoints older than version 7.
DEFAULT_NORM_EPS = 1e-5
DEFAULT_ROPE_THETA = 10000.0
DTYPES = {"f32": ("F32", "float32"), "bf16": ("BF16", "bfloat16"), "f16": ("F16", "float16")}


def _to_dtype(np, a, dtype: str):
    """a (f32) as little-endian bytes of dtype: f32, f16, or bf16 (round to nearest even)."""
    a = np.ascontiguousarray(a, dtype="<f4")
    if dtype == "f32":
        return a.tobytes()
    if dtype == "f16":
        return a.astype("<f2").tobytes()
    bits = a.view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(a)
    rounded[nan] = (bits[nan] >> 16) | 0x40  # keep NaN a (quiet) NaN
    return rounded.astype("<u2").tobytes()


def write_safetensors(np, path: str, tensors: list, dtype: str, metadata: dict) -> None:
    """tensors: (name, f32 array) in file order. Written to a temporary file, then renamed."""
    header, offset, blobs = {}, 0, []
    for name, a in tensors:
        blob = _to_dtype(np, a, dtype)
        header[name] = {"dtype": DTYPES[dtype][0], "shape": list(a.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    atomic.write(path, [struct.pack("<Q", len(text)), text, *blobs])


def gpt2(p: dict, shard: Shard, norm_eps: float) -> tuple:
    """(config, tensors) of GPT2LMHeadModel from the whole model's tensors p (gather.gather)."""
    h, a, V = shard.hidden, shard.heads, shard.vocab_size
    hd = h // a
    out = [("transformer.wte.weight", p["wte"][:V]), ("transformer.wpe.weight", p["wpe"])]
    for i in range(shard.layers):
        L, n = f"layers.{i}.", f"transformer.h.{i}."
        # ptdp rows: head by head q | k | v  ->  GPT-2 columns: every head's q, then k, then v.
        qkv_w = p[L + "qkv.weight"].reshape(a, 3, hd, h).transpose(1, 0, 2, 3).reshape(3 * h, h)
        qkv_b = p[L + "qkv.bias"].reshape(a, 3, hd).transpose(1, 0, 2).reshape(3 * h)
        out += [(n + "ln_1.weight", p[L + "ln1.weight"]), (n + "ln_1.bias", p[L + "ln1.bias"]),
                (n + "attn.c_attn.weight", qkv_w.T), (n + "attn.c_attn.bias", qkv_b),
                (n + "attn.c_proj.weight", p[L + "proj.weight"].T), (n + "attn.c_proj.bias", p[L + "proj.bias"]),
                (n + "ln_2.weight", p[L + "ln2.weight"]), (n + "ln_2.bias", p[L + "ln2.bias"]),
                (n + "mlp.c_fc.weight", p[L + "fc.weight"].T), (n + "mlp.c_fc.bias", p[L + "fc.bias"]),
                (n + "mlp.c_proj.weight", p[L + "fc2.weight"].T), (n + "mlp.c_proj.bias", p[L + "fc2.bias"])]
    out += [("transformer.ln_f.weight", p["lnf.weight"]), ("transformer.ln_f.bias", p["lnf.bias"])]
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": V,
              "n_positions": shard.seq_length, "n_embd": h, "n_layer": shard.layers, "n_head": a,
              "n_inner": shard.ffn_hidden, "activation_function": "gelu_new", "layer_norm_epsilon": norm_eps,
              "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0, "scale_attn_weights": True,
              "tie_word_embeddings": True, "initializer_range": 0.02}
    return config, out  # lm_head.weight is tied to wte: transformers ties it on load


def llama(p: dict, shard: Shard, norm_eps: float, rope_theta: float) -> tuple:
    """(config, tensors) of LlamaForCausalLM from the whole model's tensors p (gather.gather)."""
    h, a, V = shard.hidden, shard.heads, shard.vocab_size
    g = shard.query_groups or a
    hd, group = h // a, a // g
    out = [("model.embed_tokens.weight", p["wte"][:V])]
    for i in range(shard.layers):
        L, n = f"layers.{i}.", f"model.layers.{i}."
        # ptdp rows: group by group, the group's query heads, its key, its value.
        qkv = p[L + "qkv.weight"].reshape(g, group + 2, hd, h)
        out += [(n + "input_layernorm.weight", p[L + "ln1.weight"]),
                (n + "self_attn.q_proj.weight", qkv[:, :group].reshape(a * hd, h)),
                (n + "self_attn.k_proj.weight", qkv[:, group].reshape(g * hd, h)),
                (n + "self_attn.v_proj.weight", qkv[:, group + 1].reshape(g * hd, h)),
                (n + "self_attn.o_proj.weight", p[L + "proj.weight"]),
                (n + "post_attention_layernorm.weight", p[L + "ln2.weight"]),
                (n + "mlp.gate_proj.weight", p[L + "gate.weight"]), (n + "mlp.up_proj.weight", p[L + "up.weight"]),
                (n + "mlp.down_proj.weight", p[L + "down.weight"])]
    out += [("model.norm.weight", p["lnf.weight"]), ("lm_head.weight", p["output"][:V])]
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": V, "hidden_size": h,
              "intermediate_size": shard.ffn_hidden, "num_hidden_layers": shard.layers, "num_attention_heads": a,
              "num_key_value_heads": g, "max_position_embeddings": shard.seq_length, "rms_norm_eps": norm_eps,
              "rope_theta": rope_theta, "rope_scaling": None, "hidden_act": "silu", "attention_bias": False,
              "mlp_bias": False, "attention_dropout": 0.0, "tie_word_embeddings": False, "initializer_range": 0.02}
    return config, out


def _first_given(*values):
    return next(v for v in values if v is not None)


def numpy_module():
    """numpy, or a CheckpointError saying how to install it."""
    try:
        import numpy
    except ImportError:
        raise CheckpointError("export-hf needs numpy: install it (Debian: apt-get install python3-numpy; pip: "
                              "pip install numpy), or run scripts/setup_hf_venv.sh DIR and use DIR/bin/python") \
            from None
    return numpy


def export(shards: list, out_dir: str, dtype: str = "f32", norm_eps: float | None = None,
           rope_theta: float | None = None, divisible_by: int | None = None, special_ids: dict | None = None) -> dict:
    """Writes out_dir/config.json and out_dir/model.safetensors from every shard of one save
    (reader.read_all_shards; one for a whole-model save); returns the config. norm_eps, rope_theta
    and divisible_by (--make-vocab-size-divisible-by): required to agree with the checkpoint when
    it records them (version 7, 9), else they are what the model was trained with (default:
    ptdp's defaults). special_ids: bos_token_id and eos_token_id for config.json (None:
    not known, written as null)."""
    np = numpy_module()
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    shard = shards[0]
    if shard.arch is None:
        raise CheckpointError(f"{shard.path} has format version {shard.version}, which does not record the "
                              "architecture (version 4 on)")
    if shard.arch == "gpt" and shard.query_groups and shard.query_groups != shard.heads:
        raise CheckpointError(f"{shard.path}: a GPT with {shard.query_groups} query groups for {shard.heads} "
                              "heads has no GPT-2 counterpart (GPT-2 has no grouped-query attention)")
    for what, given, saved in (("--norm-epsilon", norm_eps, shard.norm_eps),
                               ("--rope-theta", rope_theta, shard.rope_theta)):
        if given is not None and saved is not None and given != saved:
            raise CheckpointError(f"{what} {given:g}: {shard.path} was trained with {saved:g}")
    eps = _first_given(shard.norm_eps, norm_eps, DEFAULT_NORM_EPS)
    theta = _first_given(shard.rope_theta, rope_theta, DEFAULT_ROPE_THETA)
    p = gather.gather(np, shards, divisible_by)
    config, tensors = gpt2(p, shard, eps) if shard.arch == "gpt" else llama(p, shard, eps, theta)
    ids = special_ids or {}
    for key, value in ids.items():
        if value is not None and not 0 <= value < shard.vocab_size:
            raise CheckpointError(f"{key} {value} (the tokenizer's) is outside the model's vocabulary of "
                                  f"{shard.vocab_size}: name the tokenizer the dataset was made with")
    config["bos_token_id"], config["eos_token_id"] = ids.get("bos_token_id"), ids.get("eos_token_id")
    config["torch_dtype"] = DTYPES[dtype][1]
    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(np, os.path.join(out_dir, "model.safetensors"), tensors, dtype,
                      {"format": "pt", "ptdp_checkpoint": os.path.dirname(os.path.dirname(shard.path)),
                       "ptdp_iteration": shard.iteration})
    atomic.write(os.path.join(out_dir, "config.json"), json.dumps(config, indent=2) + "\n")
    return config
