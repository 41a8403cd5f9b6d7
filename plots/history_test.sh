#!/usr/bin/env bash
# plots/history.py's input errors: one line naming the file (and line), exit code 2, never 1 (which
# scripts/track.sh reports as a throughput regression) and never a Python traceback; a number that
# ptdp's CSV reader refuses (1_0, inf, nan, 0x10, 1e999) is refused naming the file, line and column;
# --spread warns about runs of one build that spread widely.
#   plots/history_test.sh
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
head -3 "$src/results/history.csv" >"$tmp/good.csv"
{ cat "$tmp/good.csv"; echo "a,b,c"; } >"$tmp/short-row.csv"
{ head -1 "$tmp/good.csv"; sed -n 2p "$tmp/good.csv" | sed 's/^\([^,]*\),/\1,,/'; } >"$tmp/long-row.csv"
printf 'a,b\n1,2\n' >"$tmp/foreign.csv"
# tokens/s as ptdp's CSV reader refuses it (Python's float() takes '1_0' as 10, 'inf' and 'nan').
for bad in 1_0 inf nan 0x10 1e999 "1 0"; do
  { cat "$tmp/good.csv"; sed -n 2p "$tmp/good.csv" | awk -F, -v OFS=, -v v="$bad" '{$28 = v; print}'; } \
    >"$tmp/bad-number-${bad// /-}.csv"
done
check() {  # NEEDLE ARGS...: exit 2, the needle on stderr, no traceback
  local needle=$1; shift
  python3 "$src/plots/history.py" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" -eq 2 ] || fail "history.py $*: exit $rc, expected 2: $(cat "$tmp/err")"
  grep -qF -- "$needle" "$tmp/err" || fail "history.py $*: no '$needle' in: $(cat "$tmp/err")"
  ! grep -q Traceback "$tmp/err" || fail "history.py $*: a traceback"
}
check "short-row.csv:3: 3 fields, the header has" "$tmp/short-row.csv" --last-two "$tmp/p.csv" "$tmp/c.csv"
check "short-row.csv:3: 3 fields, the header has" "$tmp/short-row.csv" "$tmp/h.png"
check "long-row.csv:2: " "$tmp/long-row.csv" --last-two "$tmp/p.csv" "$tmp/c.csv"
check "foreign.csv:1: no column" "$tmp/foreign.csv" "$tmp/h.png"
for bad in 1_0 inf nan 0x10 1e999 "1 0"; do
  check "bad-number-${bad// /-}.csv:3: column 'tokens_per_s': '$bad' is not a number" \
    "$tmp/bad-number-${bad// /-}.csv" --last-two "$tmp/p.csv" "$tmp/c.csv"
done
check "bad-number-inf.csv:3: column 'tokens_per_s': 'inf' is not a number" "$tmp/bad-number-inf.csv" "$tmp/h.png"
check "missing.csv: cannot be read" "$tmp/missing.csv" "$tmp/h.png"
python3 "$src/plots/history.py" "$tmp/good.csv" --last-two "$tmp/p.csv" "$tmp/c.csv" >/dev/null
[ $? -eq 3 ] || fail "a history of one build: exit 3 (nothing to compare) expected"
# --spread (scripts/track.sh's SPREAD_WARN): the newest build's runs spread 7.5x is a warning, exit 0.
python3 "$src/plots/history_fixtures.py" "$src/results/history.csv" "$tmp/spread.csv" "1000 if i < 11 or j else 133"
python3 "$src/plots/history.py" "$tmp/spread.csv" --spread 1.5 >"$tmp/out" 2>&1 || fail "--spread: exit $?"
grep -qF "history: warning: the 3 runs of build 11ababababab of track small" "$tmp/out" &&
  grep -qF "spread 7.54x (tokens/s 133 to 1002, more than 1.5x)" "$tmp/out" || fail "--spread: no warning: $(cat "$tmp/out")"
python3 "$src/plots/history.py" "$tmp/spread.csv" --spread 8 >"$tmp/out" 2>&1 && [ ! -s "$tmp/out" ] ||
  fail "--spread 8: a spread of 7.5x warned: $(cat "$tmp/out")"
check "--spread 1 must be more than 1" "$tmp/spread.csv" --spread 1
# The exports (plots/page_test.sh tests what they write).
check "--asv $tmp/nowhere: no such folder" "$tmp/good.csv" --asv "$tmp/nowhere"
check "--build needs --bmf" "$tmp/good.csv" --build 2ccd
check "--build 99: 0 builds of the history start so" "$tmp/good.csv" --bmf "$tmp/b.json" --build 99
[ ! -e "$tmp/b.json" ] || fail "--build 99: a BMF file was written"
echo "PASS: history input errors"
