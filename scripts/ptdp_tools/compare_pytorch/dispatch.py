"""`compare_pytorch.py dispatch`: what the host's per-operator dispatch costs an eager PyTorch step.
One micro-batch's forward and backward of the model, eager, against the same work captured once as
a CUDA graph and replayed (no Python, no operator dispatch, no launch per kernel), on the same GPU,
with the number of kernels the eager pass launches (the autograd profiler's CUDA kernel events):
the difference over the kernels is the host's time per kernel that the GPU waited for. It is the
measurement behind docs/SIMULATOR.md's question for Figures 7 and 15 (a small model whose
operators each do little GPU work). On the CPU (the virtual GPU's dry run) the eager time is
measured and the graph rows are skipped with the reason."""

from __future__ import annotations

import datetime
import os
import shlex
import socket
import statistics
import sys
import time

from ptdp_tools import atomic, repo, tables
from ptdp_tools.compare_pytorch.env import check_device, device_name, import_torch, torch_dtype
from ptdp_tools.compare_pytorch.model import build_model


def count_kernels(torch, fwd_bwd) -> int:
    """CUDA kernels one call of fwd_bwd launches (the autograd profiler's device events)."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fwd_bwd()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if str(e.device_type).endswith("CUDA"))


def median_ms(torch, fn, iters: int, warmup: int, cuda: bool) -> float:
    times = []
    for it in range(iters):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        if it >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


COLUMNS = ["status", "device", "precision", "recompute", "arch", "layers", "hidden", "heads", "query_groups",
           "seq_length", "vocab_size", "micro_batch", "iters", "warmup", "eager_ms", "graph_ms", "kernels",
           "dispatch_us_per_kernel", "note", "git_sha", "host", "torch_version", "timestamp", "command"]


def measure(torch, a, shape: dict) -> dict:
    """eager_ms and graph_ms (medians), kernels, and (eager - graph) / kernels in microseconds."""
    dev, cuda = a.device, a.device == "cuda"
    torch.manual_seed(a.seed)
    b, s, V = shape["micro_batch"], shape["seq_length"], shape["vocab_size"]
    model = build_model(torch, shape["layers"], shape["hidden"], shape["heads"], s, V, torch_dtype(torch, a.precision),
                        dev, a.recompute, a.attention, arch=shape["arch"], kv_heads=shape.get("query_groups", 0))
    gen = torch.Generator(device="cpu").manual_seed(a.seed)
    t = torch.randint(0, V, (b, s + 1), generator=gen).to(dev)
    tok, tgt = t[:, :-1].contiguous(), t[:, 1:].contiguous()

    def fwd_bwd():
        (model(tok, tgt) / (b * s)).backward()  # gradients accumulate into .grad, as across micro-batches

    out = {"eager_ms": median_ms(torch, fwd_bwd, a.iters, a.warmup, cuda)}
    if not cuda:
        out.update(status="skipped", note="eager measured; CUDA graphs need a GPU (--device cuda)")
        return out
    kernels = count_kernels(torch, fwd_bwd)
    side = torch.cuda.Stream()  # capture needs warm-up work off the default stream
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fwd_bwd()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fwd_bwd()
    out["graph_ms"] = median_ms(torch, graph.replay, a.iters, a.warmup, cuda)
    out["kernels"] = kernels
    out["dispatch_us_per_kernel"] = (out["eager_ms"] - out["graph_ms"]) * 1e3 / max(kernels, 1)
    out["note"] = "one micro-batch's forward and backward: eager, and captured once as a CUDA graph and replayed"
    del graph, model
    torch.cuda.empty_cache()
    return out


def cmd_dispatch(a) -> int:
    torch = import_torch()
    check_device(torch, a.device)
    base = {"device": device_name(torch, a.device), "precision": a.precision, "recompute": a.recompute,
            "iters": a.iters, "warmup": a.warmup, "git_sha": repo.git_sha(), "host": socket.gethostname(),
            "torch_version": torch.__version__, "command": shlex.join([sys.executable, *sys.argv]),
            "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    rows, failed = [], False
    for shape in a.shape:
        row = {**base, **shape, "status": "ok"}
        try:
            row.update(measure(torch, a, shape))
        except Exception as e:  # noqa: BLE001 (out of memory, capture errors: recorded, not fatal)
            row.update(status="failed", note=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
            failed = True
        rows.append(row)
        fmt = (lambda k: f"{row[k]:.3f}" if isinstance(row.get(k), float) else "-")
        print(f"{shape['arch']} h={shape['hidden']} a={shape['heads']} l={shape['layers']} s={shape['seq_length']} "
              f"b={shape['micro_batch']}  eager {fmt('eager_ms')} ms, graph {fmt('graph_ms')} ms, "
              f"{row.get('kernels', '-')} kernels, {fmt('dispatch_us_per_kernel')} us a kernel  {row['status']}  "
              f"{row.get('note', '')}", flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    atomic.write(a.out, tables.csv_text(rows, COLUMNS, lambda v: f"{v:.6g}" if isinstance(v, float) else v))
    print(f"wrote {len(rows)} row(s) to {a.out}")
    return 1 if failed else 0
