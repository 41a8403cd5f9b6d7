"""Calibrates a hardware profile (hardware/*.toml) from our own Google Benchmark results.

    scripts/calibrate.py hardware/cpu.toml results/microbench/bench_cpu.json [--precision f32] [--dry-run]

GEMMs: every benchmark whose name carries m:M/n:N/k:K (e.g. BM_Sgemm/m:1024/n:768/k:256), or
that has counters m, n and k (bench_gemm_cuda), and a GFLOP/s or TFLOP/s counter becomes a point
of [gemm] points (names with another precision as a path element, /f16/, are left out); the curve

    efficiency = max_efficiency * W / (W + mn_half) * k / (k + k_half),   W = m * n

is fitted to them (least squares on log efficiency, over a grid of mn_half and k_half; the
profile's peak for --precision is the denominator). Memory-bound kernels: benchmarks with a
bytes_per_second counter (Google Benchmark's SetBytesProcessed) whose name starts with BM_Mem
set memory.membound_efficiency to their median over memory.bandwidth_gbs.

The profile's [gemm] section is rewritten (other sections are kept as they are); every written
number names the results file, its git sha and date as its source. Python standard library only.
"""
import argparse
import json
import math
import re
import statistics
import sys
import tomllib

from ptdp_tools import atomic

SHAPE = re.compile(r"m:(\d+)/n:(\d+)/k:(\d+)")


def gemm_points(bench, precision=None):
    """(m, n, k, TFLOP/s) of every GEMM benchmark: the shape from the name (m:M/n:N/k:K) or from
    counters m, n and k (bench_gemm_cuda); with `precision`, names that carry another precision as a
    path element (/f16/, /bf16/, /f32/) are left out."""
    points = []
    others = {"f16", "bf16", "f32"} - {precision} if precision else set()
    for b in bench.get("benchmarks", []):
        name = b.get("name", "")
        if b.get("run_type") == "aggregate" or b.get("error_occurred") or set(name.split("/")) & others:
            continue
        m = SHAPE.search(name)
        if m:
            shape = (int(m.group(1)), int(m.group(2)), int(m.group(3)))
        elif all(isinstance(b.get(c), (int, float)) and b.get(c) > 0 for c in ("m", "n", "k")):
            shape = (int(b["m"]), int(b["n"]), int(b["k"]))
        else:
            continue
        if "TFLOP/s" in b:
            tflops = float(b["TFLOP/s"])
        elif "GFLOP/s" in b:
            tflops = float(b["GFLOP/s"]) / 1e3
        else:
            continue
        points.append((*shape, tflops))
    return points


def efficiency(e_max, mn_half, k_half, m, n, k):
    w = m * n
    return e_max * w / (w + mn_half) * k / (k + k_half)


def fit(points, peak_tflops):
    """Least squares on log(efficiency); e_max in closed form for each (mn_half, k_half)."""
    measured = [(m, n, k, t / peak_tflops) for m, n, k, t in points]
    if any(e <= 0 or e > 1.5 for *_, e in measured):
        sys.exit("calibrate: a measured efficiency is out of range; is --precision right?")
    grid_mn = [0.0] + [10 ** (x / 4) for x in range(12, 33)]   # 1e3 .. 1e8
    grid_k = [0.0] + [10 ** (x / 8) for x in range(0, 25)]     # 1 .. 1e3
    best = None
    for mn_half in grid_mn:
        for k_half in grid_k:
            shape = [math.log(efficiency(1.0, mn_half, k_half, m, n, k)) for m, n, k, _ in measured]
            logs = [math.log(e) for *_, e in measured]
            log_e_max = statistics.fmean(l - s for l, s in zip(logs, shape))
            err = sum((log_e_max + s - l) ** 2 for s, l in zip(shape, logs))
            # Prefer the simplest curve among equally good fits (smaller halves).
            key = (round(err, 12), mn_half + k_half)
            if best is None or key < best[0]:
                best = (key, min(1.0, math.exp(log_e_max)), mn_half, k_half)
    _, e_max, mn_half, k_half = best
    rms = math.sqrt(best[0][0] / len(measured))
    return e_max, mn_half, k_half, rms


