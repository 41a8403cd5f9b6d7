#!/usr/bin/env bash
# ctest PyTorch.DispatchMeasuresEagerOnTheCpuAndRefusesBadCounts: scripts/compare_pytorch.py
# dispatch on the CPU writes one row per shape (the eager forward and backward timed, the CUDA
# graph skipped with the reason), and a --warmup not below --iters is refused with one line and
# exit code 2, no file written. Exits 77 (ctest: skipped) when no Python here imports torch.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=scripts/python_with.sh
. "$here/python_with.sh"
py=$(python_with torch) || { echo "SKIP: no Python here can import torch (Debian: apt-get install python3-torch)"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ptdp_dispatch_test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
shape="h=64,a=4,l=2,s=32,b=2,V=256"

"$py" "$here/compare_pytorch.py" dispatch --device cpu --shape "$shape" --iters 3 --warmup 1 \
  --out "$work/dispatch.csv" >"$work/log" 2>&1 || fail "dispatch exited $?: $(tail -3 "$work/log")"
"$py" - "$work/dispatch.csv" <<'PY' || fail "the dispatch row is not as expected"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 1, rows
r = rows[0]
assert r["status"] == "skipped" and "CUDA graphs need a GPU" in r["note"], r
assert float(r["eager_ms"]) > 0 and r["graph_ms"] == "" and r["kernels"] == "", r
assert r["hidden"] == "64" and r["micro_batch"] == "2" and r["git_sha"] and r["command"], r
PY

"$py" "$here/compare_pytorch.py" dispatch --device cpu --shape "$shape" --iters 3 --warmup 3 \
  --out "$work/bad.csv" >"$work/out" 2>"$work/err"
rc=$?
((rc == 2)) || fail "--warmup 3 --iters 3 exited $rc, not 2"
[[ $(wc -l <"$work/err") -eq 1 ]] || fail "not one line on stderr: $(cat "$work/err")"
grep -q -- "--warmup 3 must be in \[0, --iters 3)" "$work/err" || fail "the refusal does not name the rule: $(cat "$work/err")"
[[ ! -e "$work/bad.csv" ]] || fail "a refused run wrote its --out file"
echo "PASS: dispatch"
