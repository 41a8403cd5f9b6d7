"""The history in other tools' formats, so that a team keeps its dashboard (plots/history.py --bmf,
--asv):

- Bencher Metric Format (BMF, `bencher run --adapter json --file OUT.json`): one build's results,
  {benchmark: {measure: {value, lower_value, upper_value}}}; the benchmark is the series' name, the
  measures `throughput` (tokens/s) and `tflops-per-gpu`, the value the median of the build's runs
  and the bounds their min and max.
- asv's results folder (`asv publish` reads it; format version 2 of asv/results.py):
  benchmarks.json, and per machine (host and device) machine.json and one COMMIT8-ptdp.json per
  build, each series a `track` benchmark in tokens/s with the median as its result, the quartiles
  and min-max as its statistics and the runs as its samples.
"""
import json
import os
import re


def _median(v):
    v = sorted(v)
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def bmf(series, sha):
    """The BMF report of build SHA: SERIES as history_page's (name, builds: sha -> (tokens/s, TFLOP/s))."""
    out = {}
    for s in series:
        runs = s["builds"].get(sha)
        if not runs:
            continue
        measures = {}
        for measure, values in (("throughput", runs[0]), ("tflops-per-gpu", runs[1])):
            if values:
                measures[measure] = {"value": _median(values), "lower_value": min(values), "upper_value": max(values)}
        if measures:
            out[s["name"]] = measures
    return out


def _slug(text):
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "x"


def _quartile(v, q):
    v = sorted(v)
    pos = q * (len(v) - 1)
    lo = int(pos)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (pos - lo)


def asv_files(series, shas, times):
    """asv's results folder as {relative path: JSON object}; TIMES: each build's first run time in
    JavaScript milliseconds."""
    columns = ["result", "params", "version", "started_at", "duration", "stats_ci_99_a", "stats_ci_99_b",
               "stats_q_25", "stats_q_75", "stats_number", "stats_repeat", "samples"]
    files, benchmarks = {}, {}
    for s in series:
        machine = _slug(f"{s['host']}-{s['device']}")
        name = "ptdp." + _slug(s["config"])
        benchmarks[name] = {"name": name, "type": "track", "unit": "tokens/s", "params": [], "param_names": [],
                            "version": "1", "code": f"ptdp train ({s['name']})", "timeout": 0}
        files[f"{machine}/machine.json"] = {"machine": machine, "arch": "", "cpu": s["device"], "num_cpu": "",
                                            "os": "", "ram": "", "version": 1}
        for sha in shas:
            v = s["builds"].get(sha, ([], []))[0]
            if not v:
                continue
            path = f"{machine}/{sha[:8]}-ptdp.json"
            f = files.setdefault(path, {
                "commit_hash": sha, "env_name": "ptdp", "date": times[sha], "params": {"machine": machine},
                "python": "", "requirements": {}, "env_vars": {}, "result_columns": columns, "results": {},
                "durations": {}, "version": 2})
            f["results"][name] = [[_median(v)], [], "1", times[sha], None, [min(v)], [max(v)], [_quartile(v, 0.25)],
                                  [_quartile(v, 0.75)], [1], [len(v)], [sorted(v)]]
    benchmarks["version"] = 2
    files["benchmarks.json"] = benchmarks
    return files


def write_asv(folder, files, write_text, fail):
    """Writes asv's results FILES under FOLDER (which must exist), each through WRITE_TEXT."""
    if not os.path.isdir(folder):
        fail(f"--asv {folder}: no such folder")
    for rel, data in sorted(files.items()):
        path = os.path.join(folder, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n")
