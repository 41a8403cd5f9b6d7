"""The paper's figures and Tables 1 and 2, two tables of Korthikanti et al. 2022, the Megatron-Core H100
weak scaling and BLOOM-176B's layouts, from our result CSVs, with the published points overlaid.

    plots/figures.py [NAME ...] [--results DIR] [--paper DIR] [--out DIR] [--hardware PROFILE]

Reads DIR/NAME.csv (written by `ptdp reproduce NAME`, the result CSV contract of docs/RESULTS.md)
and the published values (results/paper/figures.csv, table1.csv, table2.csv for the SC'21 paper;
results/paper/NAME.csv for kor22-table4, kor22-table5, mcore-h100 and bloom-176b); writes OUT/NAME.png
for every artefact (table1, table2, fig6, fig7, fig8, fig10 ... fig18, kor22-table4, kor22-table5,
mcore-h100, bloom-176b and llama by default) in the paper's axes and units:
our simulated line (mode=simulate, the hardware profile, paper scale) with the paper's points
as markers, and, where the CSV has them, the rows measured at small scale (mode=run) in a second
panel; Tables 1 and 2 also get the days to train on 300B tokens by Eq. (4) against the paper's.
kor22-table4 (Korthikanti et al. 2022, arXiv 2205.05198, Table 4): one 22B layer's forward and backward
time (ms) for the five techniques (no recompute, sequence parallelism, full recompute, selective
recompute, selective + sequence), bars of ours beside the paper's. kor22-table5 (their Table 5): the
iteration time (s) of 22B, 175B, 530B and 1T with full recompute and with their present work (selective
recompute + sequence parallelism), bars on a log axis, and the present work's speed-up ours vs theirs.
mcore-h100 (Megatron-LM README, H100 weak scaling, Megatron-Core r0.8.0): model TFLOP/s per GPU of
1.7B to 462B on 48 to 6,144 H100s. bloom-176b (BigScience's layout search for BLOOM-176B on Jean Zay,
Megatron-DeepSpeed): the iteration time (s) of five layouts of 384 A100s, bars of ours beside theirs.
Each artefact is drawn from the simulated rows of its own profile: h100-dgx for mcore-h100, a100-jeanzay
for bloom-176b, a100-selene for every other (fig6 is analytic); --hardware PROFILE picks one profile for all.
llama (`ptdp reproduce llama`): the planner's tokens/s per GPU and days for LLaMA's four sizes on
2,048 A100-80GB against the LLaMA paper's one published figure (65B: ~380 tokens/s/GPU).
Then OUT/summary.png: the error against the published value of every point, and the same errors as a
table on stdout. It reads CSV files only. A missing or malformed file ends it with one line
"plots: error: FILE[:LINE]: problem" on stderr and exit code 2, before anything is drawn; so does a
Python without matplotlib ("plots: error: drawing needs matplotlib ...").
"""
import argparse
import csv
import math
import os
import sys
import textwrap

from ptdp_tools import repo

ARTEFACTS = ["table1", "table2", "fig6", "fig7", "fig8", "fig10", "fig11", "fig12", "fig13", "fig14", "fig15",
             "fig16", "fig17", "fig18", "kor22-table4", "kor22-table5", "mcore-h100", "bloom-176b", "llama"]

# Artefacts of later publications: their published values are in PAPER/NAME.csv (figure,series,x,value,unit).
OWN_PAPER_FILE = ["kor22-table4", "kor22-table5", "mcore-h100", "bloom-176b"]

# The series name of an artefact of one series (fig7): it pairs the rows with the paper's points, and
# its legend entries name only the source.
SINGLE_SERIES = "(single series)"

# The hardware profile whose simulated rows an artefact draws, unless --hardware names one for all.
DEFAULT_HARDWARE = "a100-selene"
ARTEFACT_HARDWARE = {"mcore-h100": "h100-dgx", "bloom-176b": "a100-jeanzay"}

# Columns of the result CSV this script uses (a subset of the contract's).
RESULT_COLUMNS = ["experiment", "mode", "backend", "model", "gpus", "tp", "pp", "dp", "vpp", "micro_batch",
                  "global_batch", "schedule", "recompute", "scatter_gather", "iter_time_ms", "tflops_per_gpu",
                  "seq_per_s", "bubble_fraction", "loss", "params"]
INT_COLUMNS = ["gpus", "tp", "pp", "dp", "vpp", "micro_batch", "global_batch", "scatter_gather"]
FLOAT_COLUMNS = ["iter_time_ms", "tflops_per_gpu", "seq_per_s", "bubble_fraction", "loss", "params"]
# The further columns an artefact needs: (integer columns, number columns).
EXTRA_COLUMNS = {
    "kor22-table4": (["hidden", "sequence_parallel"], ["layer_fwd_ms", "layer_bwd_ms"]),
    "kor22-table5": (["hidden", "sequence_parallel"], []),
    "mcore-h100": (["hidden"], ["model_tflops_per_gpu"]),
    "bloom-176b": (["heads"], []),
}

# Training time for this many tokens by the paper's Eq. (4), 8 T P / (n X), for Tables 1 and 2.
DAYS_TOKENS = 300e9


def days_eq4(params, gpus, tflops):
    return 8.0 * DAYS_TOKENS * params / (gpus * tflops * 1e12) / 86400.0

