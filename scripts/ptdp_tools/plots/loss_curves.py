"""Training-loss curves from `ptdp train --loss-log` files, one line per file.

    plots/loss_curves.py OUT.png LABEL=LOSS.csv [LABEL=LOSS.csv ...]

Each LOSS.csv has the header iteration,loss,grad_norm,lr,loss_scale,skipped (as --loss-log writes
it). The plot shows each run's per-iteration loss, faint, and its 10-iteration running mean.
Reads CSV only (the standard library's csv module); plotting needs matplotlib.
"""
import csv
import sys


def read(path):
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        sys.exit(f"loss_curves: error: {path}: cannot be read: {e.strerror}")
    if not rows or "iteration" not in rows[0] or "loss" not in rows[0]:
        sys.exit(f"loss_curves: error: {path}:1: needs the columns iteration and loss (a --loss-log file)")
    try:
        return [int(r["iteration"]) for r in rows], [float(r["loss"]) for r in rows]
    except ValueError as e:
        sys.exit(f"loss_curves: error: {path}: {e}")


def running_mean(values, n=10):
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v - (values[i - n] if i >= n else 0.0)
        out.append(acc / min(i + 1, n))
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or any("=" not in a for a in argv[1:]):
        sys.exit("usage: plots/loss_curves.py OUT.png LABEL=LOSS.csv [LABEL=LOSS.csv ...]")
    try:
        import matplotlib
    except ImportError as e:
        sys.exit(f"loss_curves: error: drawing needs matplotlib ({e}): apt-get install python3-matplotlib "
                 "(scripts/setup_packages.sh) or pip install matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for spec in argv[1:]:
        label, path = spec.split("=", 1)
        it, loss = read(path)
        line, = ax.plot(it, loss, alpha=0.25, linewidth=0.8)
        ax.plot(it, running_mean(loss), color=line.get_color(), label=f"{label} (10-iteration mean)")
    ax.set_xlabel("iteration")
    ax.set_ylabel("loss (nats per token)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(argv[0], dpi=120)
    print(f"wrote {argv[0]}")

