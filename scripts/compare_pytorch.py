#!/usr/bin/env python3
"""Compares ptdp with the same GPT or LLaMA written in PyTorch (docs/PYTORCH.md).

  compare_pytorch.py loss        ptdp's per-iteration losses against PyTorch's, from ptdp's own
                                 initial weights on the same batches, with the same AdamW,
                                 gradient clipping and learning-rate schedule (--arch gpt|llama)
  compare_pytorch.py throughput  TFLOP/s per GPU (the paper's Eq. 3) of ptdp, PyTorch eager and
                                 torch.compile on the same device, for given model shapes;
                                 writes results/gpu/compare_pytorch.csv atomically

Exit codes: 0 agreement / measured, 1 disagreement or a failed measurement, 2 refused (one
line: no PyTorch, no ptdp binary, --device cuda without a GPU, bad arguments).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import importlib
import io
import math
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import NoReturn

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import ptdp_checkpoint as ckpt  # noqa: E402
import ptdp_data as pdata  # noqa: E402

PROG = "compare_pytorch.py"
# Loss agreement, the largest |loss_ptdp - loss_torch| / |loss_ptdp| allowed over the run.
# f32: both sides compute in f32 and differ only in summation order (measured on the CPU,
# tiny model, 10 steps: see docs/PYTORCH.md). bf16: 8-bit mantissas, rounding in different
# places on each side.
LOSS_RTOL = {"f32": 2e-5, "bf16": 2e-2, "f16": 2e-2}
DEFAULT_SHAPES = ["h=2048,a=16,l=4,s=2048,b=4,V=51200", "h=4096,a=32,l=4,s=2048,b=2,V=51200"]
CSV_COLUMNS = ["implementation", "status", "device", "precision", "recompute", "arch", "layers", "hidden", "heads",
               "seq_length", "vocab_size", "micro_batch", "global_batch", "iters", "warmup", "iter_time_ms",
               "tflops_per_gpu", "model_tflops_per_gpu", "mfu", "tokens_per_s", "peak_mem_gb", "note", "git_sha", "host", "torch_version",
               "timestamp", "command", "pair", "threads", "ratio_min", "ratio_median", "ratio_max"]


def refuse(msg: str) -> NoReturn:
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(2)


# ---------------------------------------------------------------------------------------------
# Environment checks


def import_torch():
    try:
        torch = importlib.import_module("torch")
    except ImportError as e:
        hint = " (Debian's python3-torch is installed for /usr/bin/python3)" if os.path.exists(
            "/usr/lib/python3/dist-packages/torch") and sys.executable != "/usr/bin/python3" else ""
        refuse(f"PyTorch is not installed for {sys.executable}: {e}{hint}")
    return torch


def check_ptdp(path: str) -> str:
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        refuse(f"--ptdp {path}: no ptdp executable there (build it: cmake --build build --target ptdp)")
    return os.path.abspath(path)


def check_device(torch, device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        refuse(f"--device cuda: PyTorch sees no GPU (torch {torch.__version__}, CUDA build "
               f"{torch.version.cuda or 'none'}, torch.cuda.is_available() is false)")


def git_sha() -> str:
    try:
        sha = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (sha + ("-dirty" if dirty else "")) if sha else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_name(torch, device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name(torch.cuda.current_device())
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


# ---------------------------------------------------------------------------------------------
# The model: ptdp's GPT (core/model) in PyTorch, parameters named and shaped as ptdp's


def llama_ffn_hidden(hidden: int) -> int:
    """ptdp's LLaMA FFN size (core/model/config.h): 8h/3 rounded up to a multiple of 256."""
    return (8 * hidden // 3 + 255) // 256 * 256


def flops_iteration(shape: dict, recompute: str) -> tuple:
    """(hardware FLOPs, model FLOPs) of one iteration, as core/accounting/flops.cpp counts them:
    forward per token l (2 (4h^2 + mlp) + 4 s h) + 2 h V, mlp 2 h 4h (gpt) or 3 h f (llama); model
    FLOPs are 3 passes, hardware FLOPs add the layers' forward again under full recomputation
    (for gpt exactly the paper's Eq. 3)."""
    l, h, s, V, B = (shape[k] for k in ("layers", "hidden", "seq_length", "vocab_size", "global_batch"))
    mlp = 3 * h * llama_ffn_hidden(h) if shape.get("arch", "gpt") == "llama" else 2 * h * 4 * h
    layer = 2.0 * (4 * h * h + mlp) + 4.0 * s * h
    logits = 2.0 * h * V
    model = 3.0 * B * s * (l * layer + logits)
    hardware = model + (B * s * l * layer if recompute == "full" else 0.0)
    return hardware, model


def lr_at(num_steps: int, max_lr: float, min_lr: float, warmup: int, decay: int) -> float:
    """Megatron's OptimizerParamScheduler.get_lr (cosine style, init_lr 0) after num_steps optimizer
    steps: iteration k (1-based) runs at lr_at(k - 1), so the first iteration of a warm-up runs at
    0. decay 0: constant max_lr after the warm-up (ptdp refuses 0 < decay <= warmup)."""
    if warmup > 0 and num_steps <= warmup:
        return max_lr * num_steps / warmup
    if decay <= warmup:
        return max_lr
    if num_steps > decay:
        return min_lr
    ratio = (num_steps - warmup) / (decay - warmup)
    return min_lr + 0.5 * (math.cos(math.pi * ratio) + 1.0) * (max_lr - min_lr)


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
    entries = ckpt.param_layout(layers, hidden, seq_length, vocab_size, arch=arch, heads=heads,
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


class Trainer:
    """One ptdp iteration in PyTorch: micro-batches accumulate d(mean loss), f32 master weights
    (a copy when the model is bf16/f16), global-norm clipping as AdamW::step_with_norm, AdamW
    with decay on matrices only, the learning rate set from the schedule each step."""

    def __init__(self, torch, model, opt_args, fused=False, master_init=None):
        """master_init: ptdp's flat f32 master weights (its checkpoint), when the model is 16-bit."""
        self.torch, self.model, self.a = torch, model, opt_args
        named = model.ptdp_params()
        self.params = [p for _, p in named]
        self.copy_master = self.params[0].dtype != torch.float32
        if not self.copy_master:
            self.master = self.params
        elif master_init is not None and master_init.dtype == torch.float32:
            self.master = [torch.nn.Parameter(master_init[e.offset:e.offset + e.numel].view(e.shape).to(p.device).clone())
                           for e, p in zip(model.entries, self.params)]
        else:
            self.master = [torch.nn.Parameter(p.detach().float().clone()) for p in self.params]
        decay = {e.name for e in model.entries if e.decay}
        groups = [{"params": [m for (n, _), m in zip(named, self.master) if n in decay],
                   "weight_decay": opt_args.weight_decay},
                  {"params": [m for (n, _), m in zip(named, self.master) if n not in decay], "weight_decay": 0.0}]
        kwargs = {"fused": True} if fused else {}
        self.opt = torch.optim.AdamW(groups, lr=opt_args.lr, betas=(opt_args.adam_beta1, opt_args.adam_beta2),
                                     eps=opt_args.adam_eps, **kwargs)
        self.step_no = 0

    def step(self, microbatches, global_batch: int, seq: int):
        """microbatches: [(tokens, targets)]; returns (loss tensor, grad norm tensor, lr)."""
        torch, a = self.torch, self.a
        for p in self.params:
            p.grad = None
        loss_sum = None
        for tok, tgt in microbatches:
            loss = self.model(tok, tgt)
            (loss / (global_batch * seq)).backward()
            loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
        if self.copy_master:
            for m, p in zip(self.master, self.params):
                m.grad = p.grad.float()
        grads = [m.grad for m in self.master]
        norm = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g, 2, dtype=torch.float64) for g in grads]), 2)
        if a.clip_grad > 0:  # scale by clip / (norm + 1e-6) when that is below 1 (no host sync)
            coeff = torch.clamp(a.clip_grad / (norm + 1e-6), max=1.0).to(torch.float32)
            for g in grads:
                g.mul_(coeff)
        lr = lr_at(self.step_no, a.lr, a.min_lr, a.lr_warmup_iters, a.lr_decay_iters)  # steps done before this one
        self.step_no += 1
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()
        if self.copy_master:
            with torch.no_grad():
                for m, p in zip(self.master, self.params):
                    p.copy_(m)
        return loss_sum / (global_batch * seq), norm, lr


