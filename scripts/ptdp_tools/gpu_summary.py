"""Summarises a GPU session (scripts/gpu_session.sh) into its output folder.

    gpu_summary.py WORKDIR OUTDIR [--dry-run 0|1]

WORKDIR holds what the stages wrote: stages.csv, probe.txt, logs/NAME.log and raw/ (gtest JSON,
compare_pytorch CSVs, fig7/, op_profile_*.csv, Google Benchmark JSON, accept.json, ncu.csv).
Writes into OUTDIR, each atomically: summary.csv (one row per stage, then the headline numbers:
tests passed and failed, sanitizer errors, loss agreement, tokens/s, MFU and the ptdp/PyTorch
ratios, Figure 7's TFLOP/s and peak memory per b, the top ops and kernels by GPU time, the GEMM
peak and copy bandwidth), compare_pytorch.csv, fig7.csv, op_profile.csv and microbench.csv, and
prints the summary as a table. Standard library only (it runs on the bare GPU machine too).
"""
from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import os
import re
import sys

from ptdp_tools import atomic, gbench_to_csv, repo, tables

COLUMNS = ["section", "item", "value", "unit", "status", "note", "git_sha", "host", "gpu", "driver", "cuda",
           "dry_run"]


def read_csv(path: str) -> list:
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except (OSError, csv.Error):
        return []


def probe_fields(work: str) -> dict:
    out = {"git_sha": "", "host": "", "gpu": "", "driver": "", "cuda": ""}
    try:
        lines = open(os.path.join(work, "probe.txt")).read().splitlines()
    except OSError:
        return out
    for line in lines:
        key, _, val = line.partition(": ")
        if key == "host":
            out["host"] = val
        elif key == "gpu":
            parts = [p.strip() for p in val.split(",")]
            out["gpu"] = parts[0]
            if len(parts) > 2:
                out["driver"] = parts[2]
        elif key == "cuda_driver":
            out["cuda"] = val
        elif line.startswith("bundle git_sha="):
            out["git_sha"] = line.split("=", 1)[1]
    if not out["git_sha"]:
        out["git_sha"] = repo.git_sha()
    return out


def nccl_rows(work: str) -> list:
    """Every NCCL the probe found, with its version, and the one the nccl stages used (how it got
    there: the machine's, a wheel's, or brought with --nccl)."""
    try:
        lines = open(os.path.join(work, "probe.txt")).read().splitlines()
    except OSError:
        return []
    fields = [line.partition(": ") for line in lines]
    brought = next((val.partition(" ")[0] for key, _, val in fields if key == "nccl_brought"), None)
    rows = []
    for key, _, val in fields:
        if key == "nccl found" and val != "none":
            version, _, path = val.partition(" ")
            rows.append({"section": "nccl", "item": "found", "value": version, "unit": "version", "status": "",
                         "note": path})
        elif key == "nccl_multi_rank":
            version, _, path = val.partition(" ")
            used = version[:1].isdigit()
            rows.append({"section": "nccl", "item": "used by the nccl stages", "value": version if used else "",
                         "unit": "version", "status": "ok" if used else "none",
                         "note": ("brought with --nccl (scripts/nccl_for_device.sh): " if used and path == brought
                                  else "") + (path if used else val)})
    return rows


