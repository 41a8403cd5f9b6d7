"""`compare_pytorch.py loss`: ptdp's per-iteration losses against PyTorch's, from ptdp's own initial
weights on the same batches (data.py's sample order), with the same optimizer step (trainer.py)."""

from __future__ import annotations

import csv
import os
import shutil
import sys
import tempfile

from ptdp_tools import data as pdata
from ptdp_tools.checkpoint import layout
from ptdp_tools.checkpoint import reader as ckpt
from ptdp_tools.compare_pytorch.env import PROG, check_device, import_torch, run_ptdp, torch_dtype
from ptdp_tools.compare_pytorch.model import build_model
from ptdp_tools.compare_pytorch.trainer import Trainer

# Loss agreement, the largest |loss_ptdp - loss_torch| / |loss_ptdp| allowed over the run.
# f32: both sides compute in f32 and differ only in summation order (measured on the CPU,
# tiny model, 10 steps: see docs/PYTORCH.md). bf16: 8-bit mantissas, rounding in different
# places on each side.
LOSS_RTOL = {"f32": 2e-5, "bf16": 2e-2, "f16": 2e-2}


def model_flags(a) -> list:
    gqa = ["--group-query-attention", "--num-query-groups", str(a.num_query_groups)] if a.num_query_groups else []
    return ["--arch", a.arch, "--layers", str(a.layers), "--hidden", str(a.hidden), "--heads", str(a.heads),
            "--seq-length", str(a.seq_length), "--vocab-size", str(a.vocab_size), *gqa]


def optimizer_flags(a) -> list:
    return ["--lr", repr(a.lr), "--min-lr", repr(a.min_lr), "--lr-warmup-iters", str(a.lr_warmup_iters),
            "--lr-decay-iters", str(a.lr_decay_iters), "--weight-decay", repr(a.weight_decay), "--clip-grad",
            repr(a.clip_grad), "--adam-beta1", repr(a.adam_beta1), "--adam-beta2", repr(a.adam_beta2),
            "--adam-eps", repr(a.adam_eps)]


def load_flat(torch, model, chunk: ckpt.Chunk, precision: str):
    """Copies a shard chunk's flat parameters into the model, by ptdp's layout."""
    n = layout.layout_numel(model.entries)
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
           "--save", final_dir, "--loss-log", loss_log, "--log-interval", str(n),
           "--attention-backend", a.ptdp_attention_backend]
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
        print(f"PASS: ptdp ({backend}, {a.precision}, --arch {a.arch}, attention {a.ptdp_attention_backend}) and "
              f"PyTorch {torch.__version__} ({a.device}) "
              f"agree on the loss of {n} iterations")
    else:
        print(f"FAIL: ptdp and PyTorch disagree (max relative loss difference {worst_loss:.3e}, tolerance {rtol:.1e}; "
              f"learning rates {worst_lr:.1e})")
    if not a.workdir and ok:
        shutil.rmtree(work, ignore_errors=True)
    elif not ok:
        print(f"the dataset, checkpoints and ptdp's loss log are kept in {work}")
    return 0 if ok else 1
