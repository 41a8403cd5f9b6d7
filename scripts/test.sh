#!/usr/bin/env bash
# The test command: sets up and builds (scripts/setup.sh), then runs every test with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
ctest --test-dir build --output-on-failure -j "$(nproc)" --timeout 600
