#!/usr/bin/env python3
"""ctests Megatron.*: `ptdp train --log-format megatron --tensorboard-dir` read as Megatron-LM's own
tooling reads its runs, the values worked out here with Megatron-LM's formulas.

  log          the stdout lines match training_log's format (the regex of Megatron's
               tests/performance_tests/.../print_nsys_leaderboard.py, and a regex of every field
               of training.py's format strings); lines after iteration 1 and every --log-interval,
               none at a last iteration off the interval; learning rate as the optimizer holds it
               after the step (OptimizerParamScheduler), loss scale as the optimizer reports it
  tensorboard  the event files read back with tensorboard's EventAccumulator: Megatron's scalar
               names and steps, lm loss and grad-norm equal to the loss log, learning-rate,
               loss-scale, batch-size, "vs samples" steps, lm loss validation, and throughput
               equal to num_floating_point_operations / (iteration-time x 10^12 x world size)

Usage: megatron_log_test.py --ptdp PTDP {log|tensorboard}. Prints PASS: CASE.
"""
import argparse
import csv
import glob
import math
import os
import re
import subprocess
import sys
import tempfile

# Megatron-LM tests/performance_tests/shell_test_utils/determinism/print_nsys_leaderboard.py
NSYS_RE = re.compile(r"iteration\s+(\d+)/\s*\d+.*elapsed time per iteration \(ms\):\s*([\d.]+)")
# training.py training_log's line, field by field (no --log-throughput ordering surprises: ptdp
# prints the throughput always, where Megatron prints it with --log-throughput).
NUM = r"[\d.]+E[-+]\d+"
LINE_RE = re.compile(
    r"^ \[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6})\] iteration +(\d+)/ +(\d+) \| consumed samples: +(\d+) \| "
    r"elapsed time per iteration \(ms\): ([\d.]+) \| throughput per GPU \(TFLOP/s/GPU\): ([\d.]+) \| "
    rf"learning rate: ({NUM}) \| global batch size: +(\d+) \|( lm loss: ({NUM}) \|)? loss scale: ([\d.]+) \|"
    r"( grad norm: ([\d.]+) \|)? number of skipped iterations: +(\d+) \| number of nan iterations: +(\d+) \|$")


def megatron_lr(num_steps, max_lr, min_lr, warmup_steps, decay_steps, style, wsd_steps=None, wsd_style="exponential"):
    """Megatron-core optimizer_param_scheduler.py OptimizerParamScheduler.get_lr (init_lr 0)."""
    if warmup_steps > 0 and num_steps <= warmup_steps:
        return max_lr * float(num_steps) / float(warmup_steps)
    if style == "constant":
        return max_lr
    if num_steps > decay_steps:
        return min_lr
    if style == "inverse-square-root":
        return max(min_lr, max_lr * max(warmup_steps, 1) ** 0.5 / (max(num_steps, 1) ** 0.5))
    ratio = float(num_steps - warmup_steps) / float(decay_steps - warmup_steps)
    if style == "linear":
        coeff = 1.0 - ratio
    elif style == "cosine":
        coeff = 0.5 * (math.cos(math.pi * ratio) + 1.0)
    else:  # WSD
        start = decay_steps - wsd_steps
        if num_steps <= start:
            coeff = 1.0
        else:
            r = float(num_steps - start) / float(wsd_steps)
            coeff = {"linear": 1.0 - r, "cosine": 0.5 * (math.cos(math.pi * r) + 1.0),
                     "exponential": 2.0 * math.pow(0.5, r) - 1.0, "minus_sqrt": 1.0 - math.sqrt(r)}[wsd_style]
    return min_lr + coeff * (max_lr - min_lr)


