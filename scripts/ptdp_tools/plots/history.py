"""Throughput over builds, from the history CSV that scripts/track.sh appends to.

    plots/history.py results/history.csv plots/history.png | PAGE.html [--commit-url URL]
    plots/history.py results/history.csv --last-two PREV.csv CUR.csv
    plots/history.py results/history.csv --changes [--html REPORT.html] [--tolerance 2] [--alpha 0.01]
    plots/history.py results/history.csv --spread 1.5
    plots/history.py results/history.csv --bmf OUT.json [--build SHA] | --asv FOLDER

A series is one configuration (the configuration key of `ptdp compare`, results/fields.json: the
experiment, mode, backend, communicator, precision, the model and its shape, the layout, batch,
schedule, recomputation and every other setting that changes what a run measures) on one machine (host, device): runs on other machines are never compared with each other.
A build is a git sha; its repeated runs are samples. The plot shows, per series, the median
tokens/s and TFLOP/s per GPU of each build with its noise band (min to max of its runs) and every
run as a dot, at a fixed width (the last 60 builds; ticks thinned). OUT.html is the interactive page
instead (history_page.py: fixed width, change points marked, commit links, a series filter). --last-two writes every run of the newest build of the newest row's series and every
run of the build before it in that series, as two result CSVs (header included) for `ptdp compare
PREV.csv CUR.csv`, which tests the change for significance; it writes nothing and exits 3 when the
series has no earlier build. --changes looks at the whole history of every series for the builds
where its tokens/s stepped or began to drift (changes.py beside this file says how) and prints
each with the `git bisect start BAD GOOD` range to search; exit code 1 when one is a drop of at
least --tolerance percent, 0 otherwise; --html also writes the page with the changes and alerts
of each series. --bmf writes one build's results (the newest row's by default) in Bencher's metric
format, --asv every build's into asv's results folder (history_export.py). --spread RATIO prints a warning when the runs of the newest build of the newest row's
series spread more than RATIO (the most tokens/s over the fewest): a busy machine, whose runs
compare weakly (exit 0 either way).
Reads CSV with the standard library's csv module, tokens/s and TFLOP/s by the number rules of ptdp's
CSV reader (a cell it refuses is an input error); plotting needs matplotlib, --changes SciPy.
"""
import argparse
import csv
import json
import math
import os
import re
import sys

from ptdp_tools import atomic, schema, tables

# The configuration key of `ptdp compare` and `ptdp reproduce` (results/fields.json); DEFAULTS:
# the key columns an older file may lack (or leave empty), as the rows it holds had them.
KEY = schema.KEY
DEFAULTS = schema.KEY_DEFAULTS
PNG_BUILDS = 60  # builds in the PNG, the newest
# The columns read as numbers; ptdp's CSV reader (core/results/csv_reader.cpp, parse_number) takes a
# decimal number (std::from_chars: optional sign, digits with one point, optional exponent) between
# blanks or tabs, and refuses the rest: Python's float() would also take '1_0' (as 10), 'inf', 'nan'.
NUMBERS = ("tokens_per_s", "tflops_per_gpu")
_DECIMAL = re.compile(r"[ \t]*[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[ \t]*")


def fail(message):
    """An input error: one line and exit code 2 (scripts/track.sh keeps 1 for a regression)."""
    print(f"history: error: {message}", file=sys.stderr)
    sys.exit(2)


def write(out, fill):
    """Writes the file OUT that a user named: fill(TMP) writes the content to a temporary path beside
    it that is renamed over OUT (atomic.user_file: a symlink or a device is written through). A
    missing folder or any other error writing it is an input error naming OUT (exit 2, never the
    regression code 1)."""
    folder = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(folder):
        fail(f"{out}: cannot be written: no folder {folder}")
    try:
        with atomic.user_file(out) as tmp:
            fill(tmp)
    except OSError as e:
        fail(f"{out}: cannot be written: {e.strerror or e}")


def write_text(out, text):
    def fill(tmp):
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            f.write(text)
    write(out, fill)


