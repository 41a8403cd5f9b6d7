#!/usr/bin/env bash
# Everything that needs a GPU, in stages that each fit a 10-minute call, writing what it
# measures under OUT (default results/gpu; each file carries git sha, host and device):
#
#   scripts/gpu_session.sh build     # CUDA build in build-gpu/ (sm_80;sm_90), no tests
#   scripts/gpu_session.sh test      # CUDA kernel tests against the CPU backend, the PTD-P grid on one GPU
#   scripts/gpu_session.sh bench     # GEMMs, fused kernels, copies, NCCL, one layer: Google Benchmark JSON -> CSV
#   scripts/gpu_session.sh bench bench_nccl bench_layer_cuda   # only these suites (one 10-minute call each)
#   scripts/gpu_session.sh pytorch   # compare_pytorch.py: losses (f32, bf16) and throughput vs eager/compile
#   scripts/gpu_session.sh fig7      # the paper's Figure 7 (b = 1..16 on one GPU), ptdp reproduce --mode run
#   scripts/gpu_session.sh accept    # ptdp accept on the matching GPU profile (h100-dgx or h200)
#   scripts/gpu_session.sh all       # every stage in this order
#
# Stages after `build` reuse build-gpu/. Logs go to OUT/logs/. Exit code: the first failing
# stage's (later stages still run under `all`). See docs/CUDA.md.
set -uo pipefail
cd "$(dirname "$0")/.."
stage=${1:-all}
out=${OUT:-results/gpu}
build=${PTDP_GPU_BUILD:-build-gpu}
jobs=${PTDP_JOBS:-$(nproc)}
mkdir -p "$out/logs"
status=0

log() { echo "[gpu_session $(date -u +%H:%M:%S)] $*"; }
run_stage() {  # name command...: runs it with its output in OUT/logs/NAME.log and on the terminal
  local name=$1
  shift
  log "$name: $*"
  "$@" 2>&1 | tee "$out/logs/$name.log"
  local rc=${PIPESTATUS[0]}
  log "$name: exit $rc"
  if ((rc != 0 && status == 0)); then status=$rc; fi
  return "$rc"
}

gpu_name() { nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1; }

do_build() {
  command -v nvidia-smi >/dev/null && nvidia-smi -L
  run_stage configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTDP_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=80;90"
  run_stage build cmake --build "$build" -j "$jobs"
}

do_test() {
  # Kernel tests first (fast, and everything else rests on them), then the whole suite.
  run_stage test_cuda_kernels "$build/core/ptdp_tests" --gtest_filter='Cuda*:CudaAllocator*:CudaGemm*:CudaErrors*'
  run_stage test_cuda_grid "$build/core/ptdp_tests" --gtest_filter='Grid/CudaPtdp.*'
  run_stage test_all ctest --test-dir "$build" --output-on-failure -j 4 -E 'Mpi|CliMpi'
}

do_bench() {  # [SUITE...]: default every CUDA suite
  local suites=("$@")
  ((${#suites[@]})) || suites=(bench_gemm_cuda bench_kernels_cuda bench_copy_cuda bench_nccl bench_layer_cuda)
  for suite in "${suites[@]}"; do
    if [[ ! -x "$build/$suite" ]]; then  # bench_nccl is built only where NCCL was found
      log "$suite: not built in $build, skipped"
      continue
    fi
    run_stage "$suite" "$build/$suite" --benchmark_out="$out/$suite.json" --benchmark_out_format=json &&
      python3 scripts/gbench_to_csv.py "$out/$suite.json"
  done
}

do_pytorch() {
  run_stage pytorch_loss_f32 python3 scripts/compare_pytorch.py loss --device cuda --precision f32 --ptdp "$build/ptdp"
  run_stage pytorch_loss_bf16 python3 scripts/compare_pytorch.py loss --device cuda --precision bf16 --ptdp "$build/ptdp"
  run_stage pytorch_throughput python3 scripts/compare_pytorch.py throughput --device cuda --precision bf16 \
    --ptdp "$build/ptdp" --out "$out/compare_pytorch.csv"
}

do_fig7() {
  run_stage fig7 "$build/ptdp" reproduce fig7 --mode run --scale paper --out "$out"
}

do_accept() {
  local name profile
  name=$(gpu_name)
  case "$name" in
    *H200*) profile=h200 ;;
    *H100*) profile=h100-dgx ;;
    *) log "accept: no acceptance profile for '$name'"; return 0 ;;
  esac
  # The first GPU run records the CUDA golden losses (results/golden/tiny_cuda.csv); later runs
  # are checked against them.
  if [[ ! -f results/golden/tiny_cuda.csv ]]; then
    run_stage golden_cuda "$build/ptdp" accept --hardware "$profile" --checks train \
      --write-golden results/golden/tiny_cuda.csv --out "$out/golden_$profile.json"
  fi
  run_stage accept "$build/ptdp" accept --hardware "$profile" --out "$out/accept_$profile.json"
}

case "$stage" in
  build) do_build ;;
  test) do_test ;;
  bench) do_bench "${@:2}" ;;
  pytorch) do_pytorch ;;
  fig7) do_fig7 ;;
  accept) do_accept ;;
  all) do_build && { do_test; do_bench; do_pytorch; do_fig7; do_accept; } ;;
  *) echo "gpu_session.sh: unknown stage '$stage' (build, test, bench, pytorch, fig7, accept, all)" >&2; exit 2 ;;
esac
exit "$status"
