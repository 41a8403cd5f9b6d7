"""Compares ptdp with the same GPT or LLaMA written in PyTorch (docs/PYTORCH.md).

  compare_pytorch.py loss        ptdp's per-iteration losses against PyTorch's, from ptdp's own
                                 initial weights on the same batches, with the same AdamW,
                                 gradient clipping and learning-rate schedule (--arch gpt|llama)
  compare_pytorch.py throughput  TFLOP/s per GPU (the paper's Eq. 3) of ptdp, PyTorch eager and
                                 torch.compile on the same device, for given model shapes;
                                 writes results/gpu/compare_pytorch.csv atomically
  compare_pytorch.py dispatch    the host's dispatch time per kernel of an eager PyTorch step: one
                                 micro-batch's forward and backward eager against the same work
                                 replayed as a CUDA graph, with the number of kernels

Exit codes: 0 agreement / measured, 1 disagreement or a failed measurement, 2 refused (one
line: no PyTorch, no ptdp binary, --device cuda without a GPU, bad arguments).
"""

from __future__ import annotations

import os

from ptdp_tools import repo
from ptdp_tools.cli import Parser
from ptdp_tools.compare_pytorch.dispatch import cmd_dispatch
from ptdp_tools.compare_pytorch.env import PROG, check_ptdp
from ptdp_tools.compare_pytorch.loss import LOSS_RTOL, cmd_loss
from ptdp_tools.compare_pytorch.throughput import DEFAULT_SHAPES, cmd_throughput, parse_shape


def check_loss_args(p, a) -> None:
    """The loss command's model from --model and the flags; p.error on a broken rule."""
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


def check_timing_args(p, a) -> None:
    """throughput's and dispatch's counts; p.error on a broken rule."""
    if a.iters <= a.warmup or a.warmup < 0:
        p.error(f"--warmup {a.warmup} must be in [0, --iters {a.iters})")
    if a.command == "dispatch":
        return
    if a.pairs < 1:
        p.error(f"--pairs {a.pairs} must be 1 or more")
    if a.threads < 0:
        p.error(f"--threads {a.threads} must be 0 (default) or more")
    if a.peak_tflops < 0:
        p.error(f"--peak-tflops {a.peak_tflops} must be positive (or 0: no mfu column)")


def main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    common = Parser(add_help=False)
    common.add_argument("--ptdp", default=os.path.join(repo.ROOT, "build", "ptdp"), help="the ptdp binary")
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
    lo.add_argument("--ptdp-attention-backend", choices=["auto", "cudnn", "flash", "unfused"], default="auto",
                    help="ptdp's --attention-backend (the kernels whose losses are compared)")

    th = sub.add_parser("throughput", parents=[common], help="TFLOP/s per GPU of ptdp, PyTorch eager, torch.compile")
    th.add_argument("--shape", type=parse_shape, action="append",
                    help="h=,a=,l=,s=,b=,V=[,B=][,g=][,arch=gpt|llama] (g: query groups; repeatable; default: " + " and ".join(DEFAULT_SHAPES) + ")")
    th.add_argument("--iters", type=int, default=10)
    th.add_argument("--warmup", type=int, default=3, help="first iterations left out of the timing")
    th.add_argument("--recompute", choices=["none", "full"], default="full",
                    help="activation recomputation on both sides (Eq. 3 counts full recomputation)")
    th.add_argument("--implementations", nargs="+", default=["ptdp", "pytorch-eager", "pytorch-compile"],
                    choices=["ptdp", "pytorch-eager", "pytorch-compile"])
    th.add_argument("--ptdp-attention-backend", nargs="+", choices=["auto", "cudnn", "flash", "unfused"],
                    help="run ptdp once per attention backend (--attention-backend), as implementation ptdp-<backend>")
    th.add_argument("--ptdp-recompute-activation", action="store_true",
                    help="ptdp with --recompute-activation (the MLP's activation recomputed in backward, as "
                         "torch.compile's partitioner does); not with --recompute full")
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
    th.add_argument("--out", default=os.path.join(repo.ROOT, "results", "gpu", "compare_pytorch.csv"))

    di = sub.add_parser("dispatch", parents=[common],
                        help="eager forward and backward against a CUDA graph replay: host time per kernel")
    di.add_argument("--shape", type=parse_shape, action="append", required=True,
                    help="h=,a=,l=,s=,b=,V=[,g=][,arch=gpt|llama] (repeatable)")
    di.add_argument("--iters", type=int, default=20)
    di.add_argument("--warmup", type=int, default=5, help="first calls left out of the timing")
    di.add_argument("--recompute", choices=["none", "full"], default="none")
    di.add_argument("--out", default=os.path.join(repo.ROOT, "results", "gpu", "dispatch.csv"))

    a = p.parse_args(argv)
    if a.precision is None:
        a.precision = "bf16" if a.command == "throughput" and a.device == "cuda" else "f32"
    if a.command == "throughput" and a.ptdp_recompute_activation and a.recompute == "full":
        p.error("--ptdp-recompute-activation needs --recompute none: full recomputation recomputes the activation "
                "already")
    if a.command == "loss":
        check_loss_args(p, a)
    else:
        check_timing_args(p, a)
    if a.command == "loss" or (a.command == "throughput" and "ptdp" in a.implementations):
        a.ptdp = check_ptdp(a.ptdp)
    return {"loss": cmd_loss, "throughput": cmd_throughput, "dispatch": cmd_dispatch}[a.command](a)