def read(path):
    """The rows of a history CSV; a row whose field count differs from the header's, or without a
    git sha, is refused naming the file and the line."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            table = [(reader.line_num, fields) for fields in reader]
    except OSError as e:
        fail(f"{path}: cannot be read: {e.strerror}")
    except (UnicodeDecodeError, csv.Error) as e:
        fail(f"{path}: not a CSV file: {e}")
    if not table:
        return []
    header = table[0][1]
    missing = [c for c in KEY + ["tokens_per_s", "tflops_per_gpu", "git_sha"]
               if c not in header and c not in DEFAULTS]
    if missing and any(fields for _, fields in table[1:]):
        fail(f"{path}:1: no column {missing[0]!r} in the header")
    rows = []
    for line, fields in table[1:]:
        if not fields:
            continue
        if len(fields) != len(header):
            fail(f"{path}:{line}: {len(fields)} fields, the header has {len(header)}")
        r = dict(zip(header, fields))
        if not r["git_sha"].strip():
            fail(f"{path}:{line}: column 'git_sha' is empty")
        for column in NUMBERS:
            text = r.get(column, "")
            if text.strip(" \t") and parse_number(text) is None:
                fail(f"{path}:{line}: column {column!r}: {text!r} is not a number")
        rows.append(r)
    return rows


def parse_number(text):
    """A finite decimal number by the rules of ptdp's CSV reader, or None."""
    if not _DECIMAL.fullmatch(text):
        return None
    v = float(text)
    return v if math.isfinite(v) else None  # '1e999' overflows: from_chars refuses it too


def key(r):
    return tuple(r.get(k) or DEFAULTS.get(k, "") for k in KEY)


def series_key(r):
    return key(r) + (r.get("host", ""), r.get("device", ""))


def label(k):
    d = dict(zip(KEY, k))
    text = (f"{d['experiment']} {d['model']} t={d['tp']} p={d['pp']} d={d['dp']} b={d['micro_batch']} "
            f"B={d['global_batch']} {d['backend']}/{d['precision']}")
    if len(k) > len(KEY):
        text += f" on {k[len(KEY)]}"
    return text


def number(s):
    """A column read() checked: its number, NaN when empty."""
    v = parse_number(s or "")
    return float("nan") if v is None else v


def builds(rows):
    """The rows of one series grouped by git sha, in order of each build's first run."""
    out = {}
    for r in rows:
        out.setdefault(r["git_sha"], []).append(r)
    return list(out.items())


def last_two(path, prev_out, cur_out):
    rows = read(path)
    if not rows:
        fail(f"{path}: no runs")
    k = series_key(rows[-1])
    series = builds([r for r in rows if series_key(r) == k])
    newest = rows[-1]["git_sha"]
    cur = dict(series)[newest]
    prev = [b for b in series if b[0] != newest]
    if not prev:
        print(f"history: no earlier build of {label(k)} to compare with")
        return 3
    prev_sha, prev_rows = prev[-1]
    with open(path, newline="", encoding="utf-8") as f:
        header = next(csv.reader(f))
    for out, rs in ((prev_out, prev_rows), (cur_out, cur)):
        write_text(out, tables.csv_text(rs, header))
    print(f"history: {label(k)}: build {prev_sha[:12]} ({len(prev_rows)} runs) -> {newest[:12]} ({len(cur)} runs)")
    return 0


def spread(path, limit):
    """A warning line when the newest build's runs of the newest row's series spread more than LIMIT."""
    rows = read(path)
    if not rows:
        fail(f"{path}: no runs")
    k = series_key(rows[-1])
    newest = rows[-1]["git_sha"]
    v = [x for x in (number(r["tokens_per_s"]) for r in rows
                     if series_key(r) == k and r["git_sha"] == newest) if x == x]
    if len(v) >= 2 and min(v) > 0 and max(v) / min(v) > limit:
        print(f"history: warning: the {len(v)} runs of build {newest[:12]} of {label(k)} spread "
              f"{max(v) / min(v):.3g}x (tokens/s {min(v):.4g} to {max(v):.4g}, more than {limit:g}x): "
              "something else used the machine; their comparison is weak (PIN, THREADS, a quieter moment)")
    return 0