def megatron_flops(L, h, a, s, V, B, tp, ffn, groups, swiglu, divisible=128):
    """Megatron-LM training.py num_floating_point_operations for a dense GPT / LLaMA (no MoE, MTP, MLA)."""
    mult = divisible * tp
    padded_vocab = ((V + mult - 1) // mult) * mult
    kv = h // a
    q, k, v = kv * a, kv * groups, kv * groups
    fb, fma = 3, 2
    self_attn = fb * fma * (h * (q + k + v) + q * h)
    core = fb * fma * q / 2 * 2
    return (B * s * (fb * fma * h * (ffn * (3 if swiglu else 2)) * L + self_attn * L + fb * fma * h * padded_vocab)
            + B * s * s * core * L)


# Two runs: the tiny GPT with t = 2 (its vocabulary 300 padded to 512), f16 at a constant loss scale,
# a cosine decay after a fractional warm-up; and llama-tiny-gqa (SwiGLU, 2 query groups) in bf16
# under WSD. 7 iterations, --log-interval 2: lines at 1, 2, 4, 6 (none at 7).
RUNS = [
    dict(name="gpt", flags=["--model", "tiny", "--vocab-size", "300", "--tp", "2", "--micro-batch", "2",
                            "--global-batch", "8", "--fp16", "--loss-scale", "4096", "--lr", "0.01",
                            "--min-lr", "0.001", "--lr-decay-style", "cosine", "--lr-warmup-fraction", "0.3",
                            "--lr-decay-iters", "6"],
         model=dict(L=4, h=64, a=4, s=32, V=300, B=8, tp=2, ffn=256, groups=4, swiglu=False), world=2,
         lr=dict(max_lr=0.01, min_lr=0.001, warmup_fraction=0.3, decay=6, style="cosine"), loss_scale=4096.0),
    dict(name="llama-gqa", flags=["--model", "llama-tiny-gqa", "--micro-batch", "4", "--global-batch", "4", "--bf16",
                                  "--lr", "0.02", "--min-lr", "0.002", "--lr-decay-style", "WSD", "--lr-warmup-iters",
                                  "1", "--lr-wsd-decay-iters", "3", "--lr-wsd-decay-style", "cosine"],
         model=dict(L=4, h=64, a=4, s=32, V=256, B=4, tp=1, ffn=256, groups=2, swiglu=True), world=1,
         lr=dict(max_lr=0.02, min_lr=0.002, warmup=1, decay=7, style="WSD", wsd=3, wsd_style="cosine"), loss_scale=1.0),
]
ITERS, INTERVAL = 7, 2


def expected_lr(run, iteration):
    """The rate Megatron's optimizer holds after `iteration` steps (in samples, as its scheduler counts)."""
    p, B = run["lr"], run["model"]["B"]
    # training.py get_optimizer_param_scheduler: steps in samples; a warm-up fraction of the decay's.
    warmup = p["warmup_fraction"] * (p["decay"] * B) if "warmup_fraction" in p else p["warmup"] * B
    return megatron_lr(iteration * B, p["max_lr"], p["min_lr"], warmup, p["decay"] * B, p["style"],
                       p.get("wsd", 0) * B, p.get("wsd_style", "exponential"))


def train(ptdp, run, tmp):
    tb = os.path.join(tmp, run["name"] + "-tb")
    loss_log = os.path.join(tmp, run["name"] + "-loss.csv")
    cmd = [ptdp, "train", *run["flags"], "--iters", str(ITERS), "--warmup", "1", "--log-interval", str(INTERVAL),
           "--log-format", "megatron", "--tensorboard-dir", tb, "--log-timers-to-tensorboard",
           "--log-validation-ppl-to-tensorboard", "--eval-iters", "1", "--eval-interval", "3", "--loss-log", loss_log]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600)
    if p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}: {p.stderr}")
    with open(loss_log) as f:
        rows = {int(r["iteration"]): r for r in csv.DictReader(f)}
    return p.stdout, tb, rows


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def check_log(run, out):
    lines = [l for l in out.splitlines() if "iteration" in l and "consumed samples" in l]
    seen = []
    for line in lines:
        if not NSYS_RE.search(line):
            fail(f"{run['name']}: Megatron's regex misses {line!r}")
        m = LINE_RE.match(line)
        if not m:
            fail(f"{run['name']}: not training_log's line: {line!r}")
        it = int(m.group(2))
        seen.append(it)
        B = run["model"]["B"]
        if int(m.group(4)) != it * B or int(m.group(8)) != B or int(m.group(3)) != ITERS:
            fail(f"{run['name']}: samples or batch size: {line!r}")
        want_lr = f"{expected_lr(run, it):.6E}"
        if m.group(7) != want_lr:
            fail(f"{run['name']}: iteration {it}: learning rate {m.group(7)}, Megatron's {want_lr}")
        if m.group(11) != f"{run['loss_scale']:.1f}":
            fail(f"{run['name']}: iteration {it}: loss scale {m.group(11)}, Megatron's {run['loss_scale']:.1f}")
        # The throughput from the printed time, within the rounding of both printed numbers.
        ms = float(m.group(5))
        flops = megatron_flops(**run["model"])
        lo, hi = flops / ((ms + 0.05) * 1e9 * run["world"]), flops / (max(ms - 0.05, 1e-9) * 1e9 * run["world"])
        if not lo - 0.05 <= float(m.group(6)) <= hi + 0.05:
            fail(f"{run['name']}: iteration {it}: throughput {m.group(6)} outside [{lo:.3f}, {hi:.3f}]")
    want = [1] + [i for i in range(INTERVAL, ITERS + 1, INTERVAL)]
    if seen != want:
        fail(f"{run['name']}: lines at iterations {seen}, Megatron's at {want}")