def log_text(work: str, stage: str) -> str:
    try:
        with open(os.path.join(work, "logs", stage + ".log"), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def gtest_rows(work: str, stage: str) -> list:
    """Passed, failed and skipped tests of a GoogleTest stage: from its JSON report, or from its log
    when the stage was stopped before the report was written."""
    passed, failed, skipped, failing = 0, 0, 0, []
    source = "the JSON report"
    try:
        j = json.load(open(os.path.join(work, "raw", stage + ".json")))
        for suite in j.get("testsuites", []):
            for t in suite.get("testsuite", []):
                if t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN":
                    skipped += 1
                elif t.get("failures"):
                    failed += 1
                    failing.append(f"{suite.get('name')}.{t.get('name')}")
                else:
                    passed += 1
    except (OSError, ValueError):
        text = log_text(work, stage)
        if not text:
            return []
        source = "the log (no JSON report: the stage was stopped)"
        skipped = len(re.findall(r"^\[  SKIPPED \] \S+ \(", text, re.M))
        passed = len(re.findall(r"^\[       OK \] ", text, re.M))
        failing = re.findall(r"^\[  FAILED  \] (\S+) \(", text, re.M)
        failed = len(failing)
    status = "ok" if failed == 0 else "failed"
    return [{"section": "tests", "item": f"{stage} passed", "value": passed, "unit": "tests", "status": status,
             "note": f"{skipped} skipped; from {source}"},
            {"section": "tests", "item": f"{stage} failed", "value": failed, "unit": "tests", "status": status,
             "note": " ".join(failing[:20])}]


def sanitizer_rows(work: str, stages: list) -> list:
    out = []
    for s in stages:
        if not s["stage"].startswith("sanitize_") or s["status"] == "skipped":
            continue
        text = log_text(work, s["stage"])
        m = re.findall(r"ERROR SUMMARY: (\d+) error", text)
        h = re.findall(r"RACECHECK SUMMARY: (\d+) hazard", text)
        value = int(h[-1]) if h else (int(m[-1]) if m else "")
        first = next((ln.strip() for ln in text.splitlines() if "=========" in ln and
                      any(w in ln for w in ("Invalid", "Uninitialized", "Race", "hazard", "Barrier", "Error", "error"))), "")
        out.append({"section": "sanitizer", "item": s["stage"], "value": value, "unit": "errors",
                    "status": s["status"], "note": first[:300]})
    return out


def first_error(text: str) -> str:
    """The line of a log that says what went wrong (FAIL, error, Traceback's last line), else its last line."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith("FAIL") or "error" in ln.lower():
            return ln[:300]
    return (lines or [""])[-1][:300]


def loss_rows(work: str) -> list:
    out = []
    for prec, attention in [(p, a) for p in ("f32", "bf16") for a in ("", "flash", "unfused", "cudnn")]:
        text = log_text(work, f"pytorch_loss_{prec}" + (f"_{attention}" if attention else ""))
        if not text:
            continue
        m = re.search(r"max relative loss difference ([0-9.eE+-]+) \(tolerance ([0-9.eE+-]+)", text)
        verdict = "ok" if "PASS:" in text else "failed"
        out.append({"section": "pytorch", "item": f"loss agreement {prec} (attention {attention or 'auto'})",
                    "value": m.group(1) if m else "",
                    "unit": "max rel diff", "status": verdict,
                    "note": f"tolerance {m.group(2)}" if m else first_error(text)})
    return out


def dispatch_rows(work: str) -> list:
    """The host's dispatch time per kernel of an eager PyTorch step, per shape (stage dispatch)."""
    out = []
    for r in read_csv(os.path.join(work, "raw", "dispatch.csv")):
        shape = f"h={r.get('hidden')} a={r.get('heads')} l={r.get('layers')} b={r.get('micro_batch')}"
        out.append({"section": "dispatch", "item": shape, "value": r.get("dispatch_us_per_kernel", ""),
                    "unit": "us per kernel", "status": r.get("status", ""),
                    "note": f"eager {r.get('eager_ms', '')} ms, CUDA graph {r.get('graph_ms', '')} ms, "
                            f"{r.get('kernels', '')} kernels; {r.get('note', '')}"})
    return out


def shape_name(r: dict) -> str:
    """A compare_pytorch row's shape; its sequence length and query groups where they are not the usual."""
    extra = (f" s={r['seq_length']}" if r.get("seq_length") not in (None, "", "2048") else "") + \
        (f" g={r['query_groups']}" if r.get("query_groups") else "")
    return f"{r['arch']} h={r['hidden']} l={r['layers']}{extra}"


def measured(r: dict) -> bool:
    """A compare_pytorch row that measured an implementation (not a ratio, not failed or skipped)."""
    return r.get("status") == "ok" and not r["implementation"].startswith("ratio")


def measured_by_shape(rows: list) -> dict:
    """shape_name -> implementation -> row, for the compare_pytorch rows that measured."""
    shapes = {}
    for r in filter(measured, rows):
        shapes.setdefault(shape_name(r), {})[r["implementation"]] = r
    return shapes


def ptdp_implementations(impls: dict) -> list:
    return sorted(i for i in impls if i == "ptdp" or i.startswith("ptdp-"))


def compare_rows(work: str) -> tuple:
    """The merged compare_pytorch rows, and summary rows with the ptdp / PyTorch ratios."""
    rows = []
    for path in sorted(glob.glob(os.path.join(work, "raw", "compare_*.csv"))):
        rows += read_csv(path)
    out = []
    shapes = measured_by_shape(rows)
    for r in filter(measured, rows):
        out.append({"section": "pytorch", "item": f"{shape_name(r)} {r['implementation']}",
                    "value": r["tokens_per_s"], "unit": "tokens/s", "status": "ok",
                    "note": f"{float(r['model_tflops_per_gpu']):.1f} model TFLOP/s, MFU "
                            f"{float(r['mfu'] or 'nan'):.3f}, peak {r['peak_mem_gb']} GB"})
    for r in rows:
        if r.get("status") in ("failed", "skipped"):
            out.append({"section": "pytorch", "item": f"{shape_name(r)} {r['implementation']}",
                        "value": "", "unit": "tokens/s", "status": r["status"], "note": r.get("note", "")[:300]})
    for shape, impls in shapes.items():
        for mine in ptdp_implementations(impls):
            for other in ("pytorch-eager", "pytorch-compile"):
                if other in impls:
                    ratio = float(impls[mine]["tokens_per_s"]) / float(impls[other]["tokens_per_s"])
                    mem = f"peak {impls[mine]['peak_mem_gb']} / {impls[other]['peak_mem_gb']} GB"
                    out.append({"section": "pytorch", "item": f"{shape} {mine}/{other}", "value": f"{ratio:.3f}",
                                "unit": "ratio of tokens/s", "status": "ok" if ratio >= 1.0 else "below 1.0",
                                "note": f"target >= 1.0; {mem}"})
    return rows, out


# Issue 54's criteria for the attention stages' shapes (scripts/gpu_session.sh): ptdp's fastest
# attention backend against torch.compile, tokens/s at least this ratio, its peak memory no more than
# torch.compile's, and GPT 1.3B's MFU at least 0.50.
SPEED_TARGETS = {"gpt h=2048 l=24": 1.10, "llama h=4096 l=4": 1.20, "llama h=4096 l=4 g=8": 1.0,
                 "llama h=4096 l=4 s=8192 g=8": 1.0}
MFU_TARGETS = {"gpt h=2048 l=24": 0.50}


def criteria_rows(rows: list) -> list:
    """The criteria, per shape that has both ptdp and torch.compile rows: met, or not met with the numbers.
    rows: compare_pytorch rows (shape columns, implementation, status, tokens_per_s, mfu, peak_mem_gb)."""
    shapes = measured_by_shape(rows)
    out = []
    for shape, target in SPEED_TARGETS.items():
        impls = shapes.get(shape, {})
        mine = ptdp_implementations(impls)
        if "pytorch-compile" not in impls or not mine:
            continue
        best = max(mine, key=lambda i: float(impls[i]["tokens_per_s"]))
        ours, theirs = impls[best], impls["pytorch-compile"]
        ratio = float(ours["tokens_per_s"]) / float(theirs["tokens_per_s"])
        out.append({"section": "criteria", "item": f"{shape} {best}/pytorch-compile", "value": f"{ratio:.3f}",
                    "unit": f"x (target {target:.2f})", "status": "met" if ratio >= target else "not met",
                    "note": f"{float(ours['tokens_per_s']):.0f} against {float(theirs['tokens_per_s']):.0f} tokens/s"})
        mem, mem_c = float(ours["peak_mem_gb"]), float(theirs["peak_mem_gb"])
        out.append({"section": "criteria", "item": f"{shape} {best} peak memory", "value": f"{mem:.2f}",
                    "unit": f"GB (target {mem_c:.2f})", "status": "met" if mem <= mem_c else "not met",
                    "note": "at most torch.compile's peak"})
        if shape in MFU_TARGETS and ours.get("mfu"):
            mfu = float(ours["mfu"])
            out.append({"section": "criteria", "item": f"{shape} {best} MFU", "value": f"{mfu:.3f}",
                        "unit": f"(target {MFU_TARGETS[shape]:.2f})",
                        "status": "met" if mfu >= MFU_TARGETS[shape] else "not met", "note": "model FLOPs over the peak"})
    return out


def memory_rows(work: str) -> list:
    """The pipeline layout's first stage (stage memory_pp): rank 0's measured peak against the memory
    model's stage 0 in use (stage memory_pp_model's `ptdp simulate`), within 10% or off by how much."""
    run = read_csv(os.path.join(work, "raw", "memory_pp.csv"))
    m = re.search(r"in use per stage, GB \(without the reserved\): ([0-9.eE+-]+)", log_text(work, "memory_pp_model"))
    if not run or not m or not run[-1].get("peak_mem_gb"):
        return []
    measured, model = float(run[-1]["peak_mem_gb"]), float(m.group(1))
    off = model / measured - 1 if measured > 0 else float("inf")  # the model's error
    return [{"section": "memory", "item": "pipeline stage 0 of 2 (rank 0)", "value": f"{measured:.4g}",
             "unit": "GB", "status": "within 10%" if abs(off) <= 0.10 else f"model off by {off:+.0%}",
             "note": f"model {model:.4g} GB in use (ptdp simulate --stack ptdp, stage 0)"}]


def fig7_rows(work: str) -> tuple:
    # The paper's unfused attention (raw/fig7), and cuDNN's beside it where the probe found it.
    rows = read_csv(os.path.join(work, "raw", "fig7", "fig7.csv"))
    rows += read_csv(os.path.join(work, "raw", "fig7_cudnn", "fig7.csv"))
    out = []
    for r in rows:
        attention = "" if r.get("attention_backend", "unfused") == "unfused" else f" {r['attention_backend']}"
        out.append({"section": "fig7", "item": f"b={r.get('micro_batch')}{attention}", "value": r.get("tflops_per_gpu", ""),
                    "unit": "TFLOP/s", "status": "ok",
                    "note": f"peak_mem_gb {r.get('peak_mem_gb', '')}, iter {r.get('iter_time_ms', '')} ms, "
                            f"{r.get('precision', '')} {r.get('backend', '')}"})
    return rows, out


# Datasheet ceilings (dense bf16 tensor TFLOP/s, HBM GB/s, host link GB/s one way) by GPU name, used
# when the session measured none (accept's 8192^3 GEMM and memory check, bench_copy's pinned copies).
DATASHEET = {"H200": (989.4, 4800.0, 55.0), "H100": (989.4, 3350.0, 55.0)}
LAUNCH_US = 4.0  # a kernel's launch and ramp, per op call (projection only)


def ceilings(work: str, gpu: str) -> dict:
    """Peak bf16 TFLOP/s, HBM GB/s and host-link GB/s: measured in this session where it could, else the
    datasheet's for this GPU (the source of each is returned too)."""
    name = next((k for k in DATASHEET if k in gpu), "H100")
    tf, bw, link = DATASHEET[name]
    src = {"tflops": f"datasheet {name}", "hbm": f"datasheet {name}", "link": f"datasheet {name}"}
    try:
        for c in json.load(open(os.path.join(work, "raw", "accept.json"))).get("checks", []):
            if c["check"] == "gemm" and c.get("value"):
                tf, src["tflops"] = float(c["value"]), "measured: accept gemm 8192^3 bf16"
            if c["check"] == "memory" and c.get("value"):
                bw, src["hbm"] = float(c["value"]), "measured: accept memory (add kernel)"
    except (OSError, ValueError, KeyError):
        pass
    return {"tflops": tf, "hbm": bw, "link": link, "source": src}


def op_profile_rows(work: str, gpu: str) -> tuple:
    """Measured GPU time per op beside its projection on this GPU's roofline: max(FLOPs / peak, bytes /
    bandwidth) + a launch per call; uploads and downloads over the host link."""
    peak = ceilings(work, gpu)
    rows, out = [], []
    for path in sorted(glob.glob(os.path.join(work, "raw", "op_profile_*.csv"))):
        model = os.path.basename(path)[len("op_profile_"):-len(".csv")]
        ops = read_csv(path)
        total = sum(float(o["total_ms"]) for o in ops) or 1.0
        mine = []
        for o in ops:
            gflop, gbyte = float(o.get("gflop") or 0), float(o.get("gbyte") or 0)
            bw = peak["link"] if o["op"] in ("upload", "download") else peak["hbm"]
            # GFLOP / (TFLOP/s) is milliseconds; GB / (GB/s) is seconds.
            proj = max(gflop / peak["tflops"], gbyte / bw * 1e3) + int(o["calls"]) * LAUNCH_US / 1e3
            ms = float(o["total_ms"])
            mine.append({"model": model, **o, "share": f"{ms / total:.4f}", "projected_ms": f"{proj:.4f}",
                         "measured_over_projected": f"{ms / proj:.3f}" if proj > 0 else "",
                         "achieved_tflops": f"{gflop / ms:.2f}" if ms > 0 else "",
                         "achieved_gbs": f"{gbyte / ms * 1e3:.1f}" if ms > 0 else "",
                         "ceilings": f"{peak['tflops']:.0f} TFLOP/s ({peak['source']['tflops']}), "
                                     f"{peak['hbm']:.0f} GB/s ({peak['source']['hbm']})"})
        mine.sort(key=lambda o: -float(o["total_ms"]))
        rows += mine
        for o in mine[:6]:
            out.append({"section": "op_profile", "item": f"{model} {o['op']}", "value": f"{float(o['total_ms']):.2f}",
                        "unit": "ms", "status": "ok",
                        "note": f"{float(o['share']) * 100:.1f}% of op time, {o['calls']} calls, projected "
                                f"{float(o['projected_ms']):.2f} ms ({o['measured_over_projected']}x), "
                                f"{o['achieved_tflops']} TFLOP/s, {o['achieved_gbs']} GB/s"})
        # The training step's ops; uploads and downloads are the set-up's (weights, batches).
        step = [o for o in mine if o["op"] not in ("upload", "download")]
        step_ms = sum(float(o["total_ms"]) for o in step)
        proj_total = sum(float(o["projected_ms"]) for o in step)
        out.append({"section": "op_profile", "item": f"{model} step ops", "value": f"{step_ms:.2f}", "unit": "ms",
                    "status": "ok", "note": f"projected {proj_total:.2f} ms on the roofline "
                                            f"({step_ms / proj_total:.2f}x); uploads and downloads "
                                            f"{total - step_ms:.1f} ms more" if proj_total else ""})
    return rows, out


def bench_rows(work: str) -> tuple:
    rows, out = [], []
    for path in sorted(glob.glob(os.path.join(work, "raw", "bench_*.json"))):
        try:
            text, _ = gbench_to_csv.convert(path)
            got = list(csv.DictReader(io.StringIO(text)))
        except Exception as e:  # noqa: BLE001 (a truncated JSON from a stage that timed out)
            out.append({"section": "bench", "item": os.path.basename(path), "value": "", "unit": "",
                        "status": "failed", "note": f"unreadable: {e}"[:300]})
            continue
        rows += got
        errors = [r for r in got if r.get("error_message")]
        if errors:
            out.append({"section": "bench", "item": f"{os.path.basename(path)} errors", "value": len(errors),
                        "unit": f"of {len(got)} benchmarks", "status": "failed",
                        "note": errors[0]["error_message"][:300]})

    def best(pred, counter):
        vals = [(float(r[counter]), r["benchmark"]) for r in rows if pred(r) and r.get(counter) not in (None, "")]
        return max(vals) if vals else None
    for label, pred, counter, unit in (
            ("best GEMM (model shapes)", lambda r: r["suite"] == "bench_gemm_cuda", "TFLOP/s", "TFLOP/s"),
            ("best fused kernel", lambda r: r["suite"] == "bench_kernels_cuda", "GB/s", "GB/s"),
            ("best copy", lambda r: r["suite"] == "bench_copy_cuda", "GB/s", "GB/s"),
            ("best layer fwd+bwd", lambda r: r["suite"] == "bench_layer_cuda", "TFLOP/s", "TFLOP/s")):
        b = best(pred, counter)
        if b:
            out.append({"section": "bench", "item": label, "value": f"{b[0]:.1f}", "unit": unit, "status": "ok",
                        "note": b[1]})
    return rows, out


def accept_rows(work: str) -> list:
    """The checks of health.json (ptdp accept --level 1), accept.json and burnin.json (--checks burnin), one row each."""
    rows = []
    for name in ("health.json", "accept.json", "burnin.json"):
        try:
            j = json.load(open(os.path.join(work, "raw", name)))
        except (OSError, ValueError):
            continue
        rows += [{"section": "accept", "item": f"{c['check']} {c['metric']}", "value": c["value"], "unit": c["unit"],
                  "status": c["status"],
                  "note": f"threshold {c['op']} {c['threshold']}; {c.get('detail', '')}"[:300]}
                 for c in j.get("checks", [])]
    return rows


def kernel_class(name: str) -> str:
    """A kernel's name without return type, namespaces, template arguments and parameters:
    'void ptdp::<unnamed>::scale_kernel<float>(T1 *, float, long)' -> 'scale_kernel'."""
    n = re.sub(r"^void ", "", name.strip())
    n = n.replace("(anonymous namespace)::", "").replace("<unnamed>::", "")
    depth, out = 0, ""
    for ch in n:  # drop template arguments, nested ones too
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out += ch
    out = out.split("(")[0]
    return out.split("::")[-1] or name


def ncu_rows(work: str) -> list:
    path = os.path.join(work, "raw", "ncu.csv")
    try:
        lines = [ln for ln in open(path, errors="replace") if ln.startswith('"')]
    except OSError:
        return []
    totals = {}
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = kernel_class(r.get("Kernel Name", "?"))
        try:
            ns = float(r["Metric Value"].replace(",", ""))
        except (KeyError, ValueError):
            continue
        t = totals.setdefault(name, [0, 0.0])
        t[0] += 1
        t[1] += ns
    all_ns = sum(t[1] for t in totals.values()) or 1.0
    return [{"section": "ncu", "item": name[:120], "value": f"{t[1] / 1e6:.3f}", "unit": "ms", "status": "ok",
             "note": f"{t[0]} launches, {t[1] / all_ns * 100:.1f}% of kernel time"}
            for name, t in sorted(totals.items(), key=lambda kv: -kv[1][1])[:12]]



def fits(value, width: int) -> str:
    """A value in at most `width` characters: a number shortened to fewer significant digits (its
    exponent kept: 8.72e-09 never reads as 8.72), anything else cut."""
    text = str(value)
    if len(text) <= width:
        return text
    try:
        number = float(text)
    except ValueError:
        return text[:width]
    for digits in range(width, 0, -1):
        short = f"{number:.{digits}g}"
        if len(short) <= width:
            return short
    return text[:width]

def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="gpu_summary.py", description=__doc__.split("\n\n")[0])
    p.add_argument("work")
    p.add_argument("out")
    p.add_argument("--dry-run", default="0")
    a = p.parse_args(argv)
    stages = read_csv(os.path.join(a.work, "stages.csv"))
    if not stages:
        print(f"gpu_summary.py: error: {a.work}/stages.csv is missing or empty", file=sys.stderr)
        return 2
    prov = probe_fields(a.work)
    summary = [{"section": "stage", "item": s["stage"], "value": s["seconds"], "unit": "s", "status": s["status"],
                "note": (f"budget {s['budget_s']} s; exit {s['rc']}; " if s["rc"] else "") + s["command"][:240]}
               for s in stages]
    for s in stages:
        if s["stage"].startswith("test_"):
            summary += gtest_rows(a.work, s["stage"])
    summary += sanitizer_rows(a.work, stages)
    summary += loss_rows(a.work)
    summary += dispatch_rows(a.work)
    compare, rows = compare_rows(a.work)
    summary += rows
    summary += criteria_rows(compare)
    summary += memory_rows(a.work)
    fig7, rows = fig7_rows(a.work)
    summary += rows
    ops, rows = op_profile_rows(a.work, prov["gpu"])
    summary += rows
    bench, rows = bench_rows(a.work)
    summary += rows
    summary += accept_rows(a.work)
    summary += ncu_rows(a.work)
    summary += nccl_rows(a.work)
    for r in summary:
        r.update(prov)
        r["dry_run"] = a.dry_run
    atomic.write(os.path.join(a.out, "summary.csv"), tables.csv_text(summary, COLUMNS))
    for name, rows in (("compare_pytorch.csv", compare), ("fig7.csv", fig7), ("op_profile.csv", ops),
                       ("microbench.csv", bench)):
        if rows:
            atomic.write(os.path.join(a.out, name), tables.csv_text(rows))
    print(f"{'section':<10} {'item':<48} {'value':>12} {'unit':<16} status")
    for r in summary:
        print(f"{r['section']:<10} {str(r['item'])[:48]:<48} {fits(r['value'], 12):>12} {r['unit'][:16]:<16} "
              f"{r['status']}  {str(r['note'])[:70] if r['section'] != 'stage' else ''}")
    return 0
