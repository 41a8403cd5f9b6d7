#!/usr/bin/env bash
# Bounded fuzzing with libFuzzer (clang): builds build-fuzz/ with -DPTDP_FUZZ=ON (ASan + UBSan,
# undefined behaviour fatal) and runs each fuzz target for a fixed time on a working corpus
# seeded from fuzz/<target>/, with the dictionary fuzz/<target>.dict.
#   scripts/fuzz.sh                       # every target, 60 s each
#   scripts/fuzz.sh 300 cli_fuzz          # one target, 300 s
#   PTDP_FUZZ_KEEP_GOING=1 scripts/fuzz.sh   # fork mode: record crashes and go on
#   scripts/fuzz.sh findings              # replay fuzz/findings/<target>/* (known bugs): each
#                                         # must pass once its bug is fixed (docs/ROBUSTNESS.md)
# Targets: indexed_dataset_fuzz (core/data), csv_reader_fuzz (core/results),
# hardware_fuzz (core/sim), cli_fuzz (experiments); they share fuzz/fuzz_util.h. Findings
# (crash-*, timeout-*, oom-*, leak-*) go to build-fuzz/artifacts/<target>/; reproduce one with
# build-fuzz/fuzz/<target> FILE.
# The exit code is 1 when any target left a finding. See docs/ROBUSTNESS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds=${1:-60}
shift || true
replay=""
if [ "$seconds" = "findings" ]; then replay=1; fi
targets=("$@")
if ((${#targets[@]} == 0)); then targets=(indexed_dataset_fuzz csv_reader_fuzz hardware_fuzz cli_fuzz); fi
jobs=${PTDP_FUZZ_JOBS:-2}

cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DPTDP_FUZZ=ON \
  -DPTDP_CUDA=OFF -DPTDP_MPI=OFF -DPTDP_BUILD_TESTS=OFF -DPTDP_BUILD_MICROBENCH=OFF >/dev/null
cmake --build build-fuzz -j "$jobs" --target "${targets[@]}"

export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$root/scripts/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export OMP_NUM_THREADS=1

status=0
if [ -n "$replay" ]; then
  for t in "${targets[@]}"; do
    for f in fuzz/findings/"$t"/*; do
      [ -f "$f" ] || continue
      mkdir -p build-fuzz/artifacts/replay
      if out=$("build-fuzz/fuzz/$t" -artifact_prefix=build-fuzz/artifacts/replay/ "$f" 2>&1); then
        echo "passes   $f"
      else
        echo "FAILS    $f: $(grep -m1 -E 'runtime error|ERROR: [A-Za-z]+Sanitizer|FINDING' <<<"$out" | cut -c1-200)"
        status=1
      fi
    done
  done
  exit $status
fi
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  artifacts=build-fuzz/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  touch "build-fuzz/$t.start"
  args=(-max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=16384
        -print_final_stats=1 -artifact_prefix="$artifacts/")
  if [ -f "fuzz/$t.dict" ]; then args+=(-dict="fuzz/$t.dict"); fi
  if [ -n "${PTDP_FUZZ_KEEP_GOING:-}" ]; then args+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1); fi
  echo "== $t: $seconds s, corpus $corpus (seeds fuzz/$t/)"
  # New inputs go to the first folder (the working corpus); the seeds stay as they are.
  "build-fuzz/fuzz/$t" "${args[@]}" "$corpus" "fuzz/$t" >"build-fuzz/$t.log" 2>&1 || true
  grep -E '^(stat::|INFO: seed corpus|INFO: fuzzed for|#[0-9]+[: ].*DONE)|ERROR: |SUMMARY: |FINDING|Test unit written|ParseDictionaryFile|INFO: found|CRASH|deadly signal|error in line' \
    "build-fuzz/$t.log" | awk '!seen[$0]++' | head -40 || true
  found=$(find "$artifacts" -type f -newer "build-fuzz/$t.start" | wc -l)
  echo "== $t: $(grep -E '^#[0-9]+' "build-fuzz/$t.log" | tail -1 | cut -c1-160)"
  echo "== $t: new findings in $artifacts: $found"
  if ((found > 0)); then status=1; fi
done
exit $status
