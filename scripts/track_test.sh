#!/usr/bin/env bash
# scripts/track.sh end to end on a made-up history (12 builds x 3 runs of one series, a drift of 2%
# a build from build 5 on) with one tiny run of the build $1 appended: GATE_RECENT=8 fails the run
# (exit 1: the last 8 builds run below the baseline), STRICT=0 reports it and exits 0, the default
# GATE_RECENT=5 fails it too (the drift began 7 builds back: the gate before the baseline window let
# it pass) until the newest build is acknowledged, a bad GATE_RECENT exits 2; runs that spread widely
# are warned about; the history file is appended to, nothing is written into the checkout.
#   scripts/track_test.sh BUILD_DIR
set -uo pipefail
build=$(cd "${1:?usage: track_test.sh BUILD_DIR}" && pwd)
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" 2>/dev/null; exit 1; }
# shellcheck source=scripts/python_with.sh
. "$src/scripts/python_with.sh"
py=$(python_with scipy matplotlib) || py=python3
"$py" "$src/plots/history_fixtures.py" "$src/results/history.csv" "$tmp/drift.csv" \
  "1000 if i < 5 else 1000 * (1 - 0.02 * (i - 4))" || fail "history_fixtures.py"
before=$(git -C "$src" status --porcelain 2>/dev/null)
track() {  # EXPECTED-EXIT NAME [VAR=VALUE...]
  local want=$1 name=$2
  shift 2
  cp "$tmp/drift.csv" "$tmp/$name.csv"
  env RUNS=1 "$@" WARMUP_RUNS=0 BUILD="$build" HISTORY="$tmp/$name.csv" PLOT="$tmp/$name.png" \
    TRACK_ARGS="--model tiny --iters 3 --warmup 1" "$src/scripts/track.sh" >"$tmp/out" 2>&1
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, expected $want"
}
track 1 gated GATE_RECENT=8
grep -qF "track: the history alerts: the last 8 builds run at least 5% below the baseline window" "$tmp/out" ||
  fail "gated: no line naming the alert"
grep -qF "git bisect start 05ababababab 04ababababab" "$tmp/out" || fail "gated: no bisect range"
[ "$(wc -l <"$tmp/gated.csv")" -eq 38 ] || fail "gated: the run's row was not appended (or more were)"
track 0 reported GATE_RECENT=8 STRICT=0
grep -qF "track: the history alerts" "$tmp/out" || fail "STRICT=0: the alert is not reported"
track 1 older
grep -qF "drift drop of" "$tmp/out" && grep -qF "track: the history alerts" "$tmp/out" ||
  fail "older: a drift from 7 builds back did not gate the run"
# Acknowledged (the newest build of the fixture, the level now accepted): the next run passes.
"$py" "$src/plots/history.py" "$tmp/drift.csv" --acknowledge 11abab --by ci --why "accepted" >/dev/null || fail "--acknowledge"
cp "$tmp/drift-acks.csv" "$tmp/acked-acks.csv"
track 0 acked
! grep -qF "track: the history alerts" "$tmp/out" || fail "acked: the acknowledged drift still gates the run"
track 2 bad-baseline GATE_BASELINE=0
grep -qF "GATE_BASELINE=0 must be a whole number, 1 or more" "$tmp/out" || fail "GATE_BASELINE=0: no error naming it"
track 2 bad GATE_RECENT=x
grep -qF "GATE_RECENT=x must be a whole number" "$tmp/out" || fail "GATE_RECENT=x: no error naming it"
# Two runs of this build that differ at all are a spread above SPREAD_WARN=1.00001: warned, not failed.
track 0 spread RUNS=2 GATE_RECENT=0 SPREAD_WARN=1.00001
grep -qF "history: warning: the 2 runs of build" "$tmp/out" &&
  grep -qF "track: warning: in 1 set(s) of runs the runs spread more than 1.00001x" "$tmp/out" || fail "spread: no warning"
track 2 bad-spread SPREAD_WARN=1
grep -qF "SPREAD_WARN=1 must be a ratio above 1" "$tmp/out" || fail "SPREAD_WARN=1: no error naming it"
track 2 no-report-folder REPORT="$tmp/missing/report.html"
grep -qF "track: error: REPORT=$tmp/missing/report.html: no folder" "$tmp/out" || fail "REPORT in a missing folder: no error"
[ "$(wc -l <"$tmp/no-report-folder.csv")" -eq 37 ] || fail "REPORT in a missing folder: a run was appended"
[ "$(git -C "$src" status --porcelain 2>/dev/null)" = "$before" ] || fail "track.sh wrote into the checkout"
echo "PASS: track history gate"
