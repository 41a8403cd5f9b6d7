"""Change points in a throughput history (plots/history.py --changes): where a series' throughput
stepped or started to drift, named by build, with a `git bisect` range.

A series' builds, in history order, each a set of runs (tokens/s). Two models are fitted against
"no change" (every build the same):

- step at build s: the runs of the builds before s against those from s on, scipy.stats'
  Mann-Whitney U test (two-sided; no assumption of normal noise); its effect the ratio of the
  two sides' medians.
- drift from build s: the builds' medians constant up to s - 1 and linear from there on (a
  hinge), fitted by least squares for every s; scipy.stats' F distribution tests the slope
  against the constant model; its effect the fitted change from s - 1 to the last build. Chosen
  over steps when the hinge fits the medians better than the best single step.

A step compares the runs of up to `window` builds on each side of s, so that several steps (a
drop and its fix) are each found. Each candidate s gets its p-value multiplied by the number of
candidates (Bonferroni), so that a long noisy history does not find changes by chance. A change
is reported when the corrected p-value is below alpha and the effect is at least the tolerance;
steps are taken strongest first, each at least `window` builds from those taken. The library:
SciPy (Debian's python3-scipy) for the test statistics; the scan is this file's.
"""
import math

import numpy as np
from scipy import stats


def median(values):
    return float(np.median(values))


def _steps(runs, window, min_side):
    """Every candidate step: (p, s, before, after), the runs of up to `window` builds before s
    against up to `window` from s on."""
    n = len(runs)
    candidates = max(1, n - 2 * min_side + 1)
    out = []
    for s in range(min_side, n - min_side + 1):
        left = [v for b in runs[max(0, s - window):s] for v in b]
        right = [v for b in runs[s:s + window] for v in b]
        if len(left) < 2 or len(right) < 2 or min(left) == max(left) == min(right) == max(right):
            continue
        p = stats.mannwhitneyu(left, right, alternative="two-sided").pvalue * candidates
        out.append((min(1.0, p), s, median(left), median(right)))
    return out


def _step_sse(y):
    """The residual of the best single step (two levels) through the medians y."""
    return min(float(np.sum((y[:s] - y[:s].mean()) ** 2) + np.sum((y[s:] - y[s:].mean()) ** 2))
               for s in range(1, len(y)))


def _drift(runs):
    """The best hinge through the builds' medians: (p, s, start, end, sse) or None, s the last
    build at the old level, start and end the fitted medians at s and at the last build."""
    y = np.array([median(b) for b in runs])
    n = len(y)
    if n < 4:
        return None
    sse0 = float(np.sum((y - y.mean()) ** 2))
    if sse0 <= 0:
        return None
    best = None
    candidates = n - 2
    for s in range(0, n - 2):  # at least 3 builds on the slope
        x = np.maximum(np.arange(n) - s, 0).astype(float)
        design = np.column_stack([np.ones(n), x])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        sse = float(np.sum((y - design @ coef) ** 2))
        f = (sse0 - sse) / max(sse / (n - 2), 1e-300)
        p = min(1.0, float(stats.f.sf(f, 1, n - 2)) * candidates)
        if best is None or sse < best[4]:
            best = (p, s, float(coef[0]), float(coef[0] + coef[1] * (n - 1 - s)), sse)
    return best


def find(runs, alpha=0.01, tolerance=0.02, window=4, min_side=2):
    """The changes of one series, in build order: dicts with kind (step | drift), build (the index
    where it starts), before and after (median tokens/s, or the drift's fitted start and end),
    change (after / before - 1) and p (corrected). Steps: the strongest candidate first, then the
    next one at least `window` builds away from those taken, and so on."""
    steps = [c for c in _steps(runs, window, min_side)
             if c[0] < alpha and c[2] and abs(c[3] / c[2] - 1) >= tolerance]
    drift = _drift(runs)
    if drift and drift[0] < alpha and drift[2] and abs(drift[3] / drift[2] - 1) >= tolerance:
        # A drift when the hinge fits the medians better than any single step does.
        p, s, start, end, sse = drift
        if sse < _step_sse(np.array([median(b) for b in runs])):
            return [{"kind": "drift", "build": s + 1, "before": start, "after": end, "change": end / start - 1,
                     "p": p}]
    taken = []
    for p, s, before, after in sorted(steps):
        if all(abs(s - t["build"]) >= window for t in taken):
            taken.append({"kind": "step", "build": s, "before": before, "after": after, "change": after / before - 1,
                          "p": p})
    return sorted(taken, key=lambda c: c["build"])


def describe(c, shas):
    """One line for a change, with the builds to bisect between."""
    s = c["build"]
    first = shas[s][:12]
    good = shas[s - 1][:12] if s > 0 else None
    what = "drop" if c["change"] < 0 else "rise"
    if c["kind"] == "step":
        text = (f"step {what} of {100 * c['change']:+.1f}% at build {first} (median {c['before']:.4g} -> "
                f"{c['after']:.4g} tokens/s, p = {c['p']:.2g})")
    else:
        text = (f"drift {what} of {100 * c['change']:+.1f}% from build {first} to the last "
                f"(fitted {c['before']:.4g} -> {c['after']:.4g} tokens/s, p = {c['p']:.2g})")
    if good:
        text += f"; git bisect start {first} {good}"
    return text


def is_regression(c):
    return c["change"] < 0 and not math.isnan(c["change"])
