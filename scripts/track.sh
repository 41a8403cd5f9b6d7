#!/usr/bin/env bash
# Throughput regression tracking. Runs one fixed training benchmark with the current build,
# appends its result row (git sha, host, device, timestamp included) to results/history.csv,
# compares it with the previous run of the same configuration (`ptdp compare`, report only
# unless STRICT=1) and plots throughput over commits to plots/history.png.
# Knobs: TRACK_ARGS (the benchmark's flags), HISTORY, PLOT, TOLERANCE (percent, default 10),
# STRICT=1 (exit 1 on a regression), BUILD (build folder, default build; built by
# scripts/setup.sh when it has no ptdp).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BUILD:-build}
history=${HISTORY:-results/history.csv}
plot=${PLOT:-plots/history.png}
tolerance=${TOLERANCE:-10}
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
# shellcheck disable=SC2086
"$build/ptdp" train $args --experiment track --log-interval 100 --csv "$history"

status=0
set +e
"$py" plots/history.py "$history" --last-two results/tmp/track-prev.csv results/tmp/track-cur.csv
split=$?
set -e
if [ "$split" -eq 0 ]; then
  set +e
  "$build/ptdp" compare results/tmp/track-prev.csv results/tmp/track-cur.csv --tolerance "$tolerance"
  status=$?
  set -e
  [ "$status" -le 1 ] || exit "$status"
elif [ "$split" -ne 3 ]; then
  exit "$split"
fi
"$py" plots/history.py "$history" "$plot"
if [ "$status" -ne 0 ]; then
  echo "track: throughput regression against the previous run (tolerance ${tolerance}%)"
  [ "${STRICT:-0}" = "1" ] && exit 1
fi
echo "track: appended to $history, plot in $plot"
