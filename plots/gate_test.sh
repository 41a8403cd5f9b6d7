#!/usr/bin/env bash
# The nightly gate of plots/history.py --changes --recent K (scripts/track.sh's GATE_RECENT): the last
# K builds against a baseline window, an alert that stays until acknowledged.
# - a drift of -1.2% a build (20 builds), replayed night by night: once it alerts, it alerts every
#   later night (the gate before it failed one night, then passed while throughput kept falling);
# - in 150-build histories (noise 2% a run): the drift and a -7% step 40 builds back alert, a flat
#   series does not;
# - --acknowledge SHA --by WHO --why TEXT writes who and why to HISTORY-acks.csv; the alert is gone,
#   a drop after the acknowledged build alerts again; bad acknowledgements exit 2;
# - the power from a simulation (plots/gate_power.py, 40 trials, noise 5% a run, gate only: seconds):
#   a -10% step 8 builds back found as often at 150 builds as at 20, a flat series hardly ever.
#   plots/gate_test.sh
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; cat "$tmp/out" 2>/dev/null; exit 1; }
# shellcheck source=scripts/python_with.sh
. "$src/scripts/python_with.sh"
py=$(python_with scipy) || py=python3
make() {  # NAME BUILDS NOISE PYTHON-EXPRESSION-OF-i
  "$py" "$src/plots/history_fixtures.py" "$src/results/history.csv" "$tmp/$1.csv" "$4" --builds "$2" --noise "$3" ||
    fail "history_fixtures.py $4"
}
gate() {  # EXPECTED-EXIT NAME [ARGS...]
  local want=$1 name=$2
  shift 2
  "$py" "$src/plots/history.py" "$tmp/$name.csv" --changes --recent 5 --tolerance 5 "$@" >"$tmp/out" 2>&1
  local rc=$?
  [ "$rc" -eq "$want" ] || fail "$name $*: exit $rc, expected $want"
}
make drift20 20 0.003 "1000 * (1 - 0.012) ** max(0, i - 7)"
first=""
for night in $(seq 8 20); do  # the history as it was on each night: its first NIGHT builds
  head -n $((1 + 3 * night)) "$tmp/drift20.csv" >"$tmp/night.csv"
  "$py" "$src/plots/history.py" "$tmp/night.csv" --changes --recent 5 --tolerance 5 >"$tmp/out" 2>&1
  rc=$?
  [ "$rc" -le 1 ] || fail "night $night: exit $rc"
  [ -n "$first" ] || { [ "$rc" -eq 1 ] && first=$night; }
  [ -z "$first" ] || [ "$rc" -eq 1 ] || fail "drift: alerted on night $first, passed on night $night"
done
[ -n "$first" ] && [ "$first" -le 15 ] || fail "drift: no alert by night 15 (first: ${first:-none})"
grep -qF "ALERT: the last 5 build(s) (15ababababab..19ababababab) run -11." "$tmp/out" ||
  fail "drift: the alert on night 20 does not name the drop (-11% in the median of its last 5 builds)"

make drift150 150 0.02 "1000 * (1 - 0.012) ** max(0, i - 137)"
gate 1 drift150
grep -qF "ALERT: the last 5 build(s) (145ababababa..149ababababa)" "$tmp/out" || fail "drift150: no alert"
make step150 150 0.02 "930 if i >= 110 else 1000"
gate 1 step150
grep -qF "run -7." "$tmp/out" && grep -qF "git bisect start 149ababababa 00ababababab" "$tmp/out" ||
  fail "step150: the old step is not an alert with its bisect range"
make flat150 150 0.02 "1000"
gate 0 flat150

# Acknowledged: the alert is gone and who and why are kept; a drop after the acknowledged build alerts.
"$py" "$src/plots/history.py" "$tmp/step150.csv" --acknowledge 149abab --by "Ann Lee" --why "the new kernel, slower" \
  >"$tmp/out" 2>&1 || fail "--acknowledge: exit $?"
grep -qF "build 149ababababa acknowledged by Ann Lee for 1 series" "$tmp/out" || fail "--acknowledge: no confirmation"
grep -qF ",Ann Lee,\"the new kernel, slower\"," "$tmp/step150-acks.csv" || fail "the acknowledgement lacks who or why"
gate 0 step150
make twice150 150 0.02 "1000 if i < 110 else (930 if i < 140 else 860)"
"$py" "$src/plots/history.py" "$tmp/twice150.csv" --acknowledge 120abab --by ann --why "accepted" >/dev/null ||
  fail "--acknowledge 120"
gate 1 twice150
grep -qF "since the acknowledgement of 120ababababa by ann (accepted)" "$tmp/out" || fail "twice150: the new drop is not named"
for bad in "--acknowledge 149abab --why x" "--acknowledge 149abab --by x" "--acknowledge 99zz --by x --why y" \
           "--acknowledge 1 --by x --why y" "--acknowledge 149abab --by x --why y --series nothing-like-it"; do
  # shellcheck disable=SC2086
  "$py" "$src/plots/history.py" "$tmp/step150.csv" $bad >"$tmp/out" 2>&1
  rc=$?
  [ "$rc" -eq 2 ] && grep -q "^history: error: " "$tmp/out" && ! grep -q Traceback "$tmp/out" || fail "$bad: exit $rc"
done
[ "$(wc -l <"$tmp/step150-acks.csv")" -eq 2 ] || fail "a refused acknowledgement was written"

"$py" "$src/plots/gate_power.py" --trials 40 --gate-only >"$tmp/out" 2>&1 || fail "gate_power.py: exit $?"
count() { sed -n "s|^gate power: $1 at $2 builds: gate \([0-9]*\)/40$|\1|p" "$tmp/out"; }
s20=$(count step-8 20) s150=$(count step-8 150) old=$(count step-40 150) d150=$(count drift-12 150)
f20=$(count flat 20) f150=$(count flat 150)
[ "${s20:-0}" -ge 36 ] && [ "${s150:-0}" -ge 36 ] || fail "power: a -10% step found $s20/40 at 20 builds, $s150/40 at 150"
[ $((s20 - s150)) -le 3 ] && [ $((s150 - s20)) -le 3 ] || fail "power: not flat ($s20/40 at 20 builds, $s150/40 at 150)"
[ "${old:-0}" -ge 30 ] && [ "${d150:-0}" -ge 36 ] || fail "power: the old step $old/40, the drift $d150/40 at 150 builds"
[ "${f20:-9}" -le 2 ] && [ "${f150:-9}" -le 2 ] || fail "power: false alerts $f20/40, $f150/40"
cat "$tmp/out"
echo "PASS: history gate"
