"""The power of the history's gate, from a simulation (plots/gate_power.py; docs/ACCEPTANCE.md
states its numbers, plots/gate_test.sh checks them on fewer trials).

  plots/gate_power.py [--trials 200] [--noise 0.05] [--runs 3] [--seed 1]

Each trial is a made-up series: BUILDS builds of RUNS runs at 1000 tokens/s times a Gaussian noise
of NOISE (relative, a run's own), with one of these changes:

  flat        none (an alert is a false alarm)
  step-8      a -10% step 8 builds before the end
  step-40     a -7% step 40 builds before the end
  drift-12    a drift of -1.2% a build over the last 12 builds (-13.9% at the end)

and counts how often it is flagged: `gate` (gate.py: the last 5 builds against the baseline window
of 10 builds, alpha 0.01, tolerance 5%: scripts/track.sh's defaults), `scan` (changes.py finds a
drop anywhere: the corrected scan of the whole history) and `old gate` (the scan's drop began
within the last 5 builds: the gate before the baseline window). Prints one line a case and length.
"""
import argparse

CASES = {
    "flat": lambda i, n: 1.0,
    "step-8": lambda i, n: 0.90 if i >= n - 8 else 1.0,
    "step-40": lambda i, n: 0.93 if i >= n - 40 else 1.0,
    "drift-12": lambda i, n: (1 - 0.012) ** max(0, i - (n - 13)),
}


def simulate(case, builds, trials, noise=0.05, runs=3, seed=1, recent=5, window=10, alpha=0.01, tolerance=0.05,
             scan=True):
    """(gate, scan, old gate): how many of TRIALS series were flagged by each (the last two None
    without SCAN)."""
    import numpy as np

    from ptdp_tools.plots import changes, gate
    rng = np.random.default_rng(seed)
    level = CASES[case]
    counts = [0, 0, 0]
    for _ in range(trials):
        series = [list(1000 * level(i, builds) * (1 + rng.normal(0, noise, runs))) for i in range(builds)]
        g = gate.judge(series, 0, recent, window, alpha, tolerance)
        counts[0] += bool(g and g["alert"])
        if not scan:
            continue
        drops = [c for c in changes.find(series, alpha=alpha, tolerance=tolerance) if changes.is_regression(c)]
        counts[1] += bool(drops)
        counts[2] += any(c["build"] >= builds - recent for c in drops)
    return counts if scan else [counts[0], None, None]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--noise", type=float, default=0.05)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--builds", type=int, nargs="+", default=[20, 150])
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--gate-only", action="store_true", help="only the gate (seconds; the scan takes minutes)")
    a = p.parse_args(argv)
    print(f"gate power: {a.trials} trials, {a.runs} runs a build, noise {100 * a.noise:g}% a run, seed {a.seed}")
    for case in a.cases:
        for n in a.builds:
            if case == "step-40" and n <= 50:
                continue
            g, s, o = simulate(case, n, a.trials, a.noise, a.runs, a.seed, scan=not a.gate_only)
            print(f"gate power: {case} at {n} builds: gate {g}/{a.trials}"
                  + ("" if a.gate_only else f", scan {s}/{a.trials}, old gate {o}/{a.trials}"))
    return 0
