"""The nightly gate of the throughput history (plots/history.py --changes --recent K, scripts/track.sh's
GATE_RECENT): the last K builds of a series judged against a baseline window, with alerts that stay
until a person acknowledges them.

- baseline: up to `window` builds from the series' anchor, the newest build someone acknowledged
  (`--acknowledge SHA --by WHO --why TEXT`, a row of the acknowledgements file beside the history),
  or its first build. The baseline never moves on its own: a drop, a slow drift or an old step stays
  below it, and so fails every night, until it is acknowledged (the level is accepted) or fixed.
- current: the last K builds (those after the anchor).
- alert: scipy.stats' one-sided Mann-Whitney U test, the current runs below the baseline runs at
  significance alpha, and the median of the current runs at least `tolerance` below the baseline's.

One test per series a night, on windows of fixed size: no correction for the history's length, so
the power to find a drop does not fall as the history grows (gate_power.py simulates it). This is
the design of Bencher's thresholds (an alert stays until dismissed) with asv's and Conbench's
baseline window.
"""
import csv
import datetime
import os

ACK_COLUMNS = ["build", "series", "by", "why", "time"]


def acks_path(history):
    """The acknowledgements file of a history: results/history.csv -> results/history-acks.csv."""
    return os.path.splitext(history)[0] + "-acks.csv"


def read_acks(path, fail):
    """The rows of the acknowledgements file (none when there is no file); a malformed one is an
    input error naming the file and line."""
    if not os.path.exists(path):
        return []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            table = [(n, row) for n, row in enumerate(csv.reader(f), 1)]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        fail(f"{path}: cannot be read: {e}")
    if not table or table[0][1] != ACK_COLUMNS:
        fail(f"{path}:1: the header must be {','.join(ACK_COLUMNS)}")
    out = []
    for n, row in table[1:]:
        if not row:
            continue
        if len(row) != len(ACK_COLUMNS) or not row[0].strip():
            fail(f"{path}:{n}: {len(row)} fields or no build, expected {','.join(ACK_COLUMNS)}")
        out.append(dict(zip(ACK_COLUMNS, row)))
    return out


def acknowledge(history_rows, path, build, by, why, series, label_of, fail):
    """Appends an acknowledgement of BUILD (a git sha or a unique prefix of one in the history) for
    the series whose label holds SERIES (every series with runs of BUILD when empty); returns the
    full sha and the labels it covers."""
    if not by.strip() or not why.strip() or any("\n" in x or "\r" in x for x in (by, why, series)):
        fail("--acknowledge needs --by WHO and --why TEXT, each one line")
    shas = sorted({r["git_sha"] for r in history_rows if r["git_sha"].startswith(build)})
    if len(shas) != 1:
        fail(f"--acknowledge {build}: " + (f"{len(shas)} builds of the history start so: {', '.join(s[:12] for s in shas)}"
                                           if shas else "no build of the history starts so"))
    labels = sorted({label_of(r) for r in history_rows if r["git_sha"] == shas[0] and series in label_of(r)})
    if not labels:
        fail(f"--acknowledge {build} --series {series!r}: no series with runs of that build has it in its name")
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    if not new:
        read_acks(path, fail)  # refuses a foreign file before appending to it
    time = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    try:
        with open(path, "a", newline="", encoding="utf-8") as f:
            w = csv.writer(f, lineterminator="\n")
            if new:
                w.writerow(ACK_COLUMNS)
            w.writerow([shas[0], series, by, why, time])
    except OSError as e:
        fail(f"{path}: cannot be written: {e.strerror or e}")
    return shas[0], labels


def anchor(shas, label, acks):
    """The index of the newest build of the series (its shas in order) that an acknowledgement
    covers, and that acknowledgement; (0, None) when none does."""
    best = (0, None)
    where = {s: i for i, s in enumerate(shas)}
    for a in acks:
        i = where.get(a["build"])
        if i is not None and a["series"] in label and i >= best[0]:
            best = (i, a)
    return best


def judge(runs, start, recent, window, alpha, tolerance):
    """The gate on one series: runs[i] the tokens/s of build i, `start` its anchor. None when there
    is nothing to judge, else a dict: alert (bool), p, change (current median / baseline median - 1),
    base (first, last build index of the baseline) and cur (first, last of the current window)."""
    import numpy as np
    from scipy import stats
    n = len(runs)
    cur0 = max(n - recent, start + 1)
    if cur0 >= n:
        return None
    base1 = min(start + window, cur0)
    before = [v for b in runs[start:base1] for v in b]
    after = [v for b in runs[cur0:] for v in b]
    if not before or not after:
        return None
    m0, m1 = float(np.median(before)), float(np.median(after))
    change = m1 / m0 - 1 if m0 else 0.0
    same = min(before) == max(before) == min(after) == max(after)
    p = 1.0 if same else float(stats.mannwhitneyu(after, before, alternative="less").pvalue)
    return {"alert": p < alpha and change <= -tolerance, "p": p, "change": change, "before": m0, "after": m1,
            "base": (start, base1 - 1), "cur": (cur0, n - 1)}


def describe(g, shas, ack, history):
    """The lines that name an alert: what, since when, the range to bisect and how to acknowledge."""
    since = (f"since the acknowledgement of {shas[g['base'][0]][:12]} by {ack['by']} ({ack['why']})" if ack
             else "since the history began")
    first, last = g["base"]
    c0, c1 = g["cur"]
    return (f"ALERT: the last {c1 - c0 + 1} build(s) ({shas[c0][:12]}..{shas[c1][:12]}) run {100 * g['change']:+.1f}% "
            f"below the baseline (builds {shas[first][:12]}..{shas[last][:12]}, {since}; median "
            f"{g['before']:.4g} -> {g['after']:.4g} tokens/s, p = {g['p']:.2g}); git bisect start {shas[c1][:12]} "
            f"{shas[first][:12]}; it stays until fixed or acknowledged: plots/history.py {history} --acknowledge "
            f"{shas[c1][:12]} --by NAME --why TEXT")
