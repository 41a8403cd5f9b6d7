#!/usr/bin/env bash
# The CUDA path on the virtual GPU (vgpu/, docs/CUDA.md): builds ptdp with -DPTDP_VGPU=ON in
# build-vgpu/ (the CUDA sources as host C++ against vgpu's CUDA runtime, cuBLASLt and NCCL, with
# race, bounds and barrier checks) and runs every CUDA, NCCL and GPU-accept test and the vgpu's
# own tests there. None may be skipped: a skip fails this script. The tests of "no GPU here"
# behaviour run once more with VGPU_DEVICES=0 (a machine without GPUs).
#   scripts/test_vgpu.sh               # after scripts/setup.sh (scripts/test.sh calls it)
#   scripts/test_vgpu.sh -R NcclComm   # extra arguments go to both ctest runs
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
# shellcheck disable=SC2086
cmake -S . -B build-vgpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTDP_VGPU=ON -DPTDP_BUILD_MICROBENCH=OFF \
  ${PTDP_CMAKE_ARGS:-} >/dev/null
cmake --build build-vgpu -j "$jobs"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}

# Labels (scripts/cmake/GtestSuites.cmake): "gpu" for the tests of the CUDA path (names with Cuda,
# Nccl, Gpu or vgpu), "nogpu" for those of a machine without a GPU, "vgpu" for the harness's own.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rm -rf build-vgpu/*/suite-results  # this run's results only
status=0
run() { ctest --test-dir build-vgpu --output-on-failure --timeout 600 "$@" | tee -a "$log" || status=$?; }
run -L '^vgpu$' "$@"                # the harness's own tests (ctest -L is a regex)
run -L '^gpu$' "$@"                 # ptdp's CUDA, NCCL and GPU-accept tests, the GPU session's dry run
VGPU_DEVICES=0 run -L '^nogpu$' "$@"  # a machine without GPUs
# A GoogleTest skip inside a suite leaves its ctest test passed: the suites' JSON results say it.
skipped=$(grep -l '"result": "SKIPPED"' build-vgpu/*/suite-results/*.json 2>/dev/null || true)
if grep -q '\*\*\*Skipped\|Not Run' "$log" || [[ -n "$skipped" ]]; then
  echo "test_vgpu: tests were skipped in the vgpu build (every CUDA and NCCL test must run there):" >&2
  grep '\*\*\*Skipped\|Not Run' "$log" >&2
  for f in $skipped; do
    python3 -c 'import json, sys
for s in json.load(open(sys.argv[1]))["testsuites"]:
    for t in s["testsuite"]:
        if t.get("result") == "SKIPPED": print("  skipped:", s["name"] + "." + t["name"])' "$f" >&2 || echo "  $f" >&2
  done
  status=1
fi
exit "$status"
