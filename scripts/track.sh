#!/usr/bin/env bash
# Throughput regression tracking. Runs one fixed training benchmark RUNS times with the current
# build, appends each run's result row (git sha, host, device, timestamp included) to
# results/history.csv, compares this build's runs with the previous build's runs of the same
# configuration on the same machine (`ptdp compare`: Hodges-Lehmann change with its confidence
# interval and a Mann-Whitney U test; a regression must be beyond TOLERANCE and significant at
# ALPHA; report only unless STRICT=1) and plots throughput per build with its noise band to
# plots/history.png.
# Knobs: TRACK_ARGS (the benchmark's flags), RUNS (default 5; 4 or more per build are needed for a
# significance test at 0.05), HISTORY, PLOT, TOLERANCE (percent, default 5), ALPHA (default 0.05),
# STRICT=1 (exit 1 on a regression), THREADS (OMP_NUM_THREADS, default: all cores), PIN (a CPU list
# for taskset, e.g. 2-3, when taskset exists), BUILD (build folder, default build; built by
# scripts/setup.sh when it has no ptdp).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BUILD:-build}
history=${HISTORY:-results/history.csv}
plot=${PLOT:-plots/history.png}
tolerance=${TOLERANCE:-5}
alpha=${ALPHA:-0.05}
runs=${RUNS:-5}
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { echo "track: error: RUNS=$runs must be a whole number, 1 or more" >&2; exit 2; }
export OMP_NUM_THREADS=${THREADS:-$(nproc)}
pin=()
if [ -n "${PIN:-}" ]; then
  command -v taskset >/dev/null || { echo "track: error: PIN=$PIN needs taskset (apt-get install util-linux)" >&2; exit 2; }
  pin=(taskset -c "$PIN")
fi
# small (l=4, h=256, s=256) for 8 iterations, the first 2 untimed: about 5 s on 2 cores.
args=${TRACK_ARGS:---model small --micro-batch 4 --global-batch 8 --iters 8 --warmup 2 --seed 1234 --lr 1e-3}

[ -x "$build/ptdp" ] || scripts/setup.sh
# matplotlib: the first python3 that has it (Debian's python3-matplotlib lives in /usr/bin/python3).
py=""
for cand in python3 /usr/bin/python3; do
  if command -v "$cand" >/dev/null && "$cand" -c "import matplotlib" 2>/dev/null; then py=$cand; break; fi
done
[ -n "$py" ] || { echo "track: error: no python3 with matplotlib (apt-get install python3-matplotlib)" >&2; exit 2; }

mkdir -p "$(dirname "$history")" "$(dirname "$plot")" results/tmp
for i in $(seq 1 "$runs"); do
  echo "track: run $i of $runs (OMP_NUM_THREADS=$OMP_NUM_THREADS${PIN:+, pinned to $PIN})"
  # shellcheck disable=SC2086
  "${pin[@]}" "$build/ptdp" train $args --experiment track --log-interval 100 --csv "$history"
done

status=0
set +e
"$py" plots/history.py "$history" --last-two results/tmp/track-prev.csv results/tmp/track-cur.csv
split=$?
set -e
if [ "$split" -eq 0 ]; then
  set +e
  "$build/ptdp" compare results/tmp/track-prev.csv results/tmp/track-cur.csv --tolerance "$tolerance" --alpha "$alpha"
  status=$?
  set -e
  [ "$status" -le 1 ] || exit "$status"
elif [ "$split" -ne 3 ]; then
  exit "$split"
fi
"$py" plots/history.py "$history" "$plot"
if [ "$status" -ne 0 ]; then
  echo "track: throughput regression against the previous build (tolerance ${tolerance}%, significance ${alpha})"
  [ "${STRICT:-0}" = "1" ] && exit 1
fi
echo "track: appended to $history, plot in $plot"