TABLE1_MODELS = {"gpt-1.7b": "1.7", "gpt-3.6b": "3.6", "gpt-7.5b": "7.5", "gpt-18b": "18.4", "gpt-39b": "39.1",
                 "gpt-76b": "76.1", "gpt-145b": "145.6", "gpt-310b": "310.1", "gpt-530b": "529.6",
                 "gpt-1t": "1008.0"}


class InputError(Exception):
    """A malformed or missing input file: the message names the file (and line) and the problem."""


def read_csv(path, required, ints=(), floats=()):
    """Rows of a CSV as dicts, strictly: the header must hold `required`, every row as many fields as
    the header, `ints` integers and `floats` numbers (empty allowed)."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = list(csv.reader(f, strict=True))
    except (csv.Error, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not a readable CSV file ({e})")
    if not lines or not any(x.strip() for x in lines[0]):
        raise InputError(f"{path}:1: the file is empty (no header line)")
    header = [h.strip() for h in lines[0]]
    for c in required:
        if c not in header:
            raise InputError(f"{path}:1: no column '{c}' in the header")
    rows = []
    for n, fields in enumerate(lines[1:], start=2):
        if not fields or all(not x.strip() for x in fields):
            continue
        if len(fields) != len(header):
            raise InputError(f"{path}:{n}: {len(fields)} fields, the header has {len(header)}")
        row = dict(zip(header, (x.strip() for x in fields)))
        for c in ints:
            if row[c] == "":
                row[c] = None
                continue
            try:
                row[c] = int(row[c])
            except ValueError:
                raise InputError(f"{path}:{n}: column '{c}': '{row[c]}' is not an integer")
        for c in floats:
            if row[c] == "":
                row[c] = None
                continue
            try:
                v = float(row[c])
            except ValueError:
                raise InputError(f"{path}:{n}: column '{c}': '{row[c]}' is not a number")
            if not math.isfinite(v):
                raise InputError(f"{path}:{n}: column '{c}': '{row[c]}' is not a finite number")
            row[c] = v
        row["_line"] = n
        rows.append(row)
    return rows


# ---- what each artefact is: the paper's axes, and how a row maps to (series, x) ----------------------


def batch_series(r):
    return f"Batch size = {r['global_batch']}"


def table1_x(r):
    name = r["model"][:-len("-small")] if r["model"].endswith("-small") else r["model"]
    return TABLE1_MODELS.get(name)


def model_size(r):
    """The Table 2 / Figure 10 model of a row: 175B or 530B (small copies included)."""
    name = r["model"][:-len("-small")] if r["model"].endswith("-small") else r["model"]
    return {"gpt3-175b": "175B", "gpt-530b": "530B"}.get(name)


def zero3_series(r):
    """Table 2's schemes: ZeRO-3 runs without model parallelism, PTD-P with t = 8 (t = 2 at small scale)."""
    size = model_size(r)
    if size is None:
        return None
    return f"{'ZeRO-3' if r['tp'] == 1 and r['pp'] == 1 else 'PTD-P'}, {size}"


# Small-scale rank counts stand for the paper's GPU counts (experiments/specs/table2.toml).
SMALL_GPUS = {("175B", 4): "384", ("175B", 8): "768", ("175B", 16): "1536", ("530B", 4): "560", ("530B", 5): "640",
              ("530B", 8): "1120", ("530B", 16): "2240"}


def table2_x(r):
    if r["model"].endswith("-small"):
        return SMALL_GPUS.get((model_size(r), r["gpus"]))
    return str(r["gpus"])


def fig10_x(r):
    # The paper draws 530B ZeRO-3's first point (640 GPUs) at 560.
    x = table2_x(r)
    return "560" if x == "640" else x


# Korthikanti et al. 2022, Table 4: a row's technique from its recompute and sequence_parallel columns.
KOR22_TECHNIQUES = {("none", 0): "Baseline no recompute", ("none", 1): "Sequence parallelism",
                    ("full", 0): "Baseline with recompute", ("selective", 0): "Selective recompute",
                    ("selective", 1): "Selective + sequence"}
# Their Table 5 and the Megatron-Core H100 table: the model of a row from its hidden size.
KOR22_MODELS = {6144: "22B", 12288: "175B", 20480: "530B", 25600: "1T"}
KOR22_XORDER = ["22B", "175B", "530B", "530B, 2240 GPUs", "1T"]


def kor22_table5_x(r):
    """Table 5's model name; the 530B run on 2240 GPUs (d = 8, the abstract's MFU) named apart."""
    name = KOR22_MODELS.get(r["hidden"])
    return f"{name}, {r['gpus']} GPUs" if name and r["dp"] > 1 else name
MCORE_MODELS = {2048: "1.7B", 4096: "7.1B", 6144: "16B", 7168: "32B", 8192: "70B", 10240: "119B", 12288: "177B",
                16384: "314B", 18432: "462B"}


# BLOOM-176B's layouts (results/paper/bloom-176b.csv's x) from a row's columns.
BLOOM_LAYOUTS = ["t4 p12 d8 b2 a64", "t4 p12 d8 b2 a112", "t4 p12 d8 b2 a128", "t4 p12 d8 b4 a64", "t8 p12 d4 b2 a64"]


def bloom_x(r):
    return f"t{r['tp']} p{r['pp']} d{r['dp']} b{r['micro_batch']} a{r['heads']}"