def provenance(path, bench):
    ctx = bench.get("context", {})
    return f"{path} (git {ctx.get('git_sha', '?')}, {ctx.get('date', '?')[:10]}, host {ctx.get('host', ctx.get('host_name', '?'))})"


def gemm_section(e_max, mn_half, k_half, rms, points, src):
    how = f"measured: fitted by scripts/calibrate.py to {src}, rms log error {rms:.3f}"
    lines = [
        "[gemm]",
        f'max_efficiency = {{ value = {e_max:.4g}, source = "{how}" }}',
        f'mn_half = {{ value = {mn_half:.4g}, source = "{how}" }}',
        f'k_half = {{ value = {k_half:.4g}, source = "{how}" }}',
        f'points_source = "{src}"',
        "points = [",
    ]
    lines += [f"  {{ m = {m}, n = {n}, k = {k}, tflops = {t:.6g} }}," for m, n, k, t in points]
    lines += ["]", ""]
    return "\n".join(lines) + "\n"


def replace_section(text, name, new_body):
    """Replaces [name] up to the next [section] (or the end) with new_body."""
    pat = re.compile(r"^\[" + re.escape(name) + r"\]\n.*?(?=^\[|\Z)", re.S | re.M)
    if not pat.search(text):
        return text.rstrip("\n") + "\n\n" + new_body
    return pat.sub(lambda _: new_body, text, count=1)


def set_value(text, table, key, value, source):
    pat = re.compile(r"(^\[" + re.escape(table) + r"\]\n(?:(?!^\[).*\n)*?)^" + re.escape(key) + r" = .*$", re.M)
    line = f'{key} = {{ value = {value:.4g}, source = "{source}" }}'
    if not pat.search(text):
        sys.exit(f"calibrate: the profile has no {table}.{key} to replace")
    return pat.sub(lambda m: m.group(1) + line, text, count=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profile", help="hardware/NAME.toml to update")
    ap.add_argument("results", help="Google Benchmark JSON (--benchmark_out_format=json)")
    ap.add_argument("--precision", help="peak the GEMMs ran at (default: the profile's default_precision)")
    ap.add_argument("--dry-run", action="store_true", help="print the new profile instead of writing it")
    args = ap.parse_args(argv)

    with open(args.profile, "rb") as f:
        prof = tomllib.load(f)
    with open(args.profile) as f:
        text = f.read()
    with open(args.results) as f:
        bench = json.load(f)
    precision = args.precision or prof["default_precision"]
    peak = prof["compute"][f"peak_tflops_{precision}"]["value"]
    if peak <= 0:
        sys.exit(f"calibrate: {args.profile} has no {precision} peak")
    src = provenance(args.results, bench)

    points = gemm_points(bench, precision)
    if points:
        e_max, mn_half, k_half, rms = fit(points, peak)
        text = replace_section(text, "gemm", gemm_section(e_max, mn_half, k_half, rms, points, src))
        print(f"gemm: {len(points)} points, max_efficiency {e_max:.4g}, mn_half {mn_half:.4g}, "
              f"k_half {k_half:.4g}, rms log error {rms:.3f}")
    mem = [float(b["bytes_per_second"]) for b in bench.get("benchmarks", [])
           if b.get("name", "").startswith("BM_Mem") and "bytes_per_second" in b]
    if mem:
        eff = min(1.0, statistics.median(mem) / (prof["memory"]["bandwidth_gbs"]["value"] * 1e9))
        text = set_value(text, "memory", "membound_efficiency", eff, f"measured: median of BM_Mem* in {src}")
        print(f"memory: {len(mem)} kernels, membound_efficiency {eff:.3g}")
    if not points and not mem:
        sys.exit(f"calibrate: {args.results} has no GEMM (m:/n:/k:) or BM_Mem* benchmarks")
    if args.dry_run:
        sys.stdout.write(text)
    else:
        atomic.write(args.profile, text)
        print(f"wrote {args.profile}")
