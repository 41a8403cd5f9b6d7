#!/usr/bin/env bash
# Installs the Debian packages ptdp builds with (only those missing) and builds it, Release,
# in build/. Idempotent: a second run installs nothing and rebuilds only what changed.
# Extra CMake arguments: PTDP_CMAKE_ARGS="-DPTDP_CUDA=OFF" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ pkg-config git
          libopenmpi-dev openmpi-bin libopenblas-openmp-dev
          libgtest-dev libbenchmark-dev libcli11-dev libtomlplusplus-dev libfccp-dev libfmt-dev
          libboost-context-dev  # fibers of the virtual GPU's kernel executor (vgpu/, scripts/test_vgpu.sh)
          libsentencepiece-dev sentencepiece  # preprocess --tokenizer-model; spm_train/spm_encode for its tests
          python3 python3-matplotlib
          python3-torch)  # CPU PyTorch for scripts/compare_pytorch.py's loss check (docs/PYTORCH.md)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA toolkit is not a Debian package here; when nvcc is present the CUDA code compiles too.
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

jobs=$(nproc)
# shellcheck disable=SC2086
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${PTDP_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$jobs"
echo "setup: built build/ptdp, build/core/ptdp_tests and build/bench_cpu"