def kor22_table4_values(r):
    """One row is both series: the layer's forward time and its backward time (recomputation included)."""
    x = KOR22_TECHNIQUES.get((r["recompute"], r["sequence_parallel"]))
    return [("Forward", x, r["layer_fwd_ms"]), ("Backward", x, r["layer_bwd_ms"])]


def kor22_table5_series(r):
    if r["recompute"] == "full" and r["sequence_parallel"] == 0:
        return "Full recompute"
    if r["recompute"] == "selective" and r["sequence_parallel"] == 1:
        return "Present work"
    return None


FIGURES = {
    "table1": dict(title="Table 1: weak scaling, GPT 1.7B to 1T on 32 to 3072 GPUs",
                   xlabel="Model size (billions of parameters)", ylabel="Achieved teraFLOP/s per GPU",
                   metric="tflops_per_gpu", series=lambda r: "Table 1", x=table1_x,
                   xorder=list(TABLE1_MODELS.values())),
    "table2": dict(title="Table 2: PTD-P vs ZeRO-3 without model parallelism, fixed global batch",
                   xlabel="Number of GPUs", ylabel="Achieved teraFLOP/s per GPU", metric="tflops_per_gpu",
                   series=lambda r: zero3_series(r), x=table2_x,
                   xorder=["384", "560", "640", "768", "1120", "1536", "2240"]),
    "fig10": dict(title="Figure 10: throughput per GPU of PTD-P and ZeRO-3, GPT 175B and 530B",
                  xlabel="Number of GPUs", ylabel="Achieved teraFLOP/s per GPU", metric="tflops_per_gpu",
                  series=lambda r: zero3_series(r), x=fig10_x, xorder=["384", "560", "768", "1120", "1536", "2240"]),
    "fig6": dict(title="Figure 6: pipeline bubble (n-d)/b' vs data-parallel size",
                 xlabel="Data-parallel size (d)", ylabel="Pipeline bubble size", metric="bubble_fraction",
                 series=lambda r: f"n={r['gpus']}, b'={r['global_batch']}", x=lambda r: str(r["dp"]),
                 xorder=["1", "2", "4", "8", "16", "32", "64"], log2x=True),
    "fig7": dict(title="Figure 7: throughput vs microbatch size, 1B model on one GPU",
                 xlabel="Microbatch size", ylabel="Achieved teraFLOP/s per GPU", metric="tflops_per_gpu",
                 series=lambda r: SINGLE_SERIES, x=lambda r: str(r["micro_batch"]),
                 xorder=["1", "2", "4", "8", "16"]),
    "fig8": dict(title="Figure 8: throughput estimated by Eq. (1), (p, t) = (8, 8)",
                 xlabel="Microbatch size", ylabel="Normalized throughput", metric="normalized_throughput",
                 series=batch_series, x=lambda r: str(r["micro_batch"]), xorder=["1", "2", "4", "8", "16"]),
    "fig11": dict(title="Figure 11: weak scaling of the pipeline (t = 8, l = 3p)",
                  xlabel="Pipeline-parallel size (GPUs = 8p)", ylabel="Achieved teraFLOP/s per GPU",
                  metric="tflops_per_gpu", series=batch_series, x=lambda r: str(r["pp"]),
                  xorder=["1", "2", "4", "8"]),
    "fig12": dict(title="Figure 12: interleaved vs non-interleaved, GPT-3 175B on 96 GPUs",
                  xlabel="Batch size", ylabel="Achieved teraFLOP/s per GPU", metric="tflops_per_gpu",
                  series=lambda r: "Interleaved" if r["schedule"] == "interleaved" else "Non-interleaved",
                  x=lambda r: str(r["global_batch"]), xorder=["12", "24", "36", "48", "60"]),
    "fig13": dict(title="Figure 13: tensor vs pipeline parallelism, 162B model on 64 GPUs",
                  xlabel="(Pipeline-parallel size, Tensor-parallel size)", ylabel="Achieved teraFLOP/s per GPU",
                  metric="tflops_per_gpu", series=batch_series, x=lambda r: f"({r['pp']}, {r['tp']})",
                  xorder=["(2, 32)", "(4, 16)", "(8, 8)", "(16, 4)", "(32, 2)"]),
    "fig14": dict(title="Figure 14: pipeline vs data parallelism, 5.9B model on 64 GPUs",
                  xlabel="(Pipeline-parallel size, Data-parallel size)", ylabel="Achieved teraFLOP/s per GPU",
                  metric="tflops_per_gpu", series=batch_series, x=lambda r: f"({r['pp']}, {r['dp']})",
                  xorder=["(2, 32)", "(4, 16)", "(8, 8)", "(16, 4)", "(32, 2)"]),
    "fig15": dict(title="Figure 15: tensor vs data parallelism, 5.9B model on 64 GPUs",
                  xlabel="(Tensor-parallel size, Data-parallel size)", ylabel="Achieved teraFLOP/s per GPU",
                  metric="tflops_per_gpu", series=batch_series, x=lambda r: f"({r['tp']}, {r['dp']})",
                  xorder=["(2, 32)", "(4, 16)", "(8, 8)", "(16, 4)", "(32, 2)"]),
    "fig16": dict(title="Figure 16: microbatch size, 91B model, (t, p) = (8, 8)",
                  xlabel="Microbatch size", ylabel="Achieved teraFLOP/s per GPU", metric="tflops_per_gpu",
                  series=batch_series, x=lambda r: str(r["micro_batch"]), xorder=["1", "2", "4", "8"]),
    "fig17": dict(title="Figure 17: activation recomputation, 145B model on 128 GPUs",
                  xlabel="Batch size", ylabel="Throughput (sequences/second)", metric="seq_per_s",
                  series=lambda r: "W/o act. recomputation" if r["recompute"] == "none" else "Act. recomputation",
                  x=lambda r: str(r["global_batch"]),
                  xorder=["1", "2", "4", "8", "16", "32", "64", "128", "256"], log2x=True),
    "fig18": dict(title="Figure 18: scatter/gather optimisation, GPT-3 175B on 96 GPUs",
                  xlabel="Batch size", ylabel="Achieved teraFLOP/s per GPU", metric="tflops_per_gpu",
                  series=lambda r: "Scatter/gather optimization" if r["scatter_gather"] == 1 else "Unoptimized",
                  x=lambda r: str(r["global_batch"]), xorder=["12", "24", "36", "48", "60"]),
    "kor22-table4": dict(title="Korthikanti et al. 2022 (arXiv 2205.05198), Table 4: one layer of their 22B GPT, "
                               "forward and backward time per technique (t = 8)",
                         xlabel="Technique", ylabel="Time of one layer (ms)", metric="layer_fwd_ms",
                         values=kor22_table4_values, xorder=list(KOR22_TECHNIQUES.values()), kind="bars",
                         width=9.6),
    "kor22-table5": dict(title="Korthikanti et al. 2022 (arXiv 2205.05198), Table 5: iteration time, full "
                               "recompute vs present work (selective recompute + sequence parallelism)",
                         xlabel="Model", ylabel="Iteration time (s)", metric="iter_time_ms", scale=1e-3,
                         series=kor22_table5_series, x=kor22_table5_x,
                         xorder=KOR22_XORDER, kind="bars", logy=True,
                         speedup=("Full recompute", "Present work")),
    "mcore-h100": dict(title="Megatron-LM README, H100 weak scaling (Megatron-Core r0.8.0): GPT 1.7B to 462B "
                             "on 48 to 6144 H100s",
                       xlabel="Model size (parameters)", ylabel="Model teraFLOP/s per GPU",
                       metric="model_tflops_per_gpu", series=lambda r: "Megatron-Core r0.8.0",
                       x=lambda r: MCORE_MODELS.get(r["hidden"]), xorder=list(MCORE_MODELS.values()),
                       published="Megatron-LM README"),
    "bloom-176b": dict(title="BLOOM-176B on Jean Zay (Megatron-DeepSpeed, bf16): iteration time of five layouts "
                             "of 384 A100s",
                       xlabel="Layout (t, p, d, micro-batch, heads)", ylabel="Iteration time (s)",
                       metric="iter_time_ms", scale=1e-3, series=lambda r: "Megatron-DeepSpeed",
                       x=bloom_x, xorder=BLOOM_LAYOUTS, kind="bars", width=9.6,
                       published="BigScience"),
}