# ---------------------------------------------------------------------------------------------
# loss: agreement with ptdp


def torch_dtype(torch, precision: str):
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[precision]


def model_flags(a) -> list:
    gqa = ["--group-query-attention", "--num-query-groups", str(a.num_query_groups)] if a.num_query_groups else []
    return ["--arch", a.arch, "--layers", str(a.layers), "--hidden", str(a.hidden), "--heads", str(a.heads),
            "--seq-length", str(a.seq_length), "--vocab-size", str(a.vocab_size), *gqa]


def optimizer_flags(a) -> list:
    return ["--lr", repr(a.lr), "--min-lr", repr(a.min_lr), "--lr-warmup-iters", str(a.lr_warmup_iters),
            "--lr-decay-iters", str(a.lr_decay_iters), "--weight-decay", repr(a.weight_decay), "--clip-grad",
            repr(a.clip_grad), "--adam-beta1", repr(a.adam_beta1), "--adam-beta2", repr(a.adam_beta2),
            "--adam-eps", repr(a.adam_eps)]


def run_ptdp(cmd: list, what: str, threads: int = 0) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads else None
    print(f"$ {'OMP_NUM_THREADS=' + str(threads) + ' ' if threads else ''}{shlex.join(cmd)}", flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        last = (r.stderr.strip() or r.stdout.strip() or "(no output)").splitlines()[-1]
        print(f"{PROG}: {what}: ptdp exited with {r.returncode}: {last}", file=sys.stderr)
    return r


def load_flat(torch, model, chunk: ckpt.Chunk, precision: str):
    """Copies a shard chunk's flat parameters into the model, by ptdp's layout."""
    n = ckpt.layout_numel(model.entries)
    if chunk.numel != n:
        raise ckpt.CheckpointError(f"the checkpoint holds {chunk.numel} parameters, the layout {n}")
    if chunk.param_bytes == 4:
        flat = torch.frombuffer(chunk.params, dtype=torch.float32)
    else:
        flat = torch.frombuffer(chunk.params, dtype=torch.float16 if precision == "f16" else torch.bfloat16)
    with torch.no_grad():
        for (_, p), e in zip(model.ptdp_params(), model.entries):
            p.copy_(flat[e.offset:e.offset + e.numel].view(e.shape))
    return flat


def read_loss_log(path: str) -> list:
    with open(path, newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def cmd_loss(a) -> int:
    torch = import_torch()
    check_device(torch, a.device)
    if a.device == "cuda":  # f32 means f32: no TF32 GEMMs
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    backend = a.ptdp_backend or a.device
    rtol = a.rtol if a.rtol is not None else LOSS_RTOL[a.precision]
    B, b, s, n = a.global_batch, a.micro_batch, a.seq_length, a.iters
    work = a.workdir or tempfile.mkdtemp(prefix="ptdp_compare_")
    os.makedirs(work, exist_ok=True)
    prefix = os.path.join(work, "data")
    if a.data == "dataset":
        # Fewer windows than the run reads, so that it crosses into a second epoch (a new permutation).
        tokens_needed = max(4 * s + 1, (3 * n * B * s) // 4 + 1)
        pdata.write_dataset(prefix, pdata.phrase_documents(a.vocab_size, tokens_needed, a.seed), a.vocab_size)
    init_dir, final_dir = os.path.join(work, "init"), os.path.join(work, "final")
    loss_log = os.path.join(work, "ptdp_loss.csv")
    cmd = [a.ptdp, "train", *model_flags(a), "--backend", backend, "--precision", a.precision, "--data",
           prefix if a.data == "dataset" else "synthetic", "--micro-batch", str(b), "--global-batch", str(B),
           "--iters", str(n), "--warmup", "0", "--seed", str(a.seed), *optimizer_flags(a), "--save-init", init_dir,
           "--save", final_dir, "--loss-log", loss_log, "--log-interval", str(n)]
    r = run_ptdp(cmd, "loss")
    if r.returncode != 0:
        print(r.stdout[-2000:], r.stderr[-2000:], sep="\n", file=sys.stderr)
        print(f"{PROG}: the dataset is kept in {work}", file=sys.stderr)
        return 1
    ptdp_log = read_loss_log(loss_log)

    dtype = torch_dtype(torch, a.precision)
    torch.manual_seed(a.seed)
    model = build_model(torch, a.layers, a.hidden, a.heads, s, a.vocab_size, dtype, a.device, "none", a.attention,
                        arch=a.arch, kv_heads=a.num_query_groups)
    init = ckpt.read_checkpoint(init_dir, 0)
    if init.version >= 4 and init.arch != a.arch:
        print(f"{PROG}: {init.path} holds a {init.arch} model, expected {a.arch}", file=sys.stderr)
        return 1
    if init.version >= 6 and init.query_groups != (a.num_query_groups or a.heads):
        print(f"{PROG}: {init.path} holds {init.query_groups} query groups, expected {a.num_query_groups or a.heads}",
              file=sys.stderr)
        return 1
    flat = load_flat(torch, model, init.chunks[0], a.precision)
    trainer = Trainer(torch, model, a, master_init=flat)
    samples = (pdata.DatasetSamples(pdata.read_dataset_tokens(prefix), s, a.seed) if a.data == "dataset"
               else pdata.SyntheticSamples(a.vocab_size, s, a.seed))
    rows = []
    for it in range(1, n + 1):
        mbs = []
        for first in range((it - 1) * B, it * B, b):
            seqs = [samples.get(i) for i in range(first, first + b)]
            t = torch.tensor(seqs, dtype=torch.long, device=a.device)
            mbs.append((t[:, :-1].contiguous(), t[:, 1:].contiguous()))
        loss, norm, lr = trainer.step(mbs, B, s)
        rows.append((it, float(loss), float(norm), lr))

    final = ckpt.read_checkpoint(final_dir, n)
    ref = torch.frombuffer(final.chunks[0].params, dtype=torch.float32 if final.chunks[0].param_bytes == 4
                           else dtype).float()
    mine = torch.cat([m.detach().float().reshape(-1).cpu() for m in trainer.master])
    weight_diff = float((ref - mine).abs().max())

    print(f"\n{'iter':>4} {'ptdp loss':>14} {'torch loss':>14} {'rel diff':>10} {'ptdp |g|':>11} {'torch |g|':>11}"
          f" {'lr':>10}")
    worst_loss = worst_norm = worst_lr = 0.0
    if len(ptdp_log) != n:
        print(f"{PROG}: ptdp's loss log {loss_log} has {len(ptdp_log)} iteration(s), expected {n}", file=sys.stderr)
        return 1
    for (it, loss, norm, lr), p in zip(rows, ptdp_log):
        rel = abs(loss - p["loss"]) / max(abs(p["loss"]), 1e-30)
        worst_loss = max(worst_loss, rel)
        worst_norm = max(worst_norm, abs(norm - p["grad_norm"]) / max(abs(p["grad_norm"]), 1e-30))
        worst_lr = max(worst_lr, abs(lr - p["lr"]) / max(abs(p["lr"]), abs(lr), 1e-30))  # 0 when both are 0
        print(f"{it:>4} {p['loss']:>14.8f} {loss:>14.8f} {rel:>10.2e} {p['grad_norm']:>11.6f} {norm:>11.6f}"
              f" {lr:>10.3e}")
    ok = worst_loss <= rtol and worst_lr <= 1e-9
    print(f"\nmax relative loss difference {worst_loss:.3e} (tolerance {rtol:.1e}, {a.precision}); "
          f"max relative grad-norm difference {worst_norm:.3e}; learning rates agree to {worst_lr:.1e}; "
          f"max |weight difference| after {n} steps {weight_diff:.3e}")
    if ok:
        print(f"PASS: ptdp ({backend}, {a.precision}, --arch {a.arch}) and PyTorch {torch.__version__} ({a.device}) "
              f"agree on the loss of {n} iterations")
    else:
        print(f"FAIL: ptdp and PyTorch disagree (max relative loss difference {worst_loss:.3e}, tolerance {rtol:.1e}; "
              f"learning rates {worst_lr:.1e})")
    if not a.workdir and ok:
        import shutil
        shutil.rmtree(work, ignore_errors=True)
    elif not ok:
        print(f"the dataset, checkpoints and ptdp's loss log are kept in {work}")
    return 0 if ok else 1


# ---------------------------------------------------------------------------------------------
# throughput


def parse_shape(text: str) -> dict:
    keys = {"h": "hidden", "a": "heads", "l": "layers", "s": "seq_length", "b": "micro_batch", "V": "vocab_size",
            "B": "global_batch"}
    out = {"arch": "gpt"}
    for part in text.split(","):
        k, _, v = part.strip().partition("=")
        if k == "arch":
            if v not in ("gpt", "llama"):
                raise argparse.ArgumentTypeError(f"shape '{text}': arch={v} is not gpt or llama")
            out["arch"] = v
            continue
        if k not in keys or not v.strip().isdigit() or int(v) <= 0:
            raise argparse.ArgumentTypeError(f"shape '{text}': '{part}' is not one of h=, a=, l=, s=, b=, V=, B= "
                                             "with a positive integer, or arch=gpt|llama")
        out[keys[k]] = int(v)
    missing = [k for k in ("h", "a", "l", "s", "b", "V") if keys[k] not in out]
    if missing:
        raise argparse.ArgumentTypeError(f"shape '{text}' lacks {', '.join(m + '=' for m in missing)}")
    if out["hidden"] % out["heads"]:
        raise argparse.ArgumentTypeError(f"shape '{text}': a={out['heads']} must divide h={out['hidden']}")
    if out["arch"] == "llama" and (out["hidden"] // out["heads"]) % 2:
        raise argparse.ArgumentTypeError(f"shape '{text}': arch=llama needs an even head size h/a")
    out.setdefault("global_batch", out["micro_batch"])
    if out["global_batch"] % out["micro_batch"]:
        raise argparse.ArgumentTypeError(f"shape '{text}': b={out['micro_batch']} must divide B={out['global_batch']}")
    return out


def time_pytorch(torch, a, shape: dict, compiled: bool) -> dict:
    """Median iteration time of PyTorch eager or torch.compile on random tokens."""
    dev, dtype = a.device, torch_dtype(torch, a.precision)
    L, h, heads, s, V = shape["layers"], shape["hidden"], shape["heads"], shape["seq_length"], shape["vocab_size"]
    b, B = shape["micro_batch"], shape["global_batch"]
    torch.manual_seed(a.seed)
    model = build_model(torch, L, h, heads, s, V, dtype, dev, a.recompute, a.attention, arch=shape["arch"])
    with torch.no_grad():
        for e, (_, p) in zip(model.entries, model.ptdp_params()):
            if e.decay:
                p.normal_(0.0, 0.02)
            elif e.name.endswith("weight"):
                p.fill_(1.0)
    fused = dev == "cuda" and "fused" in torch.optim.AdamW.__init__.__code__.co_varnames
    opt_args = argparse.Namespace(lr=1e-4, min_lr=1e-5, lr_warmup_iters=0, lr_decay_iters=0, weight_decay=0.01,
                                  clip_grad=1.0, adam_beta1=0.9, adam_beta2=0.999, adam_eps=1e-8)
    note = ["fused AdamW" if fused else "AdamW"]
    if compiled:
        model_run = torch.compile(model)
        note.append("torch.compile default mode")
    else:
        model_run = model
    trainer = Trainer(torch, model, opt_args, fused=fused)
    trainer.model = model_run
    gen = torch.Generator(device="cpu").manual_seed(a.seed)
    mbs = []
    for _ in range(B // b):
        t = torch.randint(0, V, (b, s + 1), generator=gen).to(dev)
        mbs.append((t[:, :-1].contiguous(), t[:, 1:].contiguous()))
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    times = []
    for it in range(a.iters):
        sync()
        t0 = time.perf_counter()
        loss, _, _ = trainer.step(mbs, B, s)
        float(loss)  # waits for the step
        sync()
        if it >= a.warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    peak = torch.cuda.max_memory_allocated() / 1e9 if dev == "cuda" else float("nan")
    del trainer, model, model_run
    if dev == "cuda":
        torch.cuda.empty_cache()
    return {"iter_time_ms": statistics.median(times), "peak_mem_gb": peak, "note": "; ".join(note)}


def time_ptdp(a, shape: dict, backend: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="ptdp_compare_") as d:
        out = os.path.join(d, "ptdp.csv")
        cmd = [a.ptdp, "train", "--arch", shape["arch"], "--layers", str(shape["layers"]), "--hidden", str(shape["hidden"]), "--heads",
               str(shape["heads"]), "--seq-length", str(shape["seq_length"]), "--vocab-size", str(shape["vocab_size"]),
               "--micro-batch", str(shape["micro_batch"]), "--global-batch", str(shape["global_batch"]),
               "--backend", backend, "--precision", a.precision, "--recompute", a.recompute, "--iters", str(a.iters),
               "--warmup", str(a.warmup), "--seed", str(a.seed), "--data", "synthetic", "--experiment",
               "compare-pytorch", "--log-interval", str(a.iters), "--csv", out]
        r = run_ptdp(cmd, "throughput", threads=a.threads)
        if r.returncode != 0:
            last = (r.stderr.strip() or r.stdout.strip() or "(no output)").splitlines()[-1]
            return {"status": "failed", "note": f"ptdp exited with {r.returncode}: {last}", "command": shlex.join(cmd)}
        with open(out, newline="") as f:
            row = next(csv.DictReader(f))
        return {"iter_time_ms": float(row["iter_time_ms"]), "peak_mem_gb": float(row["peak_mem_gb"] or "nan"),
                "note": f"ptdp's own row: {row.get('tflops_per_gpu', '')} TFLOP/s per GPU on {row.get('device', '')}",
                "command": shlex.join(cmd)}


def write_csv_atomic(path: str, rows: list) -> None:
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    def cell(v):
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.6g}"
        return v

    for r in rows:
        w.writerow({k: cell(r.get(k, "")) for k in CSV_COLUMNS})
    pdata.write_atomic(path, buf.getvalue().encode())


def cmd_throughput(a) -> int:
    torch = import_torch()
    check_device(torch, a.device)
    shapes = a.shape or [parse_shape(t) for t in DEFAULT_SHAPES]
    backend = a.ptdp_backend or a.device
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "f32" and a.tf32
    base = {"device": device_name(torch, a.device), "precision": a.precision, "recompute": a.recompute,
            "iters": a.iters, "warmup": a.warmup, "git_sha": git_sha(), "host": socket.gethostname(),
            "torch_version": torch.__version__,
            "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    script_cmd = shlex.join([sys.executable, *sys.argv])
    if a.threads:
        torch.set_num_threads(a.threads)
    base["threads"] = a.threads or torch.get_num_threads()
    rows, failed = [], False
    for shape in shapes:
        flops, model_flops = flops_iteration(shape, a.recompute)
        tokens = shape["global_batch"] * shape["seq_length"]
        rates = {impl: [] for impl in a.implementations}  # tokens/s per pair
        for pair in range(a.pairs):
            # Interleaved: every pair runs each implementation once, in turn, so that a slow
            # moment of a shared machine falls on both sides of the ratio.
            for impl in a.implementations:
                row = {**base, **shape, "implementation": impl, "status": "ok", "command": script_cmd,
                       "pair": pair + 1}
                try:
                    if impl == "ptdp":
                        row.update(time_ptdp(a, shape, backend))
                    elif impl == "pytorch-compile" and not hasattr(torch, "compile"):
                        row.update(status="skipped", note=f"torch.compile is not available in torch {torch.__version__}")
                    else:
                        row.update(time_pytorch(torch, a, shape, impl == "pytorch-compile"))
                except Exception as e:  # noqa: BLE001 (out of memory, compile errors: recorded, not fatal)
                    row.update(status="failed",
                               note=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
                    if a.device == "cuda":
                        torch.cuda.empty_cache()
                if row["status"] == "ok":
                    ms = row["iter_time_ms"]
                    row["tflops_per_gpu"] = flops / (ms / 1e3) / 1e12
                    row["model_tflops_per_gpu"] = model_flops / (ms / 1e3) / 1e12
                    if a.peak_tflops:
                        row["mfu"] = row["model_tflops_per_gpu"] / a.peak_tflops
                    row["tokens_per_s"] = tokens / (ms / 1e3)
                    rates[impl].append(row["tokens_per_s"])
                failed = failed or row["status"] == "failed"
                label = (f"{row['tflops_per_gpu']:8.2f} TFLOP/s/GPU  {row['iter_time_ms']:10.2f} ms"
                         if row["status"] == "ok" else row["status"])
                print(f"{shape['arch']} h={shape['hidden']} a={shape['heads']} l={shape['layers']} s={shape['seq_length']} "
                      f"b={shape['micro_batch']} B={shape['global_batch']} V={shape['vocab_size']}  {impl:<16} {label}"
                      f"  {row.get('note', '')}", flush=True)
                rows.append(row)
        # ptdp against each PyTorch implementation: the tokens/s ratio of each pair.
        for other in a.implementations:
            if other == "ptdp" or "ptdp" not in rates:
                continue
            ratios = [p / o for p, o in zip(rates["ptdp"], rates[other])]
            if len(ratios) != a.pairs or not ratios:
                continue
            ratios.sort()
            row = {**base, **shape, "implementation": f"ratio ptdp/{other}", "status": "ok", "command": script_cmd,
                   "pair": len(ratios), "ratio_min": ratios[0], "ratio_median": statistics.median(ratios),
                   "ratio_max": ratios[-1],
                   "note": f"tokens/s of ptdp over {other}, {len(ratios)} interleaved pairs"}
            print(f"  ptdp / {other}: median {row['ratio_median']:.3f} (min {ratios[0]:.3f}, max {ratios[-1]:.3f}) "
                  f"over {len(ratios)} pairs", flush=True)
            rows.append(row)
    write_csv_atomic(a.out, rows)
    print(f"wrote {len(rows)} row(s) to {a.out}")
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------


class Parser(argparse.ArgumentParser):
    """Bad arguments: one line and exit code 2, like ptdp itself."""

    def error(self, message):
        refuse(message)


def main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    common = Parser(add_help=False)
    common.add_argument("--ptdp", default=os.path.join(REPO, "build", "ptdp"), help="the ptdp binary")
    common.add_argument("--device", choices=["cpu", "cuda"], default="cuda", help="where PyTorch runs")
    common.add_argument("--ptdp-backend", choices=["cpu", "cuda"], help="ptdp's --backend (default: --device)")
    common.add_argument("--precision", choices=["f32", "bf16", "f16"],
                        help="default: bf16 for throughput on cuda, else f32")
    common.add_argument("--attention", choices=["auto", "sdpa", "math"], default="auto",
                        help="PyTorch attention: scaled_dot_product_attention (auto when available) or matmuls")
    common.add_argument("--seed", type=int, default=1234)
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    lo = sub.add_parser("loss", parents=[common], help="per-iteration loss agreement with ptdp")
    lo.add_argument("--model", default="tiny", choices=["tiny", "small", "llama-tiny", "llama-tiny-gqa", "custom"],
                    help="tiny: l=4 h=64 a=4 s=32 V=256; small: l=4 h=256 a=8 s=256 V=256; llama-tiny: tiny's "
                         "sizes with --arch llama; llama-tiny-gqa: llama-tiny with 2 query groups (grouped-query "
                         "attention); custom: the flags below")
    lo.add_argument("--arch", choices=["gpt", "llama"],
                    help="the model's architecture (default: llama for --model llama-tiny, else gpt)")
    for flag in ("--layers", "--hidden", "--heads", "--seq-length", "--vocab-size"):
        lo.add_argument(flag, type=int)
    lo.add_argument("--num-query-groups", type=int,
                    help="grouped-query attention: key/value heads (default: the model's; 0 or --heads: none)")
    lo.add_argument("--micro-batch", type=int, default=2)
    lo.add_argument("--global-batch", type=int, default=8)
    lo.add_argument("--iters", type=int, default=10)
    lo.add_argument("--data", choices=["dataset", "synthetic"], default="dataset",
                    help="dataset: an MMIDIDX dataset written here, in ptdp's sample order; synthetic: ptdp's "
                         "synthetic tokens")
    lo.add_argument("--lr", type=float, default=1e-3)
    lo.add_argument("--min-lr", type=float, default=1e-4)
    lo.add_argument("--lr-warmup-iters", type=int, default=3)
    lo.add_argument("--lr-decay-iters", type=int, default=10)
    lo.add_argument("--weight-decay", type=float, default=0.01)
    lo.add_argument("--clip-grad", type=float, default=1.0)
    lo.add_argument("--adam-beta1", type=float, default=0.9)
    lo.add_argument("--adam-beta2", type=float, default=0.999)
    lo.add_argument("--adam-eps", type=float, default=1e-8)
    lo.add_argument("--rtol", type=float, help="largest relative loss difference allowed (default by precision: "
                    + ", ".join(f"{k} {v:g}" for k, v in LOSS_RTOL.items()) + ")")
    lo.add_argument("--workdir", help="keep the dataset, checkpoints and ptdp's loss log here")

    th = sub.add_parser("throughput", parents=[common], help="TFLOP/s per GPU of ptdp, PyTorch eager, torch.compile")
    th.add_argument("--shape", type=parse_shape, action="append",
                    help="h=,a=,l=,s=,b=,V=[,B=][,arch=gpt|llama] (repeatable; default: " + " and ".join(DEFAULT_SHAPES) + ")")
    th.add_argument("--iters", type=int, default=10)
    th.add_argument("--warmup", type=int, default=3, help="first iterations left out of the timing")
    th.add_argument("--recompute", choices=["none", "full"], default="full",
                    help="activation recomputation on both sides (Eq. 3 counts full recomputation)")
    th.add_argument("--implementations", nargs="+", default=["ptdp", "pytorch-eager", "pytorch-compile"],
                    choices=["ptdp", "pytorch-eager", "pytorch-compile"])
    th.add_argument("--tf32", action="store_true", help="allow TF32 GEMMs with --precision f32")
    th.add_argument("--peak-tflops", type=float, default=0.0,
                    help="the device's peak rate in this precision (TFLOP/s): adds the mfu column, model FLOPs "
                         "(no recomputation counted) over the peak")
    th.add_argument("--pairs", type=int, default=1,
                    help="interleaved rounds: each runs every implementation once; with ptdp and a PyTorch "
                         "implementation the tokens/s ratio of each round is summarised (min, median, max)")
    th.add_argument("--threads", type=int, default=0,
                    help="CPU threads for both sides (OMP_NUM_THREADS for ptdp, torch.set_num_threads); "
                         "0: each side's default")
    th.add_argument("--out", default=os.path.join(REPO, "results", "gpu", "compare_pytorch.csv"))

    a = p.parse_args(argv)
    if a.precision is None:
        a.precision = "bf16" if a.command == "throughput" and a.device == "cuda" else "f32"
    if a.command == "loss":
        presets = {"tiny": (4, 64, 4, 32, 256), "small": (4, 256, 8, 256, 256), "llama-tiny": (4, 64, 4, 32, 256),
                   "llama-tiny-gqa": (4, 64, 4, 32, 256)}
        if a.arch is None:
            a.arch = "llama" if a.model.startswith("llama-tiny") else "gpt"
        if a.num_query_groups is None:
            a.num_query_groups = 2 if a.model == "llama-tiny-gqa" else 0
        given = [a.layers, a.hidden, a.heads, a.seq_length, a.vocab_size]
        if a.model == "custom":
            if any(v is None for v in given):
                p.error("--model custom needs --layers --hidden --heads --seq-length --vocab-size")
        else:
            base = presets[a.model]
            a.layers, a.hidden, a.heads, a.seq_length, a.vocab_size = (
                g if g is not None else d for g, d in zip(given, base))
        for name in ("layers", "hidden", "heads", "seq_length", "vocab_size", "micro_batch", "global_batch", "iters"):
            if getattr(a, name) <= 0:
                p.error(f"--{name.replace('_', '-')} {getattr(a, name)} must be positive")
        if a.hidden % a.heads:
            p.error(f"--heads {a.heads} must divide --hidden {a.hidden}")
        if a.num_query_groups < 0 or (a.num_query_groups and a.heads % a.num_query_groups):
            p.error(f"--num-query-groups {a.num_query_groups} must divide --heads {a.heads}")
        if a.num_query_groups == a.heads:
            a.num_query_groups = 0  # multi-head attention
        if a.arch == "llama" and (a.hidden // a.heads) % 2:
            p.error(f"--arch llama needs an even head size (--hidden {a.hidden} / --heads {a.heads})")
        if a.global_batch % a.micro_batch:
            p.error(f"--micro-batch {a.micro_batch} must divide --global-batch {a.global_batch}")
    else:
        if a.iters <= a.warmup or a.warmup < 0:
            p.error(f"--warmup {a.warmup} must be in [0, --iters {a.iters})")
        if a.pairs < 1:
            p.error(f"--pairs {a.pairs} must be 1 or more")
        if a.threads < 0:
            p.error(f"--threads {a.threads} must be 0 (default) or more")
        if a.peak_tflops < 0:
            p.error(f"--peak-tflops {a.peak_tflops} must be positive (or 0: no mfu column)")
    if a.command == "loss" or "ptdp" in a.implementations:
        a.ptdp = check_ptdp(a.ptdp)
    return cmd_loss(a) if a.command == "loss" else cmd_throughput(a)


if __name__ == "__main__":
    sys.exit(main())
