#!/usr/bin/env bash
# The test command: sets up and builds (scripts/setup.sh), then runs every test with ctest, then
# the CUDA path on the virtual GPU (scripts/test_vgpu.sh: its own build in build-vgpu/).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
# One test process at a time: each already uses every core through OpenMP and OpenBLAS.
ctest --test-dir build --output-on-failure --timeout 600
scripts/test_vgpu.sh
