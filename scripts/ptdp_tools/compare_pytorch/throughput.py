"""`compare_pytorch.py throughput`: TFLOP/s per GPU (the paper's Eq. 3) of ptdp, PyTorch eager and
torch.compile on the same device, for given model shapes; the rows go to a CSV written atomically."""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import os
import shlex
import socket
import statistics
import sys
import tempfile
import time

from ptdp_tools import atomic, repo, tables
from ptdp_tools.checkpoint.layout import llama_ffn_hidden
from ptdp_tools.compare_pytorch.env import check_device, device_name, import_torch, run_ptdp, torch_dtype
from ptdp_tools.compare_pytorch.model import build_model
from ptdp_tools.compare_pytorch.trainer import Trainer

DEFAULT_SHAPES = ["h=2048,a=16,l=4,s=2048,b=4,V=51200", "h=4096,a=32,l=4,s=2048,b=2,V=51200"]
CSV_COLUMNS = ["implementation", "status", "device", "precision", "recompute", "arch", "layers", "hidden", "heads",
               "seq_length", "vocab_size", "micro_batch", "global_batch", "iters", "warmup", "iter_time_ms",
               "tflops_per_gpu", "model_tflops_per_gpu", "mfu", "tokens_per_s", "peak_mem_gb", "note", "git_sha", "host", "torch_version",
               "timestamp", "command", "pair", "threads", "ratio_min", "ratio_median", "ratio_max", "query_groups"]


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


def parse_shape(text: str) -> dict:
    keys = {"h": "hidden", "a": "heads", "l": "layers", "s": "seq_length", "b": "micro_batch", "V": "vocab_size",
            "B": "global_batch", "g": "query_groups"}
    out = {"arch": "gpt"}
    for part in text.split(","):
        k, _, v = part.strip().partition("=")
        if k == "arch":
            if v not in ("gpt", "llama"):
                raise argparse.ArgumentTypeError(f"shape '{text}': arch={v} is not gpt or llama")
            out["arch"] = v
            continue
        if k not in keys or not v.strip().isdigit() or int(v) <= 0:
            raise argparse.ArgumentTypeError(f"shape '{text}': '{part}' is not one of h=, a=, l=, s=, b=, V=, B=, g= "
                                             "with a positive integer, or arch=gpt|llama")
        out[keys[k]] = int(v)
    missing = [k for k in ("h", "a", "l", "s", "b", "V") if keys[k] not in out]
    if missing:
        raise argparse.ArgumentTypeError(f"shape '{text}' lacks {', '.join(m + '=' for m in missing)}")
    if out["hidden"] % out["heads"]:
        raise argparse.ArgumentTypeError(f"shape '{text}': a={out['heads']} must divide h={out['hidden']}")
    if out["arch"] == "llama" and (out["hidden"] // out["heads"]) % 2:
        raise argparse.ArgumentTypeError(f"shape '{text}': arch=llama needs an even head size h/a")
    if out.get("query_groups", out["heads"]) == out["heads"]:
        out.pop("query_groups", None)  # multi-head attention
    elif out["heads"] % out["query_groups"] or out["arch"] != "llama":
        raise argparse.ArgumentTypeError(f"shape '{text}': g={out['query_groups']} (grouped-query attention) needs "
                                         f"arch=llama and must divide a={out['heads']}")
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
    model = build_model(torch, L, h, heads, s, V, dtype, dev, a.recompute, a.attention, arch=shape["arch"],
                        kv_heads=shape.get("query_groups", 0))
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


def time_ptdp(a, shape: dict, backend: str, attention: str = "") -> dict:
    with tempfile.TemporaryDirectory(prefix="ptdp_compare_") as d:
        out = os.path.join(d, "ptdp.csv")
        cmd = [a.ptdp, "train", "--arch", shape["arch"], "--layers", str(shape["layers"]), "--hidden", str(shape["hidden"]), "--heads",
               str(shape["heads"]), "--seq-length", str(shape["seq_length"]), "--vocab-size", str(shape["vocab_size"]),
               "--micro-batch", str(shape["micro_batch"]), "--global-batch", str(shape["global_batch"]),
               "--backend", backend, "--precision", a.precision, "--recompute", a.recompute, "--iters", str(a.iters),
               "--warmup", str(a.warmup), "--seed", str(a.seed), "--data", "synthetic", "--experiment",
               "compare-pytorch", "--log-interval", str(a.iters), "--csv", out]
        if shape.get("query_groups"):
            cmd += ["--group-query-attention", "--num-query-groups", str(shape["query_groups"])]
        if attention:
            cmd += ["--attention-backend", attention]
        if a.ptdp_recompute_activation:
            cmd.append("--recompute-activation")
        r = run_ptdp(cmd, "throughput", threads=a.threads)
        if r.returncode != 0:
            last = (r.stderr.strip() or r.stdout.strip() or "(no output)").splitlines()[-1]
            return {"status": "failed", "note": f"ptdp exited with {r.returncode}: {last}", "command": shlex.join(cmd)}
        with open(out, newline="") as f:
            row = next(csv.DictReader(f))
        return {"iter_time_ms": float(row["iter_time_ms"]), "peak_mem_gb": float(row["peak_mem_gb"] or "nan"),
                "note": f"ptdp's own row: {row.get('tflops_per_gpu', '')} TFLOP/s per GPU on {row.get('device', '')}",
                "command": shlex.join(cmd)}


def write_csv(path: str, rows: list) -> None:
    """The rows as CSV_COLUMNS, numbers to 6 significant digits (NaN: empty), written atomically."""
    def cell(v):
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.6g}"
        return v

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic.write(path, tables.csv_text(rows, CSV_COLUMNS, cell))


