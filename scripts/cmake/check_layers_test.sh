#!/usr/bin/env bash
# ctest Layering.AnUpwardIncludeStopsTheBuild: a file of layer 'backend' that includes a header
# of layer 'model' (a layer above it) fails scripts/cmake/check_layers.cmake with a message naming
# the file, the include and both layers; the same file without that include passes.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/core/backend"
printf '#include "core/tensor/tensor.h"\n#include "core/model/config.h"\n' >"$tmp/core/backend/planted.cpp"
echo "$tmp/core/backend/planted.cpp" >"$tmp/files"
check() {
  cmake -DLAYER=backend -DALLOWED=backend,tensor,common -DLAYERS_ALL=common,tensor,backend,model \
    -DROOT="$tmp" -DFILES="$tmp/files" -DSTAMP="$tmp/ok" -P "$root/scripts/cmake/check_layers.cmake" 2>&1
}
out=$(check)
rc=$?
if ((rc == 0)) || [[ -e "$tmp/ok" ]]; then echo "FAIL: the upward include passed"; exit 1; fi
want="layering: core/backend/planted.cpp includes \"core/model/config.h\": the layer 'backend' may include backend, tensor, common"
if [[ "$(echo "$out" | tr -s ' \n' ' ')" != *"$(echo "$want" | tr -s ' \n' ' ')"*"not 'model'"* ]]; then
  echo "FAIL: the message does not name the file, the include and both layers:"
  echo "$out"
  exit 1
fi
printf '#include "core/tensor/tensor.h"\n' >"$tmp/core/backend/planted.cpp"
out=$(check) || { echo "FAIL: a downward include was refused: $out"; exit 1; }
[[ -e "$tmp/ok" ]] || { echo "FAIL: no stamp after a clean check"; exit 1; }
echo "PASS: layering"
