#!/usr/bin/env python3
"""Throughput over commits, from the history CSV that scripts/track.sh appends to.

    plots/history.py results/history.csv plots/history.png
    plots/history.py results/history.csv --last-two PREV.csv CUR.csv

The plot has one line per configuration (experiment, model, t, p, d, v, b, B, schedule,
recompute, backend, precision): tokens/s and TFLOP/s per GPU for each run, in file order, labelled
with the run's git sha. --last-two writes the newest row and the previous row of the same
configuration as two result CSVs (header included) for `ptdp compare PREV.csv CUR.csv`; it writes
nothing and exits 3 when there is no previous run of that configuration.
Reads CSV only (the standard library's csv module); plotting needs matplotlib.
"""
import argparse
import csv
import os
import sys

KEY = ["experiment", "mode", "backend", "model", "tp", "pp", "dp", "vpp", "micro_batch", "global_batch",
       "schedule", "recompute", "scatter_gather", "precision"]


def read(path):
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
            header = rows[0].keys() if rows else []
    except OSError as e:
        sys.exit(f"history: error: {path}: cannot be read: {e.strerror}")
    missing = [c for c in KEY + ["tokens_per_s", "tflops_per_gpu", "git_sha"] if rows and c not in header]
    if missing:
        sys.exit(f"history: error: {path}:1: no column {missing[0]!r} in the header")
    return rows


def key(r):
    return tuple(r[k] for k in KEY)


def label(k):
    d = dict(zip(KEY, k))
    return (f"{d['experiment']} {d['model']} t={d['tp']} p={d['pp']} d={d['dp']} b={d['micro_batch']} "
            f"B={d['global_batch']} {d['backend']}/{d['precision']}")


def number(s):
    try:
        return float(s)
    except ValueError:
        return float("nan")


def last_two(path, prev_out, cur_out):
    rows = read(path)
    if not rows:
        sys.exit(f"history: error: {path}: no runs")
    cur = rows[-1]
    prev = [r for r in rows[:-1] if key(r) == key(cur)]
    if not prev:
        print(f"history: no earlier run of {label(key(cur))} to compare with")
        return 3
    with open(path, newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    for out, r in ((prev_out, prev[-1]), (cur_out, cur)):
        with open(out, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
            w.writeheader()
            w.writerow(r)
    return 0


def plot(path, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read(path)
    if not rows:
        sys.exit(f"history: error: {path}: no runs to plot")
    series = {}
    for i, r in enumerate(rows):
        series.setdefault(key(r), []).append((i, r))
    fig, axes = plt.subplots(2, 1, figsize=(max(6.0, 0.5 * len(rows) + 3), 6.5), sharex=True)
    for k, pts in series.items():
        xs = [i for i, _ in pts]
        axes[0].plot(xs, [number(r["tokens_per_s"]) for _, r in pts], marker="o", label=label(k))
        axes[1].plot(xs, [number(r["tflops_per_gpu"]) for _, r in pts], marker="o", label=label(k))
    axes[0].set_ylabel("tokens/s")
    axes[1].set_ylabel("TFLOP/s per GPU (Eq. 3)")
    axes[0].set_title("Training throughput over commits (" + os.path.basename(path) + ")")
    axes[0].legend(fontsize=7, loc="lower left")
    for ax in axes:
        ax.grid(True, alpha=0.3)
        ys = [float(v) for line in ax.get_lines() for v in line.get_ydata() if v == v]  # skip NaN (empty cells)
        ax.set_ylim(bottom=0, top=1.15 * max(ys + [1e-9]))
    axes[1].set_xticks(range(len(rows)))
    axes[1].set_xticklabels([r["git_sha"][:12] + "\n" + r.get("timestamp", "")[:10] for r in rows], rotation=60,
                            fontsize=7, ha="right")
    axes[1].set_xlabel("run (git sha, date)")
    fig.tight_layout()
    tmp = out + ".tmp.png"
    fig.savefig(tmp, dpi=120)
    os.replace(tmp, out)
    print(f"history: {out} ({len(rows)} runs, {len(series)} configurations)")
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("history")
    p.add_argument("png", nargs="?", default="plots/history.png")
    p.add_argument("--last-two", nargs=2, metavar=("PREV.csv", "CUR.csv"))
    a = p.parse_args(argv)
    if a.last_two:
        return last_two(a.history, *a.last_two)
    return plot(a.history, a.png)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
