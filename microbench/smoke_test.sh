#!/usr/bin/env bash
# Smoke test of the microbenchmark suites: each runs one small case with a short minimum time,
# writes Google Benchmark JSON, and scripts/gbench_to_csv.py turns it into a CSV with the
# provenance columns filled. Benchmarks measure; this only checks that they run and convert.
#   microbench/smoke_test.sh BUILD_DIR
set -euo pipefail
build=$1
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
run() {  # suite filter
  "$build/$1" --benchmark_filter="$2" --benchmark_min_time=0.01 \
    --benchmark_out="$tmp/$1.json" --benchmark_out_format=json >"$tmp/$1.txt" 2>&1
  python3 "$src/scripts/gbench_to_csv.py" "$tmp/$1.json" >/dev/null
  rows=$(($(wc -l <"$tmp/$1.csv") - 1))
  [ "$rows" -ge 1 ] || { echo "smoke: $1 wrote no rows"; exit 1; }
  head -1 "$tmp/$1.csv" | grep -q ",git_sha,host,device," || { echo "smoke: $1.csv lacks provenance"; exit 1; }
  if grep -q "error_occurred" "$tmp/$1.json"; then echo "smoke: $1 reported an error"; cat "$tmp/$1.json"; exit 1; fi
  echo "smoke: $1 ok ($rows rows)"
}
run bench_gemm 'gpt-1.7b/t:8/proj'
run bench_kernels 'BM_ResidualAdd'
run bench_comm 'BM_Comm/(all_reduce|sendrecv)/ranks:2/bytes:1024/'
run bench_layer 'BM_LayerForward/t:8'
