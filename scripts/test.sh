#!/usr/bin/env bash
# The test command. Everything runs in one build, build-vgpu/ (scripts/test_vgpu.sh --all): the CPU
# code and the CUDA code, the latter as host C++ against the virtual GPU (vgpu/), so that every test
# (CPU, CUDA, NCCL, MPI, CLI, documents) runs here without a GPU, side by side on every core. Where
# nvcc is installed, the CUDA sources are also compiled by nvcc for a real GPU (the CUDA files of
# the backend and communicator libraries, in build-nvcc/) so that what only nvcc and the real CUDA
# headers can reject is caught too.
#   scripts/test.sh                   # everything (CI runs this): Debian packages, builds, every test
#   scripts/test.sh --changed [REV] [--gpu]
#                                     # before a commit: rebuild build-vgpu/ and run the tests of the
#                                     # folders changed since REV (default HEAD, uncommitted and
#                                     # untracked files included; for scripts/ and plots/ the
#                                     # Python tools' tests, Docs.* and PyTorch.*); the layering
#                                     # tests always run.
#                                     # Their GPU suites (the virtual GPU's) run when the change
#                                     # touches the CUDA path (core/backend/cuda, core/comm/nccl,
#                                     # vgpu/, .cu files) or with --gpu; otherwise the device
#                                     # plumbing of the touched code is checked on the CPU (the
#                                     # host-device backend's layouts) and the GPU suites wait for
#                                     # the full run
set -euo pipefail
case "${1:-}" in
  -h | --help) sed -nE '2,/^set -euo/{/^#/s/^# ?//p}' "$0"; exit 0 ;;
esac
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--changed" ]]; then
  shift
  force_gpu=0
  base=HEAD
  for a in "$@"; do
    case $a in
      --gpu) force_gpu=1 ;;
      -*) echo "test.sh --changed: unknown option $a (known: --gpu)" >&2; exit 2 ;;
      *) base=$a ;;
    esac
  done
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
  grep -qE '^(core/backend/cuda|core/comm/nccl|vgpu)/|\.cu$|cuda|nccl|gpu' <<<"$(printf '%s\n' "${files[@]}")" && gpu=1
  echo "test.sh --changed: ${#files[@]} file(s) since $base; suites: ${suites:-none}; virtual GPU: $( ((gpu)) && echo yes || echo no)"
  without_gpu=()
  if ((!gpu && !force_gpu)); then
    without_gpu=(-LE '^gpu$')
    echo "test.sh --changed: no change to the CUDA path: the suites' GPU parts are left to the full run (--gpu runs them)"
  fi
  [[ -f build-vgpu/CMakeCache.txt ]] || { echo "test.sh --changed: no build-vgpu/ yet: run scripts/test.sh once" >&2; exit 2; }
  regex='^Layering\.'
  [[ -n "$suites" ]] && regex="$regex|(^|/)($suites)((:gpu|:nogpu)?(@[0-9]+)?\$|\.)"
  # The Python tools (scripts/, plots/): their tests, the documents' checks and the PyTorch comparisons.
  grep -qE '^(scripts|plots)/' <<<"$(printf '%s\n' "${files[@]}")" && regex="$regex|^(Scripts|History|Track|Docs|PyTorch)\."
  status=0
  scripts/test_vgpu.sh --all -R "$regex" "${without_gpu[@]}" || status=1
  # A change to the CUDA path (vgpu/ included) that touched no suite's folder: every GPU test.
  if ((gpu)) && [[ -z "$suites" ]]; then scripts/test_vgpu.sh || status=1; fi
  exit "$status"
fi

scripts/setup_packages.sh
# transformers for the export-hf tests (PyPI: Debian has none), fetched while the builds below run
# (mostly network; the tests wait for it); without network those tests are skipped.
hf_log=/tmp/ptdp-hf-venv.$$.log
timeout 300 scripts/setup_hf_venv.sh build-vgpu/hf-venv >"$hf_log" 2>&1 &
hf_pid=$!
if [ -x /usr/local/cuda/bin/nvcc ]; then  # before the vgpu build (beside it, the run was no faster)
  export PATH="/usr/local/cuda/bin:$PATH"
  # Only the sources that use CUDA, cuBLAS or NCCL (backend/cuda/, comm/nccl/): the rest of those
  # libraries is the same C++ that build-vgpu/ compiles. For one architecture (no source of ptdp
  # depends on __CUDA_ARCH__, so a second one rejects nothing more) and without precompiled
  # headers (each source must include what it uses), in build-nvcc/: the user's build/ keeps its
  # own settings.
  # cuDNN's front end (PyPI, pinned; scripts/cudnn_frontend.sh): with it cudnn_attention.cpp compiles
  # too. Without network it is left out, said here.
  cudnn_fe=1
  scripts/cudnn_frontend.sh >/dev/null || {
    cudnn_fe=0
    echo "test.sh: cuDNN's front end could not be fetched: build-nvcc/ compiles without cudnn_attention.cpp" >&2
  }
  # shellcheck disable=SC2086
  cmake -S . -B build-nvcc -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON -DPTDP_BUILD_TESTS=OFF -DPTDP_BUILD_MICROBENCH=OFF ${PTDP_CMAKE_ARGS:-} >/dev/null
  nvcc_targets=$(ninja -C build-nvcc -t targets all)
  mapfile -t cuda_objects < <(sed -nE 's#^(core/CMakeFiles/ptdp_(backend|comm)\.dir/(backend/cuda|comm/nccl)/[^:]*\.o):.*#\1#p' \
    <<<"$nvcc_targets")
  ((${#cuda_objects[@]})) || { echo "test.sh: no CUDA sources found in build-nvcc/build.ninja" >&2; exit 1; }
  # With cuDNN's front end, also ptdp_cudnn_check (cudnn_attention.cpp): the cuDNN attention graphs
  # the GPU session runs, through the front end's checks for sm_90 (no GPU needed; libcudnn where
  # the toolkit has it, else said and skipped).
  cudnn_check=()
  # (grep reads a string, not ninja's pipe: grep -q leaving early would kill ninja with SIGPIPE, a
  # failure under pipefail that once left the check out of CI)
  if grep -q '^ptdp_cudnn_check:' <<<"$nvcc_targets"; then
    cudnn_check=(ptdp_cudnn_check)
  elif ((cudnn_fe)); then
    echo "test.sh: cuDNN's front end is in .deps/ but build-nvcc/ has no ptdp_cudnn_check target" >&2
    exit 1
  fi
  ninja -C build-nvcc -j "$(nproc)" "${cuda_objects[@]}" "${cudnn_check[@]}"
  echo "test.sh: the $((${#cuda_objects[@]} + ${#cudnn_check[@]})) CUDA sources compile with nvcc ($(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm_90)"
  if ((${#cudnn_check[@]})); then build-nvcc/core/ptdp_cudnn_check; fi
fi
# The virtual-GPU build (test_vgpu.sh builds it again, a no-op then) while the packages download.
# shellcheck disable=SC2086
cmake -S . -B build-vgpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTDP_VGPU=ON ${PTDP_CMAKE_ARGS:-} >/dev/null
cmake --build build-vgpu -j "$(nproc)"
if wait "$hf_pid"; then
  echo "test.sh: $(paste -sd" " build-vgpu/hf-venv/ready) in build-vgpu/hf-venv (the export-hf and TensorBoard tests)"
else
  echo "test.sh: no transformers from PyPI (the export-hf tests will be skipped): $(tail -1 "$hf_log")"
fi
rm -f "$hf_log"
scripts/test_vgpu.sh --all