def cmd_throughput(a) -> int:
    torch = import_torch()
    check_device(torch, a.device)
    shapes = a.shape or [parse_shape(t) for t in DEFAULT_SHAPES]
    backend = a.ptdp_backend or a.device
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "f32" and a.tf32
    base = {"device": device_name(torch, a.device), "precision": a.precision, "recompute": a.recompute,
            "iters": a.iters, "warmup": a.warmup, "git_sha": repo.git_sha(), "host": socket.gethostname(),
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
        # ptdp once per --ptdp-attention-backend (implementation ptdp-<backend>), else once as ptdp
        impls = [i for impl in a.implementations
                 for i in ([f"ptdp-{b}" for b in a.ptdp_attention_backend] if impl == "ptdp" and
                           a.ptdp_attention_backend else [impl])]
        rates = {impl: [] for impl in impls}  # tokens/s per pair
        for pair in range(a.pairs):
            # Interleaved: every pair runs each implementation once, in turn, so that a slow
            # moment of a shared machine falls on both sides of the ratio.
            for impl in impls:
                row = {**base, **shape, "implementation": impl, "status": "ok", "command": script_cmd,
                       "pair": pair + 1}
                try:
                    if impl == "ptdp" or impl.startswith("ptdp-"):
                        row.update(time_ptdp(a, shape, backend, impl[len("ptdp-"):]))
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
        for mine in [i for i in impls if i.startswith("ptdp")]:
            for other in a.implementations:
                if other == "ptdp":
                    continue
                ratios = [p / o for p, o in zip(rates[mine], rates[other])]
                if len(ratios) != a.pairs or not ratios:
                    continue
                ratios.sort()
                row = {**base, **shape, "implementation": f"ratio {mine}/{other}", "status": "ok",
                       "command": script_cmd, "pair": len(ratios), "ratio_min": ratios[0],
                       "ratio_median": statistics.median(ratios), "ratio_max": ratios[-1],
                       "note": f"tokens/s of {mine} over {other}, {len(ratios)} interleaved pairs"}
                print(f"  {mine} / {other}: median {row['ratio_median']:.3f} (min {ratios[0]:.3f}, "
                      f"max {ratios[-1]:.3f}) over {len(ratios)} pairs", flush=True)
                rows.append(row)
    write_csv(a.out, rows)
    print(f"wrote {len(rows)} row(s) to {a.out}")
    return 1 if failed else 0
