#!/usr/bin/env bash
# Installs the Debian packages ptdp builds with (scripts/setup_packages.sh) and builds it, Release,
# in build/. Idempotent: a second run installs nothing and rebuilds only what changed.
# Extra CMake arguments: PTDP_CMAKE_ARGS="-DPTDP_CUDA=OFF" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup_packages.sh

# The CUDA toolkit is not a Debian package here; when nvcc is present the CUDA code compiles too.
if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi

jobs=$(nproc)
# shellcheck disable=SC2086
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${PTDP_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$jobs"
echo "setup: built build/ptdp, build/core/ptdp_tests and build/bench_cpu"
