"""Google Benchmark JSON -> CSV, one row per benchmark run (Google Benchmark's own CSV reporter is
deprecated and its header breaks when benchmarks have different counters).

    scripts/gbench_to_csv.py results/microbench/bench_gemm.json [more.json ...]
    scripts/gbench_to_csv.py results/microbench/bench_gemm.json -o out.csv

Each input FILE.json becomes FILE.csv beside it (or -o OUT with a single input). Columns:
suite, benchmark (the full name), family (the BM_ function), params (the rest of the name, without
Google Benchmark's own min_time/real_time/... suffixes), run_type, aggregate_name, repetitions,
repetition_index, threads, iterations, real_time, cpu_time, time_unit, then every counter found in
the file (in first-seen order; empty where a benchmark lacks it), error_message, and the
provenance from the JSON context: git_sha, host, device, date, executable, num_cpus, mhz_per_cpu,
library_build_type. Writes atomically; a missing or malformed input is one error line, exit code 2.
Standard library only.
"""
import argparse
import csv
import io
import json
import os
import re
import sys

from ptdp_tools import atomic

# Keys of a benchmark entry that are not user counters.
KNOWN = {
    "name", "family_index", "per_family_instance_index", "run_name", "run_type", "repetitions",
    "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit",
    "aggregate_name", "aggregate_unit", "label", "error_occurred", "error_message", "big_o",
    "rms", "complexity",
}
# Name segments Google Benchmark appends itself.
OWN_SUFFIX = re.compile(r"^(min_time|min_warmup_time|iterations|repeats|threads|manual_time|real_time|process_time)(:.*)?$")

FIXED = ["suite", "benchmark", "family", "params", "run_type", "aggregate_name", "repetitions",
         "repetition_index", "threads", "iterations", "real_time", "cpu_time", "time_unit"]
PROVENANCE = ["error_message", "git_sha", "host", "device", "date", "executable", "num_cpus",
              "mhz_per_cpu", "library_build_type"]


class InputError(Exception):
    pass


def split_name(run_name):
    parts = run_name.split("/")
    params = [p for p in parts[1:] if not OWN_SUFFIX.match(p)]
    return parts[0], "/".join(params)


def fmt(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return repr(v) if v == v else ""
    return "" if v is None else str(v)


def convert(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot be read: {e.strerror}")
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}: not JSON: {e.msg}")
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list) or not isinstance(doc.get("context"), dict):
        raise InputError(f"{path}: not Google Benchmark JSON (expected 'context' and 'benchmarks')")
    ctx = doc["context"]
    suite = ctx.get("suite") or os.path.basename(str(ctx.get("executable", ""))) or os.path.splitext(os.path.basename(path))[0]
    counters = []
    for b in doc["benchmarks"]:
        for k in b:
            if k not in KNOWN and k not in counters:
                counters.append(k)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(FIXED + counters + PROVENANCE)
    for i, b in enumerate(doc["benchmarks"]):
        if "name" not in b:
            raise InputError(f"{path}: benchmark #{i + 1} has no name")
        family, params = split_name(b.get("run_name", b["name"]))
        row = [suite, b["name"], family, params] + [fmt(b.get(k)) for k in FIXED[4:]]
        row += [fmt(b.get(c)) for c in counters]
        row += [fmt(b.get("error_message")), fmt(ctx.get("git_sha")), fmt(ctx.get("host", ctx.get("host_name"))),
                fmt(ctx.get("device")), fmt(ctx.get("date")), fmt(ctx.get("executable")), fmt(ctx.get("num_cpus")),
                fmt(ctx.get("mhz_per_cpu")), fmt(ctx.get("library_build_type"))]
        w.writerow(row)
    return out.getvalue(), len(doc["benchmarks"])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+", metavar="FILE.json")
    p.add_argument("-o", "--output", help="output CSV (only with a single input)")
    a = p.parse_args(argv)
    if a.output and len(a.inputs) != 1:
        print("gbench_to_csv: error: -o/--output takes a single input file", file=sys.stderr)
        return 2
    try:
        done = []
        for path in a.inputs:
            out = a.output or os.path.splitext(path)[0] + ".csv"
            if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
                raise InputError(f"-o {out}: the directory does not exist")
            text, n = convert(path)
            done.append((out, text, n))
        for out, text, n in done:  # every input is read before anything is written
            atomic.write(out, text)
            print(f"gbench_to_csv: {out} ({n} rows)")
    except InputError as e:
        print(f"gbench_to_csv: error: {e}", file=sys.stderr)
        return 2
    return 0
