#!/usr/bin/env bash
# plots/history.py --changes on made-up histories of 12 builds x 3 runs (one row of
# results/history.csv as the template, tokens/s set, noise of 0.3% from a fixed seed): a flat series
# reports nothing (exit 0), a 5% step down is named at its build with the bisect range (exit 1), a
# drift of 2% a build is named at the build where it started, a drop and its fix are both found,
# a rise alone exits 0, --recent K judges the last K builds against the baseline, the HTML report holds
# both the table and the plot (plots/page_test.sh checks it in a browser), the PNG has a fixed size.
#   plots/changes_test.sh
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" 2>/dev/null; exit 1; }
# shellcheck source=scripts/python_with.sh
. "$src/scripts/python_with.sh"
py=$(python_with scipy matplotlib plotly) || py=python3
make() {  # NAME PYTHON-EXPRESSION-OF-i: the median tokens/s of build i
  "$py" "$src/plots/history_fixtures.py" "$src/results/history.csv" "$tmp/$1.csv" "$2" || fail "history_fixtures.py $2"
}
run() {  # EXPECTED-EXIT NAME [ARGS...]
  local want=$1 name=$2
  shift 2
  "$py" "$src/plots/history.py" "$tmp/$name.csv" --changes "$@" >"$tmp/out" 2>&1
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$name: exit $rc, expected $want"
}
make flat "1000"
make step "1000 if i < 6 else 950"
make drift "1000 if i < 5 else 1000 * (1 - 0.02 * (i - 4))"
make dip "1000 if i < 4 else (950 if i < 8 else 1000)"
make rise "1000 if i < 7 else 1060"
run 0 flat
grep -q "12 builds, no change" "$tmp/out" || fail "flat: no 'no change'"
run 1 step
grep -qF "step drop of -5." "$tmp/out" || fail "step: not found"
grep -qF "at build 06abababab" "$tmp/out" || fail "step: not at build 06"
grep -qF "git bisect start 06ababababab 05ababababab" "$tmp/out" || fail "step: no bisect range 06..05"
run 1 drift
grep -qF "drift drop of" "$tmp/out" || fail "drift: not found as a drift"
grep -qF "from build 05abababab" "$tmp/out" || fail "drift: not started at build 05"
run 1 dip
grep -qF "step drop of -5." "$tmp/out" && grep -qF "at build 04abababab" "$tmp/out" || fail "dip: the drop at 04 not found"
grep -qF "step rise of +5." "$tmp/out" && grep -qF "at build 08abababab" "$tmp/out" || fail "dip: the fix at 08 not found"
run 0 rise
grep -qF "step rise of +6." "$tmp/out" || fail "rise: not found"
run 0 step --tolerance 6  # a 5% step is below a 6% tolerance
# --recent K (scripts/track.sh's GATE_RECENT): the last K builds against the baseline window
# (plots/gate_test.sh tests the gate in full).
run 1 drift --recent 8
grep -qF "1 alert(s): the last 8 builds at least 2% below the baseline" "$tmp/out" || fail "drift --recent 8: no alert"
run 1 step --recent 3  # at build 6 of 12: older than the last 3 builds, still below the baseline
grep -qF "step drop of -5." "$tmp/out" || fail "step --recent 3: the older drop is no longer printed"
run 0 dip --recent 5  # the drop at 4 was fixed at 8
run 2 step --recent -1
grep -qF -- "--recent -1 must be 0 or more" "$tmp/out" || fail "--recent -1: no error naming it"
run 1 step --html "$tmp/report.html"
grep -qF "git bisect start 06ababababab 05ababababab" "$tmp/report.html" || fail "the HTML report lacks the change"
grep -qF "Plotly.newPlot" "$tmp/report.html" || fail "the HTML report lacks the plot"
# The PNG has a fixed width: the last 60 builds (it was 0.6 inch a build: 11,160 pixels at 150 builds).
"$py" "$src/plots/history_fixtures.py" "$src/results/history.csv" "$tmp/long.csv" "1000" --builds 150 || fail "long.csv"
for n in step long; do "$py" "$src/plots/history.py" "$tmp/$n.csv" "$tmp/$n.png" >"$tmp/out" 2>&1 || fail "$n.png"; done
[ "$(od -An -tu1 -j16 -N8 "$tmp/step.png")" = "$(od -An -tu1 -j16 -N8 "$tmp/long.png")" ] ||
  fail "the PNG's size changes with the builds: $(od -An -tu1 -j16 -N8 "$tmp/step.png") / $(od -An -tu1 -j16 -N8 "$tmp/long.png")"
# The report is a user's file: a missing folder is one line and exit 2 (never 1, a drop, nor a
# traceback); a symlink is written through; writers at once to one file each leave a whole report.
run 2 step --html "$tmp/no/such/r.html"
grep -qF "r.html: cannot be written: no folder $tmp/no/such" "$tmp/out" && ! grep -q Traceback "$tmp/out" ||
  fail "--html into a missing folder: no one-line error"
echo old >"$tmp/target.html"
ln -s "$tmp/target.html" "$tmp/link.html"
run 1 step --html "$tmp/link.html"
[ -L "$tmp/link.html" ] && grep -qF "git bisect start 06ababababab" "$tmp/target.html" || fail "the symlink was replaced"
run 1 step --html /dev/null
for i in 1 2 3 4 5 6; do
  "$py" "$src/plots/history.py" "$tmp/step.csv" --changes --html "$tmp/same.html" >"$tmp/out$i" 2>&1 &
done
for i in 1 2 3 4 5 6; do wait -n; rc=$?; [ "$rc" -eq 1 ] || fail "writers at once: one exited $rc"; done
tail -c 20 "$tmp/same.html" | grep -qF "</html>" || fail "writers at once: the report is cut"
! ls -a "$tmp" | grep -q '^\.tmp-' || fail "writers at once: a temporary file was left"
run 2 step --html "$tmp/r.html" --alpha 0
grep -qF -- "--alpha 0 must be in (0, 1)" "$tmp/out" || fail "--alpha 0: no error naming it"
"$py" "$src/plots/history.py" "$tmp/step.csv" --html "$tmp/r.html" >"$tmp/out" 2>&1
[ $? -eq 2 ] && grep -qF -- "--html needs --changes" "$tmp/out" || fail "--html without --changes"
echo "PASS: history changes"