def read_paper(paper_dir, names=()):
    """(artefact, series, x) -> the paper's value; and (artefact, series, x) -> its days for 300B tokens
    (Table 2's column; for Table 1, Eq. (4) with its throughput). The artefacts of OWN_PAPER_FILE among
    `names` are read from their own file, PAPER/NAME.csv, whose rows must all be of that artefact."""
    out, days = {}, {}
    for name in names:
        if name not in OWN_PAPER_FILE:
            continue
        path = os.path.join(paper_dir, f"{name}.csv")
        for r in read_csv(path, ["figure", "series", "x", "value"], floats=["value"]):
            if r["figure"] != name:
                raise InputError(f"{path}:{r['_line']}: column 'figure': '{r['figure']}' is not {name}")
            if r["value"] is None:
                raise InputError(f"{path}:{r['_line']}: column 'value' is empty")
            if r["x"] not in FIGURES[name]["xorder"]:
                raise InputError(f"{path}:{r['_line']}: column 'x': '{r['x']}' is not one of "
                                 f"{', '.join(FIGURES[name]['xorder'])}")
            out[(name, r["series"], r["x"])] = r["value"]
    figs = read_csv(os.path.join(paper_dir, "figures.csv"), ["figure", "series", "x", "value"], floats=["value"])
    for r in figs:
        if r["value"] is None:
            raise InputError(f"{os.path.join(paper_dir, 'figures.csv')}:{r['_line']}: column 'value' is empty")
        out[(r["figure"], r["series"], r["x"])] = r["value"]
    t1 = read_csv(os.path.join(paper_dir, "table1.csv"), ["params_b", "gpus", "tflops_per_gpu"],
                  ints=["gpus"], floats=["tflops_per_gpu"])
    for r in t1:
        out[("table1", "Table 1", r["params_b"])] = r["tflops_per_gpu"]
        days[("table1", "Table 1", r["params_b"])] = days_eq4(float(r["params_b"]) * 1e9, r["gpus"], r["tflops_per_gpu"])
    t2 = read_csv(os.path.join(paper_dir, "table2.csv"), ["scheme", "params_b", "gpus", "tflops_per_gpu",
                                                           "days_300b_tokens"],
                  ints=["gpus"], floats=["params_b", "tflops_per_gpu", "days_300b_tokens"])
    for r in t2:
        series = f"{r['scheme']}, {'175B' if r['params_b'] < 300 else '530B'}"
        out[("table2", series, str(r["gpus"]))] = r["tflops_per_gpu"]
        days[("table2", series, str(r["gpus"]))] = r["days_300b_tokens"]
    return out, days