def plot(path, out, commit_url=None):
    rows = read(path)
    if not rows:
        fail(f"{path}: no runs to plot")
    if out.lower().endswith((".html", ".htm")):
        return write_page(path, out, commit_url=commit_url)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        fail(f"plotting needs matplotlib ({e}): apt-get install python3-matplotlib")
    shas = list(dict.fromkeys(r["git_sha"] for r in rows))  # builds in order of first run
    shas = shas[-PNG_BUILDS:]  # a fixed width: the last PNG_BUILDS builds (the page has them all)
    rows = [r for r in rows if r["git_sha"] in set(shas)]
    series = {}
    for r in rows:
        series.setdefault(series_key(r), []).append(r)
    fig, axes = plt.subplots(2, 1, figsize=(12.0, 6.5), sharex=True)
    top = [1e-9, 1e-9]
    for k, rs in series.items():
        for ax, col, t in ((axes[0], "tokens_per_s", 0), (axes[1], "tflops_per_gpu", 1)):
            xs, med, lo, hi, dots = [], [], [], [], []
            for sha, b in builds(rs):
                v = sorted(x for x in (number(r[col]) for r in b) if x == x)  # skip NaN (empty cells)
                if not v:
                    continue
                x = shas.index(sha)
                xs.append(x)
                med.append(v[len(v) // 2] if len(v) % 2 else 0.5 * (v[len(v) // 2 - 1] + v[len(v) // 2]))
                lo.append(v[0])
                hi.append(v[-1])
                dots += [(x, y) for y in v]
                top[t] = max(top[t], v[-1])
            if xs:
                line = ax.plot(xs, med, marker="o", label=label(k))[0]
                ax.fill_between(xs, lo, hi, color=line.get_color(), alpha=0.2)
                ax.scatter([d[0] for d in dots], [d[1] for d in dots], s=8, alpha=0.6, color=line.get_color())
    axes[0].set_ylabel("tokens/s")
    axes[1].set_ylabel("TFLOP/s per GPU (Eq. 3)")
    axes[0].set_title("Throughput per build: median, band min-max of its runs\n(" + os.path.basename(path) + ")",
                      fontsize=10)
    axes[0].legend(fontsize=7, loc="lower left")
    for ax, t in zip(axes, top):
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0, top=1.15 * t)
    first = {}
    for r in rows:
        first.setdefault(r["git_sha"], r)
    step = max(1, -(-len(shas) // 30))  # at most 30 tick labels
    axes[1].set_xticks(range(0, len(shas), step))
    axes[1].set_xticklabels([s[:12] + "\n" + first[s].get("timestamp", "")[:10] for s in shas[::step]], rotation=60,
                            fontsize=7, ha="right")
    axes[1].set_xlabel("build (git sha, date of its first run)")
    fig.tight_layout()
    write(out, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))  # whatever OUT's suffix says
    print(f"history: {out} ({len(rows)} runs, {len(shas)} builds, {len(series)} series)")
    return 0


def find_changes(path, tolerance, alpha, html, recent=0, window=10, acks_file=None, commit_url=None, quiet=False):
    """Prints every series' changes; with recent > 0 also judges its last `recent` builds against
    its baseline window (gate.py: an alert until acknowledged). Exit code 1 on an alert (recent > 0)
    or on any drop found in the history (recent = 0), else 0. HTML: the page with them marked."""
    rows = read(path)
    if not rows:
        fail(f"{path}: no runs")
    try:
        from ptdp_tools.plots import changes, gate
    except ImportError as e:
        fail(f"the changes (--changes, the page) need SciPy and NumPy ({e}): apt-get install python3-scipy")
    acks = gate.read_acks(acks_file or gate.acks_path(path), fail) if recent else []
    series = {}
    for r in rows:
        series.setdefault(series_key(r), []).append(r)
    report, regressions, marks = [], 0, {}
    say = (lambda text: None) if quiet else print
    for k, rs in series.items():
        bs = [(sha, [x for x in (number(r["tokens_per_s"]) for r in b) if x == x]) for sha, b in builds(rs)]
        bs = [(sha, v) for sha, v in bs if v]
        shas, runs = [sha for sha, _ in bs], [v for _, v in bs]
        found = changes.find(runs, alpha=alpha, tolerance=tolerance / 100)
        lines = [changes.describe(c, shas) for c in found]
        alert, g = None, None
        if recent:
            start, ack = gate.anchor(shas, label(k), acks)
            g = gate.judge(runs, start, recent, window, alpha, tolerance / 100)
            alert = gate.describe(g, shas, ack, path) if g and g["alert"] else None
        else:
            regressions += sum(changes.is_regression(c) for c in found)
        say(f"history: {label(k)}: {len(bs)} builds, " + ("; ".join(lines) if lines else "no change"))
        if alert:
            regressions += 1
            say(f"history: {label(k)}: {alert}")
            lines.append(alert)
        report.append((label(k), len(bs), lines))
        marks[k] = ([dict(c, sha=shas[c["build"]]) for c in found],
                    {"first": shas[g["cur"][0]], "last": shas[g["cur"][1]], "change": g["change"]} if alert else None)
    if html:
        write_page(path, html, report, marks, commit_url)
    if quiet:
        return 0
    if recent:
        print(f"history: {regressions} alert(s): the last {recent} builds at least {tolerance:g}% below the baseline "
              f"(up to {window} builds from the last acknowledged one; significance {alpha:g}) in {len(series)} series")
    else:
        print(f"history: {regressions} drop(s) of at least {tolerance:g}% (significance {alpha:g}) in {len(series)} series")
    return 1 if regressions else 0


def add_acknowledgement(path, build, by, why, series, acks_file):
    from ptdp_tools.plots import gate
    out = acks_file or gate.acks_path(path)
    sha, labels = gate.acknowledge(read(path), out, build, by, why, series, lambda r: label(series_key(r)), fail)
    print(f"history: {out}: build {sha[:12]} acknowledged by {by} for {len(labels)} series ({'; '.join(labels)}): {why}")
    return 0


def series_data(rows):
    """Every series as history_page and history_export take it: name, config, host, device and
    builds (sha -> (tokens/s runs, TFLOP/s runs)); and every build's sha in order, date and time."""
    import datetime
    groups = {}
    for r in rows:
        groups.setdefault(series_key(r), []).append(r)
    out = []
    for k, rs in groups.items():
        bs = {}
        for sha, b in builds(rs):
            t = [x for x in (number(r["tokens_per_s"]) for r in b) if x == x]
            f = [x for x in (number(r["tflops_per_gpu"]) for r in b) if x == x]
            bs[sha] = (t, f)
        out.append({"key": k, "name": label(k), "config": label(k[:len(KEY)]), "host": k[len(KEY)],
                    "device": k[len(KEY) + 1], "builds": bs, "changes": [], "alert": None})
    shas = list(dict.fromkeys(r["git_sha"] for r in rows))
    dates, times = {}, {}
    for r in rows:
        stamp = r.get("timestamp", "")
        dates.setdefault(r["git_sha"], stamp[:10])
        try:
            when = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
            times.setdefault(r["git_sha"], int(when.timestamp() * 1000))
        except ValueError:
            times.setdefault(r["git_sha"], 0)
    return out, shas, dates, times


def write_page(path, out, report=None, marks=None, commit_url=None):
    """The interactive page (history_page.py); REPORT and MARKS from find_changes, else the changes
    are searched with the defaults (SciPy) and the page has no gate."""
    from ptdp_tools.plots import history_export, history_page
    try:
        import plotly  # noqa: F401
    except ImportError as e:
        fail(f"the page needs plotly ({e}): apt-get install python3-plotly")
    if report is None:
        return find_changes(path, 2.0, 0.01, out, commit_url=commit_url, quiet=True)
    rows = read(path)
    series, shas, dates, _ = series_data(rows)
    for s in series:
        s["changes"], s["alert"] = marks.get(s["key"], ([], None))
    newest = rows[-1]["git_sha"]
    exports = [(f"bmf-{newest[:12]}.json", history_export.bmf(series, newest))]
    text = history_page.page(os.path.basename(path), series, shas, dates,
                             history_page.commit_url_template(commit_url), report, exports)
    write_text(out, text)
    print(f"history: {out} ({len(rows)} runs, {len(shas)} builds, {len(series)} series)")
    return 0


def export(path, bmf_out, build, asv_dir):
    from ptdp_tools.plots import history_export
    rows = read(path)
    if not rows:
        fail(f"{path}: no runs")
    series, shas, _, times = series_data(rows)
    if bmf_out:
        sha = rows[-1]["git_sha"]
        if build:
            match = [s for s in shas if s.startswith(build)]
            if len(match) != 1:
                fail(f"--build {build}: {len(match)} builds of the history start so")
            sha = match[0]
        write_text(bmf_out, json.dumps(history_export.bmf(series, sha), indent=1) + "\n")
        print(f"history: {bmf_out}: build {sha[:12]} in Bencher's metric format ({len(series)} series)")
    if asv_dir:
        files = history_export.asv_files(series, shas, times)
        history_export.write_asv(asv_dir, files, write_text, fail)
        print(f"history: {asv_dir}: asv's results of {len(shas)} builds ({len(files)} files)")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("history")
    p.add_argument("png", nargs="?", default="plots/history.png")
    p.add_argument("--last-two", nargs=2, metavar=("PREV.csv", "CUR.csv"))
    p.add_argument("--spread", type=float, metavar="RATIO",
                   help="warn when the newest build's runs spread more than RATIO (most tokens/s over fewest)")
    p.add_argument("--changes", action="store_true", help="find the builds where a series stepped or drifted")
    p.add_argument("--html", metavar="PAGE.html", help="with --changes: also write the page (changes and alerts marked)")
    p.add_argument("--commit-url", metavar="URL", help="a commit's page, {sha} for its sha (default: from the origin remote)")
    p.add_argument("--bmf", metavar="OUT.json", help="write one build's results in Bencher's metric format (BMF)")
    p.add_argument("--build", metavar="SHA", help="with --bmf: that build (default: the newest row's)")
    p.add_argument("--asv", metavar="FOLDER", help="write every build's results into asv's results folder")
    p.add_argument("--tolerance", type=float, default=2.0, help="smallest change reported, in percent")
    p.add_argument("--alpha", type=float, default=0.01, help="significance of a change (corrected)")
    p.add_argument("--recent", type=int, default=0, metavar="K",
                   help="with --changes: exit 1 when the last K builds of a series run below its baseline window "
                        "(an alert, until acknowledged; 0: exit 1 on any drop found in the history)")
    p.add_argument("--baseline", type=int, default=10, metavar="W",
                   help="with --recent: the baseline window, up to W builds from the last acknowledged build")
    p.add_argument("--acks", metavar="FILE", help="the acknowledgements file (default: HISTORY's name with -acks.csv)")
    p.add_argument("--acknowledge", metavar="SHA", help="acknowledge the level of build SHA (an alert's newest build)")
    p.add_argument("--by", default="", help="with --acknowledge: who acknowledges")
    p.add_argument("--why", default="", help="with --acknowledge: why the level is accepted")
    p.add_argument("--series", default="", help="with --acknowledge: only the series whose name holds this text")
    a = p.parse_args(argv)
    if a.acknowledge is not None:
        return add_acknowledgement(a.history, a.acknowledge, a.by, a.why, a.series, a.acks)
    if a.baseline < 1:
        fail(f"--baseline {a.baseline} must be 1 or more")
    if a.recent < 0:
        fail(f"--recent {a.recent} must be 0 or more")
    if a.recent and not a.changes:
        fail("--recent needs --changes")
    if not (0 <= a.tolerance < 100):
        fail(f"--tolerance {a.tolerance:g} must be in [0, 100)")
    if not (0 < a.alpha < 1):
        fail(f"--alpha {a.alpha:g} must be in (0, 1)")
    if a.html and not a.changes:
        fail("--html needs --changes")
    if a.spread is not None:
        if not a.spread > 1:
            fail(f"--spread {a.spread:g} must be more than 1 (the most tokens/s over the fewest)")
        return spread(a.history, a.spread)
    if a.build and not a.bmf:
        fail("--build needs --bmf")
    if a.bmf or a.asv:
        return export(a.history, a.bmf, a.build, a.asv)
    if a.changes:
        return find_changes(a.history, a.tolerance, a.alpha, a.html, a.recent, a.baseline, a.acks, a.commit_url)
    if a.last_two:
        return last_two(a.history, *a.last_two)
    return plot(a.history, a.png, a.commit_url)

