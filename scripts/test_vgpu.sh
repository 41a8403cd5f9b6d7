#!/usr/bin/env bash
# The CUDA path on the virtual GPU (vgpu/, docs/CUDA.md): builds ptdp with -DPTDP_VGPU=ON in
# build-vgpu/ (the CUDA sources as host C++ against vgpu's CUDA runtime, cuBLASLt and NCCL, with
# race, bounds and barrier checks) and runs every CUDA, NCCL and GPU-accept test and the vgpu's
# own tests there. None may be skipped: a skip fails this script. The tests of "no GPU here"
# behaviour run with VGPU_DEVICES=0 (a machine without GPUs; their ctest environment says so).
#   scripts/test_vgpu.sh               # the GPU tests (labels gpu, vgpu, nogpu)
#   scripts/test_vgpu.sh --all         # every test of the build, CPU ones too (scripts/test.sh)
#   scripts/test_vgpu.sh -R NcclComm   # extra arguments go to ctest
# Tests run side by side, one per core (ctest -j), each with OMP_NUM_THREADS=1 unless it sets its
# own (and then its PROCESSORS, so that ctest counts its cores).
# Missing barriers: the label "gpu" includes ThreadOrder.reverse/CudaKernels and
# ThreadOrder.shuffle/CudaKernels (vgpu/CMakeLists.txt), the CUDA backend's kernel tests
# (Cuda/CudaOps, CudaBackend) again under VGPU_THREAD_ORDER=reverse and shuffle (VGPU_SEED=1),
# about 10 s each; every other test runs in the forward order.
set -euo pipefail
cd "$(dirname "$0")/.."
all=0
if [[ "${1:-}" == "--all" ]]; then all=1; shift; fi
jobs=$(nproc)
# shellcheck disable=SC2086
cmake -S . -B build-vgpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTDP_VGPU=ON ${PTDP_CMAKE_ARGS:-} >/dev/null
cmake --build build-vgpu -j "$jobs"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# OpenBLAS's kernels for every test program: where this OpenBLAS does not know the CPU (it then
# runs its SSE3 fallback at a fifth of the speed), the set ptdp chooses (core/backend/cpu/blas_core.h).
if [[ -z "${OPENBLAS_CORETYPE:-}" ]]; then
  blas_core=$(build-vgpu/ptdp --version | sed -n 's/^blas: .*(OPENBLAS_CORETYPE=\([A-Za-z0-9]*\), set by ptdp.*/\1/p')
  if [[ -n "$blas_core" ]]; then
    export OPENBLAS_CORETYPE=$blas_core
    echo "test_vgpu.sh: OPENBLAS_CORETYPE=$blas_core (this OpenBLAS does not know the CPU)"
  fi
fi

# Labels (scripts/cmake/GtestSuites.cmake): "gpu" for the tests of the CUDA path (names with Cuda,
# Nccl, Gpu or vgpu), "nogpu" for those of a machine without a GPU, "vgpu" for the harness's own.
gpu_labels='^(gpu|vgpu|nogpu)$'
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rm -rf build-vgpu/*/suite-results  # this run's results only
status=0
select=(-L "$gpu_labels")
((all)) && select=()
ctest --test-dir build-vgpu --output-on-failure --timeout 600 -j "$jobs" "${select[@]}" "$@" | tee "$log" ||
  status=$?

# No test of the GPU labels may be skipped: neither a ctest skip nor a GoogleTest skip inside a
# suite (that leaves its ctest test passed: the suite's JSON results say it).
# One pass over the log and the JSON results (scripts/cmake/GtestSuites.cmake).
skipped=()
if ! list=$(ctest --test-dir build-vgpu -N -L "$gpu_labels" "$@" | sed -nE 's/^ *Test +#[0-9]+: //p' |
  python3 -c '
import glob, json, re, sys
log, build = open(sys.argv[1]).read(), sys.argv[2]
for name in sys.stdin.read().split("\n"):
    if not name:
        continue
    if re.search(r"Test +#[0-9]+: " + re.escape(name) + r" \.*(\*\*\*Skipped|\*\*\*Not Run)", log):
        print(name)
    for f in glob.glob(build + "/*/suite-results/" + re.sub(r"[^A-Za-z0-9_.-]", "_", name) + ".json"):
        for s in json.load(open(f))["testsuites"]:
            for t in s["testsuite"]:
                if t.get("result") == "SKIPPED":
                    print(s["name"] + "." + t["name"])
' "$log" build-vgpu); then
  echo "test_vgpu: could not check the results for skipped tests" >&2
  status=1
fi
if [[ -n "$list" ]]; then mapfile -t skipped <<<"$list"; fi
if ((${#skipped[@]})); then
  echo "test_vgpu: tests were skipped in the vgpu build (every CUDA and NCCL test must run there):" >&2
  printf '  skipped: %s\n' "${skipped[@]}" >&2
  status=1
fi
exit "$status"