def row_values(spec, r):
    """[(series, x, value)] of one row: the spec's own `values`, else its series, x and metric (times its scale)."""
    if "values" in spec:
        return spec["values"](r)
    metric = "seq_per_s" if spec["metric"] == "normalized_throughput" else spec["metric"]
    v = r[metric]
    return [(spec["series"](r), spec["x"](r), None if v is None else v * spec.get("scale", 1.0))]


def points(rows, fig, want):
    """{series: {x: value}} of the rows `want` selects (the last row of a configuration wins)."""
    spec = FIGURES[fig]
    out = {}
    for r in rows:
        if not want(r):
            continue
        for series, x, v in row_values(spec, r):
            if x is None or series is None or v is None:
                continue
            out.setdefault(series, {})[x] = v
    if spec["metric"] == "normalized_throughput":
        for s, pts in out.items():
            base = pts.get("1")
            out[s] = {x: v / base for x, v in pts.items()} if base else {}
    return out


def is_small(r):
    return r["model"].endswith("-small")


def legend_label(series, source):
    return source if series == SINGLE_SERIES else f"{series} ({source})"


def plot_panel(ax, spec, ours, paper, colours, our_label, paper_label=True, scale=1.0, published="paper"):
    xorder = spec["xorder"]
    pos = {x: i for i, x in enumerate(xorder)}
    names = list(dict.fromkeys(list(paper.keys()) + list(ours.keys())))
    for i, s in enumerate(names):
        c = colours[i % len(colours)]
        if s in ours:
            xs = sorted((pos[x] for x in ours[s] if x in pos))
            ys = [ours[s][xorder[k]] * scale for k in xs]
            ax.plot(xs, ys, "-", color=c, marker=".", markersize=5, linewidth=1.6, label=legend_label(s, our_label))
        if paper_label and s in paper:
            xs = sorted((pos[x] for x in paper[s] if x in pos))
            ys = [paper[s][xorder[k]] for k in xs]
            ax.plot(xs, ys, linestyle="none", marker="o", markersize=7, markerfacecolor="none", markeredgewidth=1.5,
                    color=c, label=legend_label(s, published))
    ax.set_xticks(range(len(xorder)))
    ax.set_xticklabels(xorder, rotation=30 if len(xorder[0]) > 3 else 0)
    ax.grid(True, alpha=0.3)


def days_points(rows, fig, want):
    """{series: {x: days for 300B tokens by Eq. (4)}} of the rows `want` selects (Tables 1 and 2)."""
    spec = FIGURES[fig]
    out = {}
    for r in rows:
        if not want(r) or r["tflops_per_gpu"] is None or not r["params"] or not r["gpus"]:
            continue
        x, series = spec["x"](r), spec["series"](r)
        if x is None or series is None:
            continue
        out.setdefault(series, {})[x] = days_eq4(r["params"], r["gpus"], r["tflops_per_gpu"])
    return out


def draw_days(ax, spec, ours, paper_days, colours):
    """Bars: the days to train on 300B tokens, ours (Eq. 4) beside the paper's."""
    draw_bars(ax, spec, ours, paper_days, colours, "ours", values=False)
    xorder = spec["xorder"]
    ax.set_xticklabels(xorder, rotation=30 if len(xorder[0]) > 3 else 0)
    ax.set_xlabel(spec["xlabel"])
    ax.set_ylabel("Training time for 300B tokens (days), Eq. (4)")
    ax.set_title("days for 300B tokens: ours (Eq. 4) vs paper", fontsize=10)
    ax.legend(fontsize=6, loc="best")


def bar_text(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def draw_bars(ax, spec, ours, paper, colours, our_label, published="paper", values=True):
    """Grouped bars per x: every series ours (solid) beside the published (hatched), values written on top
    (unless not `values`)."""
    xorder = spec["xorder"]
    names = list(dict.fromkeys(list(paper.keys()) + list(ours.keys())))
    width = 0.84 / max(2 * len(names), 1)
    k = 0
    for i, s in enumerate(names):
        c = colours[i % len(colours)]
        for source, pts, style in ((our_label, ours.get(s, {}), dict(alpha=0.9)),
                                   (published, paper.get(s, {}), dict(alpha=0.35, hatch="//", edgecolor=c))):
            xs = [j for j, x in enumerate(xorder) if x in pts]
            if xs:
                bars = ax.bar([j - 0.42 + (k + 0.5) * width for j in xs], [pts[xorder[j]] for j in xs], width,
                              color=c, label=legend_label(s, source), **style)
                if values:
                    ax.bar_label(bars, labels=[bar_text(pts[xorder[j]]) for j in xs], fontsize=6.5, padding=1.5)
            k += 1
    ax.set_xticks(range(len(xorder)))
    ax.set_xticklabels([x.replace(" ", "\n", 1) if len(x) > 12 else x for x in xorder])
    ax.grid(True, axis="y", alpha=0.3)


def draw_speedup(ax, spec, ours, paper, our_label, published="paper"):
    """Bars per x: the first series' value over the second's (spec['speedup']), ours beside the published."""
    slow, fast = spec["speedup"]
    xorder = spec["xorder"]
    for k, (source, pts, style) in enumerate(((our_label, ours, dict(color="tab:blue", alpha=0.9)),
                                              (published, paper, dict(color="tab:blue", alpha=0.35, hatch="//",
                                                                      edgecolor="tab:blue")))):
        a, b = pts.get(slow, {}), pts.get(fast, {})
        xs = [j for j, x in enumerate(xorder) if a.get(x) and b.get(x)]
        if xs:
            vals = [a[xorder[j]] / b[xorder[j]] for j in xs]
            bars = ax.bar([j - 0.2 + 0.4 * k for j in xs], vals, 0.4, label=source, **style)
            ax.bar_label(bars, labels=[f"{v:.2f}x" for v in vals], fontsize=7, padding=1.5)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(xorder)))
    ax.set_xticklabels(xorder)
    ax.set_xlabel(spec["xlabel"])
    ax.set_ylabel(f"Speed-up: {slow} time / {fast} time")
    ax.set_title(f"speed-up of {fast.lower()} over {slow.lower()}", fontsize=10)
    ax.set_ylim(bottom=0, top=max([1.6] + [p.get_height() * 1.15 for p in ax.patches]))
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")


