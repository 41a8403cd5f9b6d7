#!/bin/sh
# ctest Scripts.ExportHfGathersShardedSaves: ptdp_tools.checkpoint.gather_test against the ptdp binary
# $1, under the first of $PTDP_PYTHON, python3 and /usr/bin/python3 that has numpy (export-hf's
# need). Exits 77 (ctest: skipped) when none has it.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/python_with.sh"
py=$(python_with numpy) || { echo "SKIP: no Python here has numpy (Debian: python3-numpy)"; exit 77; }
cd "$here" && PTDP="$1" exec "$py" -m unittest -v ptdp_tools.checkpoint.gather_test
