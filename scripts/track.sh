#!/usr/bin/env bash
# Throughput regression tracking. For each tracked configuration: WARMUP_RUNS untimed runs, then
# RUNS runs with the current build, each run's result row (git sha, host, device, timestamp
# included; its iter_time_ms and throughput are the median over the run's timed iterations)
# appended to results/history.csv; then this build's runs are compared with the previous build's
# runs of the same configuration on the same machine (`ptdp compare --per-machine`: Hodges-Lehmann
# change with its confidence interval and a Mann-Whitney U test; a regression must be beyond
# TOLERANCE and significant at ALPHA; exit 1 on a regression, 3 when inconclusive, report only
# with STRICT=0). Finally every series is
# plotted per build with its noise band to plots/history.png (PLOT=FILE.html: the interactive page),
# and the whole history is searched for the builds where a series stepped or began to drift
# (plots/history.py --changes: printed; REPORT=FILE.html also writes the page with them and the
# alerts marked, its builds linked to COMMIT_URL, e.g. https://github.com/ORG/ptdp/commit/{sha}).
# The gate: the last GATE_RECENT builds (default 5) of a series at least TOLERANCE below its
# baseline window (GATE_BASELINE builds, default 10, from the last acknowledged build or the first)
# is a regression too (exit 1; STRICT=0 reports it): a slow drift that no two
# adjacent builds' comparison can see, or an older drop. It stays until fixed or acknowledged
# (plots/history.py HISTORY --acknowledge SHA --by WHO --why TEXT, kept in HISTORY's -acks.csv
# beside it). GATE_RECENT=0: print only.
# A/B mode (BASELINE_BUILD=DIR, another build folder, e.g. of the target branch): the runs alternate
# between DIR's ptdp and this build's, so that the machine's drift hits both alike, and the two sets
# are compared directly; nothing is appended to the history.
# Knobs: TRACK_ARGS (one benchmark's `ptdp train` flags), TRACK_CONFIGS (a file of benchmarks,
# one set of flags a line, '#' comments; replaces TRACK_ARGS), RUNS (default 5; 4 or more per
# build are needed for a significance test at 0.05, 10 catch a 15% slowdown at this machine's
# noise nine times in ten), WARMUP_RUNS (default 1), HISTORY, PLOT,
# GATE_RECENT, GATE_BASELINE (above), SPREAD_WARN (default 1.5: warn when one build's runs of a
# benchmark spread more than this ratio, most tokens/s over fewest: a busy machine), TOLERANCE
# (percent, default 5), ALPHA (default 0.05), STRICT=0 (report a regression, exit 0), THREADS
# (OMP_NUM_THREADS, default: all cores), KEEP_ROWS=DIR (A/B mode: keep each benchmark's rows there as
# ab-base-N.csv and ab-cur-N.csv), PIN (a CPU list for taskset, e.g. 2-3), NUMA_NODE (run on
# that node's CPUs and memory through numactl), BUILD (build folder, default build; built by
# scripts/setup.sh when it has no ptdp). The CI recipe: docs/PERFORMANCE.md, "Regression tracking".
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "track: error: $*" >&2; exit 2; }
build=${BUILD:-build}
history=${HISTORY:-results/history.csv}
plot=${PLOT:-plots/history.png}
tolerance=${TOLERANCE:-5}
alpha=${ALPHA:-0.05}
gate_recent=${GATE_RECENT:-5}
[[ "$gate_recent" =~ ^[0-9]+$ ]] || fail "GATE_RECENT=$gate_recent must be a whole number, 0 or more (0: report only)"
gate_baseline=${GATE_BASELINE:-10}
[[ "$gate_baseline" =~ ^[1-9][0-9]*$ ]] || fail "GATE_BASELINE=$gate_baseline must be a whole number, 1 or more"
runs=${RUNS:-10}
spread_warn=${SPREAD_WARN:-1.5}
[[ "$spread_warn" =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v r="$spread_warn" 'BEGIN { exit !(r > 1) }' ||
  fail "SPREAD_WARN=$spread_warn must be a ratio above 1 (the most tokens/s over the fewest of one build's runs)"
warmup_runs=${WARMUP_RUNS:-1}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || fail "RUNS=$runs must be a whole number, 1 or more"
[[ "$warmup_runs" =~ ^[0-9]+$ ]] || fail "WARMUP_RUNS=$warmup_runs must be a whole number, 0 or more"
export OMP_NUM_THREADS=${THREADS:-$(nproc)}
pin=()
if [ -n "${NUMA_NODE:-}" ]; then
  command -v numactl >/dev/null || fail "NUMA_NODE=$NUMA_NODE needs numactl (apt-get install numactl)"
  pin=(numactl --cpunodebind="$NUMA_NODE" --membind="$NUMA_NODE")
fi
if [ -n "${PIN:-}" ]; then
  command -v taskset >/dev/null || fail "PIN=$PIN needs taskset (apt-get install util-linux)"
  pin+=(taskset -c "$PIN")
fi
# small (l=4, h=256, s=256) for 8 iterations, the first 2 untimed: about 5 s on 2 cores.
default_args="--model small --micro-batch 4 --global-batch 8 --iters 8 --warmup 2 --seed 1234 --lr 1e-3"
configs=()
if [ -n "${TRACK_CONFIGS:-}" ]; then
  [ -r "$TRACK_CONFIGS" ] || fail "TRACK_CONFIGS=$TRACK_CONFIGS cannot be read"
  while IFS= read -r line || [ -n "$line" ]; do
    line=${line%%#*}
    [[ "$line" =~ [^[:space:]] ]] && configs+=("$line")
  done <"$TRACK_CONFIGS"
  ((${#configs[@]})) || fail "TRACK_CONFIGS=$TRACK_CONFIGS holds no benchmark (one set of ptdp train flags a line)"
else
  configs=("${TRACK_ARGS:-$default_args}")
fi

[ -x "$build/ptdp" ] || scripts/setup.sh
base_build=${BASELINE_BUILD:-}
[ -z "$base_build" ] || [ -x "$base_build/ptdp" ] || fail "BASELINE_BUILD=$base_build has no ptdp"
# matplotlib: the first python3 that has it (Debian's python3-matplotlib lives in /usr/bin/python3).
py=""
for cand in python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null && "$cand" -c "import matplotlib" 2>/dev/null; then py=$cand; break; fi
done
[ -n "$py" ] || fail "no python3 with matplotlib (apt-get install python3-matplotlib)"

mkdir -p "$(dirname "$history")" "$(dirname "$plot")"
# The report is written after the runs: a folder that is not there is refused before them.
[ -z "${REPORT:-}" ] || [ -d "$(dirname "$REPORT")" ] || fail "REPORT=$REPORT: no folder $(dirname "$REPORT")"
# Scratch files (warm-up rows, the A/B sets, the split history) live outside the checkout.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptdp-track.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
regressed=0
inconclusive=0
spread=0
# check_spread CSV: warn (and count) when the newest build's runs in CSV spread more than SPREAD_WARN.
check_spread() {
  local out
  out=$("$py" plots/history.py "$1" --spread "$spread_warn") || fail "plots/history.py could not read $1: see above"
  [ -z "$out" ] || { echo "$out"; spread=$((spread + 1)); }
}
# bench BUILD_DIR CSV ARGS: one run of the benchmark, its row appended to CSV.
# ARGS is split at blanks, never glob-expanded: a '*' or '?' in TRACK_ARGS reaches ptdp as written.
bench() {
  local -a argv
  read -r -a argv <<<"$3"
  "${pin[@]}" "$1/ptdp" train "${argv[@]}" --experiment track --log-interval 100 --csv "$2"
}
for c in "${!configs[@]}"; do
  args=${configs[$c]}
  echo "track: benchmark $((c + 1)) of ${#configs[@]}: ptdp train $args"
  for i in $(seq 1 "$warmup_runs"); do
    echo "track: warm-up run $i of $warmup_runs (not recorded)"
    rm -f "$tmp"/track-warmup.csv "$tmp"/track-warmup-base.csv
    bench "$build" "$tmp"/track-warmup.csv "$args" >/dev/null
    [ -z "$base_build" ] || bench "$base_build" "$tmp"/track-warmup-base.csv "$args" >/dev/null
  done
  if [ -n "$base_build" ]; then
    rm -f "$tmp"/track-ab-base.csv "$tmp"/track-ab-cur.csv
    for i in $(seq 1 "$runs"); do
      echo "track: run $i of $runs, $base_build then $build (OMP_NUM_THREADS=$OMP_NUM_THREADS${PIN:+, CPUs $PIN}${NUMA_NODE:+, NUMA node $NUMA_NODE})"
      bench "$base_build" "$tmp"/track-ab-base.csv "$args"
      bench "$build" "$tmp"/track-ab-cur.csv "$args"
    done
    check_spread "$tmp"/track-ab-base.csv
    check_spread "$tmp"/track-ab-cur.csv
    set +e
    if [ -n "${KEEP_ROWS:-}" ]; then  # the A/B rows, for reports (compare --format junit|markdown|json)
      mkdir -p "$KEEP_ROWS"
      cp "$tmp"/track-ab-base.csv "$KEEP_ROWS/ab-base-$((c + 1)).csv"
      cp "$tmp"/track-ab-cur.csv "$KEEP_ROWS/ab-cur-$((c + 1)).csv"
    fi
    "$build/ptdp" compare "$tmp"/track-ab-base.csv "$tmp"/track-ab-cur.csv --per-machine \
      --tolerance "$tolerance" --alpha "$alpha"
    status=$?
    set -e
    [ "$status" -le 1 ] || [ "$status" -eq 3 ] || exit "$status"
    [ "$status" -ne 1 ] || regressed=$((regressed + 1))
    [ "$status" -ne 3 ] || inconclusive=$((inconclusive + 1))
    continue
  fi
  for i in $(seq 1 "$runs"); do
    echo "track: run $i of $runs (OMP_NUM_THREADS=$OMP_NUM_THREADS${PIN:+, CPUs $PIN}${NUMA_NODE:+, NUMA node $NUMA_NODE})"
    bench "$build" "$history" "$args"
  done
  check_spread "$history"
  # The newest row is this benchmark's last run: --last-two picks its series (configuration, host,
  # device) and writes this build's runs and the previous build's runs of it.
  set +e
  "$py" plots/history.py "$history" --last-two "$tmp"/track-prev.csv "$tmp"/track-cur.csv
  split=$?
  set -e
  if [ "$split" -eq 0 ]; then
    set +e
    "$build/ptdp" compare "$tmp"/track-prev.csv "$tmp"/track-cur.csv --per-machine \
      --tolerance "$tolerance" --alpha "$alpha"
    status=$?
    set -e
    [ "$status" -le 1 ] || [ "$status" -eq 3 ] || exit "$status"
    [ "$status" -ne 1 ] || regressed=$((regressed + 1))
    [ "$status" -ne 3 ] || inconclusive=$((inconclusive + 1))
  elif [ "$split" -ne 3 ]; then  # not a regression: an unreadable history
    fail "plots/history.py could not read $history (exit $split): see above"
  fi
done
[ -n "$base_build" ] || "$py" plots/history.py "$history" "$plot" ${COMMIT_URL:+--commit-url "$COMMIT_URL"} ||
  fail "plots/history.py could not plot $history"
if [ -z "$base_build" ]; then
  set +e
  "$py" plots/history.py "$history" --changes --tolerance "$tolerance" ${REPORT:+--html "$REPORT"} \
    --recent "$gate_recent" --baseline "$gate_baseline" ${COMMIT_URL:+--commit-url "$COMMIT_URL"}
  changes=$?
  set -e
  [ "$changes" -le 1 ] || fail "plots/history.py --changes could not report on $history (exit $changes): see above"
fi
strict_failure=0
if [ "$regressed" -ne 0 ]; then
  echo "track: throughput regression against ${base_build:-the previous build} in $regressed of ${#configs[@]} benchmark(s)" \
       "(tolerance ${tolerance}%, significance ${alpha})"
  strict_failure=1
fi
if [ -z "$base_build" ] && [ "$changes" -eq 1 ] && [ "$gate_recent" -gt 0 ]; then
  echo "track: the history alerts: the last $gate_recent builds run at least ${tolerance}% below the baseline window" \
       "(ALERT above, with its git bisect range; it stays until fixed or acknowledged: plots/history.py $history" \
       "--acknowledge SHA --by WHO --why TEXT)"
  strict_failure=1
fi
if [ "$inconclusive" -ne 0 ]; then
  echo "track: inconclusive in $inconclusive of ${#configs[@]} benchmark(s): the runs cannot tell a pass from a" \
       "regression beyond ${tolerance}% (more RUNS, or a quieter machine, would decide)"
fi
if [ "$spread" -ne 0 ]; then
  echo "track: warning: in $spread set(s) of runs the runs spread more than ${spread_warn}x (above): the machine was busy," \
       "so their verdict is weak; rerun at a quieter moment, with PIN and THREADS"
fi
if [ -n "$base_build" ]; then
  echo "track: $base_build against $build: the comparison above"
else
  echo "track: appended to $history, plot in $plot"
fi
[ "$strict_failure" -eq 0 ] || [ "${STRICT:-1}" != "1" ] || exit 1
[ "$inconclusive" -eq 0 ] || [ "${STRICT:-1}" != "1" ] || exit 3