def draw(fig_name, rows, paper, out_dir, hardware, paper_days=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = FIGURES[fig_name]
    backend = "analytic" if fig_name == "fig6" else hardware
    simulated = lambda r: r["mode"] == "simulate" and r["backend"] == backend and not is_small(r)
    sim = points(rows, fig_name, simulated)
    run = points(rows, fig_name, lambda r: r["mode"] == "run")
    paper_pts, paper_day_pts = {}, {}
    for (f, s, x), v in paper.items():
        if f == fig_name:
            paper_pts.setdefault(s, {})[x] = v
    for (f, s, x), v in (paper_days or {}).items():
        if f == fig_name:
            paper_day_pts.setdefault(s, {})[x] = v
    with_days = fig_name in ("table1", "table2")
    with_speedup = "speedup" in spec
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    panels = 1 + (1 if run else 0) + (1 if with_days else 0) + (1 if with_speedup else 0)
    width = spec.get("width", 6.4)
    fig, axes = plt.subplots(1, panels, figsize=(width + 6.4 * (panels - 1), 4.6), squeeze=False)
    ax = axes[0][0]
    label = "ours, analytic" if fig_name == "fig6" else f"ours, simulated {hardware}"
    published = spec.get("published", "paper")
    if spec.get("kind") == "bars":
        draw_bars(ax, spec, sim, paper_pts, colours, label, published)
    else:
        plot_panel(ax, spec, sim, paper_pts, colours, label, published=published)
    ax.set_xlabel(spec["xlabel"])
    ax.set_ylabel(spec["ylabel"])
    ax.set_title("the paper's formula vs published" if fig_name == "fig6" else "paper scale: simulated vs published",
                 fontsize=10)
    if spec.get("logy"):
        ax.set_yscale("log")
        top = max([v for pts in list(sim.values()) + list(paper_pts.values()) for v in pts.values()], default=1.0)
        ax.set_ylim(top=top * 3)  # room for the values written on the bars
    else:
        ax.set_ylim(bottom=0)
        if spec.get("kind") == "bars":
            ax.set_ylim(top=ax.get_ylim()[1] * 1.08)
    ax.legend(fontsize=7, loc="upper left" if spec.get("kind") == "bars" else "best")
    if with_speedup:
        draw_speedup(axes[0][1], spec, sim, paper_pts, label, published)
    if with_days:
        ours_days = days_points(rows, fig_name, simulated)
        draw_days(axes[0][1], spec, ours_days, paper_day_pts, colours)
        for s, pts in ours_days.items():
            cells = []
            for x in spec["xorder"]:
                if x in pts:
                    p = paper_day_pts.get(s, {}).get(x)
                    cells.append(f"{x}: {pts[x]:.1f}" + (f" (paper {p:.0f})" if p is not None else ""))
            print(f"  {fig_name}: {s}: days for 300B tokens by Eq. (4): " + ", ".join(cells), file=sys.stderr)
    if run:
        ax2 = axes[0][panels - 1]
        metric = spec["metric"]
        top = max((v for s in run.values() for v in s.values()), default=0)
        scale, unit = 1.0, spec["ylabel"]
        if metric == "tflops_per_gpu":
            scale, unit = (1e6, "Achieved megaFLOP/s per CPU rank") if top < 1e-3 else (1e3, "Achieved gigaFLOP/s per CPU rank")
        elif metric == "seq_per_s":
            unit = "Throughput (sequences/second), CPU"
        plot_panel(ax2, spec, run, {}, colours, "measured, CPU ranks", paper_label=False, scale=scale)
        ax2.set_xlabel(spec["xlabel"] + " [small models]")
        ax2.set_ylabel(unit)
        # The small models on CPU threads keep the layouts, not the paper's compute-to-communication
        # ratios: the panel shows that the runs work, and its trends are not expected to match the paper's.
        ax2.set_title("small scale: measured on CPU ranks (threads);\ntrends not expected to match the paper",
                      fontsize=9)
        ax2.set_ylim(bottom=0)
        ax2.legend(fontsize=7, loc="best")
    # A title longer than the figure is wide goes on two lines (about 12 characters an inch at 11 points).
    fig.suptitle(textwrap.fill(spec["title"], width=int(fig.get_figwidth() * 12)), fontsize=11)
    fig.tight_layout()
    path = os.path.join(out_dir, f"{fig_name}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    errors = []
    for s, pts in sim.items():
        for x, v in pts.items():
            p = paper.get((fig_name, s, x))
            if p is None or p == 0 or (spec.get("metric") == "normalized_throughput" and x == "1"):
                continue
            errors.append((s, x, v, p, 100.0 * (v - p) / p))
    missing = [(s, x) for s, pts in paper_pts.items() for x in pts if x not in sim.get(s, {})]
    return path, errors, missing


def draw_summary(all_errors, out_dir, hardware_of):
    """One column per artefact: the error of each point and their mean absolute error. `hardware_of`:
    artefact -> the profile its simulated rows came from."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # llama compares with another paper's single figure, so it is left out.
    names = [n for n in ARTEFACTS if all_errors.get(n) and n != "llama"]
    fig, ax = plt.subplots(figsize=(13, 5.2))
    for i, n in enumerate(names):
        errs = [e[4] for e in all_errors[n]]
        k = len(errs)
        xs = [i + (j - (k - 1) / 2) * (0.6 / max(k, 1)) for j in range(k)]
        ax.scatter(xs, errs, s=14, color="tab:blue", zorder=3,
                   label="one point (ours vs published)" if i == 0 else None)
        mape = sum(abs(e) for e in errs) / k
        ax.plot([i - 0.35, i + 0.35], [mape, mape], color="tab:red", linewidth=2,
                label="mean absolute error" if i == 0 else None)
        ax.annotate(f"{mape:.1f}%", (i, 1.0), xycoords=("data", "axes fraction"), xytext=(0, 3),
                    textcoords="offset points", ha="center", va="bottom", fontsize=8, color="tab:red")
    # The SC'21 paper's artefacts, then the later publications' (OWN_PAPER_FILE), split by a line.
    later = [i for i, n in enumerate(names) if n in OWN_PAPER_FILE]
    if later and later[0] > 0:
        ax.axvline(later[0] - 0.5, color="grey", linewidth=1.0)
        ax.annotate("Narayanan et al. 2021 (SC'21)", (later[0] - 0.6, 0.03), xycoords=("data", "axes fraction"),
                    ha="right", fontsize=8, color="dimgrey")
        ax.annotate("Korthikanti et al. 2022; Megatron-Core H100", (later[0] - 0.4, 0.03),
                    xycoords=("data", "axes fraction"), ha="left", fontsize=8, color="dimgrey")
    ax.axhline(0, color="black", linewidth=0.8)
    for y in (-10, 10):
        ax.axhline(y, color="grey", linewidth=0.6, linestyle="--")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right")
    ax.set_xlabel("Published artefact")
    ax.set_ylabel("Error against the published value (%)")
    total = [abs(e[4]) for n in names for e in all_errors[n]]
    by_hw = {}
    for n in names:
        by_hw.setdefault("analytic" if n == "fig6" else hardware_of[n], []).append(n)
    main_hw = max((h for h in by_hw if h != "analytic"), key=lambda h: len(by_hw[h]), default=None)
    parts = [f"simulated on {main_hw}"] if main_hw else []
    parts += [f"{', '.join(ns)} on {h}" for h, ns in by_hw.items() if h not in (main_hw, "analytic")]
    parts += ["fig6 analytic"] if "analytic" in by_hw else []
    where = "; ".join(parts)
    ax.set_title(f"Ours ({where}) vs published, every point: mean absolute error "
                 f"{sum(total) / max(len(total), 1):.1f}% over {len(total)} points", fontsize=10, pad=16)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    path = os.path.join(out_dir, "summary.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# experiments/specs/llama.toml: token budgets, GPUs and the LLaMA paper's 65B throughput.
LLAMA_MODELS = ["llama-7b", "llama-13b", "llama-33b", "llama-65b"]
LLAMA_TOKENS = {"llama-7b": 1.0e12, "llama-13b": 1.0e12, "llama-33b": 1.4e12, "llama-65b": 1.4e12}
LLAMA_GPUS = 2048
LLAMA_PAPER = ("llama-65b", 380.0)


def read_llama(path):
    return read_csv(path, RESULT_COLUMNS + ["tokens_per_s", "model_tflops_per_gpu"], INT_COLUMNS,
                    FLOAT_COLUMNS + ["tokens_per_s", "model_tflops_per_gpu"])


def draw_llama(rows, out_dir, hardware):
    """Two panels: tokens/s per GPU and days on the token budget, per model, the paper's 65B marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_model = {r["model"]: r for r in rows if r["mode"] == "simulate" and r["backend"] == hardware}
    models = [m for m in LLAMA_MODELS if m in by_model]
    tok = [by_model[m]["tokens_per_s"] / by_model[m]["gpus"] for m in models]
    days = [LLAMA_TOKENS[m] / (t * LLAMA_GPUS) / 86400.0 for m, t in zip(models, tok)]
    fig, axes = plt.subplots(1, 2, figsize=(12.8, 4.6))
    xs = range(len(models))
    labels = [f"{m.replace('llama-', '').upper()}\nt={by_model[m]['tp']} p={by_model[m]['pp']} v={by_model[m]['vpp']} "
              f"b={by_model[m]['micro_batch']}\nrecompute {by_model[m]['recompute']}" for m in models]
    for ax, vals, unit in ((axes[0], tok, "tokens/s per GPU"), (axes[1], days, "days to train")):
        ax.bar(xs, vals, color="tab:blue", label=f"ours, planner on {hardware}")
        for i, (m, v) in enumerate(zip(models, vals)):
            r = by_model[m]
            ax.annotate(f"{v:.0f}" if unit.startswith("tokens") else f"{v:.1f}", (i, v), ha="center", va="bottom",
                        fontsize=8)
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels)
        ax.set_xlabel("LLaMA model and the planner's layout")
        ax.set_ylabel(unit)
        ax.grid(True, axis="y", alpha=0.3)
    m, ptok = LLAMA_PAPER
    if m in models:
        i = models.index(m)
        axes[0].scatter([i], [ptok], marker="*", s=120, color="tab:red", zorder=3, label="LLaMA paper (65B)")
        axes[1].scatter([i], [LLAMA_TOKENS[m] / (ptok * LLAMA_GPUS) / 86400.0], marker="*", s=120,
                        color="tab:red", zorder=3, label="LLaMA paper (65B)")
    axes[0].set_title("throughput (4M-token batch, bf16)", fontsize=10)
    axes[1].set_title("days: 1.0T tokens (7B, 13B), 1.4T (33B, 65B)", fontsize=10)
    for ax in axes:
        ax.legend(fontsize=7, loc="best")
    fig.suptitle(f"LLaMA on {LLAMA_GPUS} A100-80GB: the planner's PTD-P layouts vs the paper's 65B figure",
                 fontsize=11)
    fig.tight_layout()
    path = os.path.join(out_dir, "llama.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    errors = []
    if m in models:
        v = tok[models.index(m)]
        errors.append(("tokens/s/GPU", m, v, ptok, 100.0 * (v - ptok) / ptok))
    return path, errors, []


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help=f"artefacts (default: all: {' '.join(ARTEFACTS)})")
    ap.add_argument("--results", default=os.path.join(repo.ROOT, "results"), help="directory of NAME.csv")
    ap.add_argument("--paper", default=os.path.join(repo.ROOT, "results", "paper"), help="the paper's CSVs")
    ap.add_argument("--out", default=os.path.join(repo.ROOT, "plots"), help="where the PNGs go")
    ap.add_argument("--hardware", default=None,
                    help=f"profile of the simulated rows to plot, for every artefact (default: {DEFAULT_HARDWARE}; "
                         + ", ".join(f"{n}: {h}" for n, h in ARTEFACT_HARDWARE.items()) + ")")
    a = ap.parse_args(argv)
    names = a.names or ARTEFACTS
    for n in names:
        if n not in FIGURES and n != "llama":
            print(f"plots: error: '{n}' is not an artefact ({', '.join(ARTEFACTS)})", file=sys.stderr)
            return 2
    hardware_of = {n: a.hardware or ARTEFACT_HARDWARE.get(n, DEFAULT_HARDWARE) for n in names}
    try:  # every input is read and checked before anything is drawn
        paper, paper_days = read_paper(a.paper, names)
        data = {}
        for n in names:
            path = os.path.join(a.results, f"{n}.csv")
            ints, floats = EXTRA_COLUMNS.get(n, ([], []))
            data[n] = read_llama(path) if n == "llama" else \
                read_csv(path, RESULT_COLUMNS + ints + floats, INT_COLUMNS + ints, FLOAT_COLUMNS + floats)
    except InputError as e:
        print(f"plots: error: {e}", file=sys.stderr)
        return 2
    if not os.path.isdir(a.out):
        print(f"plots: error: {a.out}: no such directory", file=sys.stderr)
        return 2
    try:  # the drawing functions import it where they draw
        import matplotlib  # noqa: F401
    except ImportError as e:
        print(f"plots: error: drawing needs matplotlib ({e}): apt-get install python3-matplotlib "
              "(scripts/setup_packages.sh) or pip install matplotlib", file=sys.stderr)
        return 2
    all_errors = {}
    print("| artefact | points | mean abs. error | largest error (point) |")
    print("|---|---|---|---|")
    for n in names:
        if n == "llama":
            path, errors, missing = draw_llama(data[n], a.out, hardware_of[n])
        else:
            path, errors, missing = draw(n, data[n], paper, a.out, hardware_of[n], paper_days)
        all_errors[n] = errors
        if errors:
            worst = max(errors, key=lambda e: abs(e[4]))
            mape = sum(abs(e[4]) for e in errors) / len(errors)
            print(f"| {n} | {len(errors)} | {mape:.1f}% | {worst[4]:+.1f}% ({worst[0]}, {worst[1]}) |")
        else:
            print(f"| {n} | 0 | - | - |")
        if missing:
            print(f"  {n}: no simulated value for {len(missing)} paper point(s): "
                  + "; ".join(f"{s}, {x}" for s, x in missing), file=sys.stderr)
        print(f"  wrote {path}", file=sys.stderr)
    if len(names) > 1:
        print(f"  wrote {draw_summary(all_errors, a.out, hardware_of)}", file=sys.stderr)
    return 0