def check_tensorboard(run, out, tb, rows):
    from tensorboard.backend.event_processing import event_accumulator
    files = glob.glob(os.path.join(tb, "events.out.tfevents.*"))
    if len(files) != 1:
        fail(f"{run['name']}: event files {files}")
    ea = event_accumulator.EventAccumulator(files[0], size_guidance={event_accumulator.SCALARS: 0})
    ea.Reload()
    tags = set(ea.Tags()["scalars"])
    B, f32 = run["model"]["B"], 1e-6
    for tag in ["lm loss", "learning-rate", "loss-scale", "batch-size", "grad-norm", "iteration-time", "throughput",
                "lm loss validation", "lm loss validation ppl"]:
        if tag not in tags:
            fail(f"{run['name']}: no scalar '{tag}' (tags: {sorted(tags)})")
    def series(tag):
        return {e.step: e.value for e in ea.Scalars(tag)}
    def close(a, b, rel=f32):
        return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)
    loss, lr, grad = series("lm loss"), series("learning-rate"), series("grad-norm")
    if sorted(loss) != list(range(1, ITERS + 1)):
        fail(f"{run['name']}: lm loss at steps {sorted(loss)}")
    for it in range(1, ITERS + 1):
        if not close(loss[it], float(rows[it]["loss"])) or not close(grad[it], float(rows[it]["grad_norm"])):
            fail(f"{run['name']}: iteration {it}: lm loss {loss[it]} / grad-norm {grad[it]} against the loss log {rows[it]}")
        if not close(lr[it], expected_lr(run, it)):
            fail(f"{run['name']}: iteration {it}: learning-rate {lr[it]}, Megatron's {expected_lr(run, it)}")
        if series("loss-scale")[it] != run["loss_scale"] or series("batch-size")[it] != B:
            fail(f"{run['name']}: iteration {it}: loss-scale or batch-size")
    if sorted(series("lm loss vs samples")) != [i * B for i in range(1, ITERS + 1)]:
        fail(f"{run['name']}: 'lm loss vs samples' steps {sorted(series('lm loss vs samples'))}")
    # Validation after iterations 3 and 6 (--eval-interval 3) and after the last, as printed.
    printed = {int(m.group(1)): float(m.group(2)) for m in re.finditer(
        r"validation loss at iteration (\d+)[^|]*\| lm loss value: ([\d.E+-]+)", out)}
    valid = series("lm loss validation")
    if sorted(valid) != sorted(printed) or any(not close(valid[i], printed[i], 1e-5) for i in printed):
        fail(f"{run['name']}: lm loss validation {valid}, printed {printed}")
    ppl = series("lm loss validation ppl")
    if any(not close(ppl[i], math.exp(min(20, valid[i])), 1e-5) for i in valid):
        fail(f"{run['name']}: validation ppl {ppl}")
    # Throughput: Megatron's FLOPs over the interval's time, at each line but the first iteration's.
    times, tput = series("iteration-time"), series("throughput")
    if sorted(times) != list(range(INTERVAL, ITERS + 1, INTERVAL)):
        fail(f"{run['name']}: iteration-time at steps {sorted(times)}")
    flops = megatron_flops(**run["model"])
    for it, t in times.items():
        if not close(tput[it], flops / (t * 1e12 * run["world"]), 1e-5):
            fail(f"{run['name']}: iteration {it}: throughput {tput[it]}, Megatron's {flops / (t * 1e12 * run['world'])}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ptdp", required=True)
    ap.add_argument("case", choices=["log", "tensorboard"])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for run in RUNS:
            out, tb, rows = train(a.ptdp, run, tmp)
            if a.case == "log":
                check_log(run, out)
            else:
                check_tensorboard(run, out, tb, rows)
    print(f"PASS: {a.case}")


if __name__ == "__main__":
    main()
