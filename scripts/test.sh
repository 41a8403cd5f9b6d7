#!/usr/bin/env bash
# The test command: sets up and builds (scripts/setup.sh), then runs every test with ctest, then
# the CUDA path on the virtual GPU (scripts/test_vgpu.sh: its own build in build-vgpu/).
#   scripts/test.sh                   # everything (CI runs this)
#   scripts/test.sh --changed [REV]   # before a commit: rebuild what changed since REV (default
#                                     # HEAD, uncommitted and untracked files included) and run the
#                                     # tests of the folders it touched (both builds where a CUDA
#                                     # file or a GPU test changed); the layering check runs as always
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--changed" ]]; then
  base=${2:-HEAD}
  git rev-parse --verify --quiet "$base^{commit}" >/dev/null ||
    { echo "test.sh: --changed $base: not a commit" >&2; exit 2; }
  mapfile -t files < <({ git diff --name-only "$base"; git ls-files --others --exclude-standard; } | sort -u)
  if ((${#files[@]} == 0)); then echo "test.sh --changed: nothing changed since $base"; exit 0; fi
  # The suites defined in the test files of every touched folder of core/, experiments/ and vgpu/.
  mapfile -t dirs < <(printf '%s\n' "${files[@]}" | grep -E '^(core|experiments|vgpu)/' | xargs -r -n1 dirname | sort -u)
  suites=$(for d in "${dirs[@]}"; do
    [[ -d "$d" ]] || continue
    find "$d" -maxdepth 1 -name '*_test.cpp' -print0 | xargs -0 -r grep -hoE '^(TEST|TEST_F|TEST_P)\(\s*[A-Za-z0-9_]+' |
      sed -E 's/.*\(\s*//'
  done | sort -u | paste -sd'|')
  gpu=0
  printf '%s\n' "${files[@]}" | grep -qE '^(core/backend/cuda|core/comm/nccl|vgpu)/|\.cu$|cuda|nccl|gpu' && gpu=1
  echo "test.sh --changed: ${#files[@]} file(s) since $base; suites: ${suites:-none}; virtual GPU: $( ((gpu)) && echo yes || echo no)"
  if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
  [[ -f build/CMakeCache.txt ]] || { echo "test.sh --changed: no build/ yet: run scripts/test.sh once" >&2; exit 2; }
  cmake --build build -j "$(nproc)"
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
  status=0
  # Layering and the other tests of the build itself always run; then the touched suites.
  ctest --test-dir build --output-on-failure --timeout 600 -R '^Layering\.' || status=1
  if [[ -n "$suites" ]]; then
    ctest --test-dir build --output-on-failure --timeout 600 -R "(^|/)($suites)(:gpu|:nogpu|\.|$)" || status=1
    if ((gpu)); then scripts/test_vgpu.sh -R "(^|/)($suites)(:gpu|:nogpu|\.|$)" || status=1; fi
  elif ((gpu)); then
    scripts/test_vgpu.sh || status=1
  fi
  exit "$status"
fi

scripts/setup.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
# One test process at a time: each already uses every core through OpenMP and OpenBLAS.
ctest --test-dir build --output-on-failure --timeout 600
scripts/test_vgpu.sh
