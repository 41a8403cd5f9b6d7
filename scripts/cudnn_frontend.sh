#!/usr/bin/env bash
# Fetches the headers of cuDNN's C++ graph front end (NVIDIA's cudnn-frontend, header-only), pinned,
# from PyPI's nvidia-cudnn-frontend wheel (Debian has no package of it), into
# .deps/cudnn-frontend-VERSION/include, and prints that folder. A CUDA build (not the virtual GPU's)
# finds them there and compiles cuDNN's fused attention (--attention-backend cudnn); without them
# that path is left out and refused with the reason. Only the build needs them: the frontend is
# compiled into ptdp, which loads libcudnn itself at run time (core/backend/cuda/cudnn_attention.h).
# Idempotent; exit 1 (and nothing left half-extracted) when the wheel cannot be fetched or its
# SHA-256 is not the pinned one.
#   scripts/cudnn_frontend.sh        # prints the include folder
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.32.0
# The one wheel fetched (any wheel holds the same headers): CPython 3.11, manylinux_2_28 x86-64.
sha256=c6006556017a4d1c914c52a556c71b1267f2d6a0500f742e7b4edef539878df0
dest=.deps/cudnn-frontend-$version
if [[ -f "$dest/include/cudnn_frontend.h" ]]; then
  echo "$PWD/$dest/include"
  exit 0
fi
py=$(command -v python3 || true)
[[ -n "$py" ]] && "$py" -m pip --version >/dev/null 2>&1 ||
  { echo "cudnn_frontend.sh: no python3 with pip to fetch nvidia-cudnn-frontend==$version" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 --implementation cp \
  --abi cp311 --platform manylinux_2_28_x86_64 --timeout 30 --retries 1 -d "$tmp" \
  "nvidia-cudnn-frontend==$version" >"$tmp/log" 2>&1; then
  echo "cudnn_frontend.sh: pip could not fetch nvidia-cudnn-frontend==$version:" >&2
  tail -3 "$tmp/log" >&2
  exit 1
fi
whl=$(ls "$tmp"/*.whl)
got=$(sha256sum "$whl" | cut -d' ' -f1)
[[ "$got" == "$sha256" ]] ||
  { echo "cudnn_frontend.sh: $(basename "$whl"): SHA-256 $got, not the pinned $sha256" >&2; exit 1; }
mkdir -p "$tmp/x" .deps
"$py" - "$whl" "$tmp/x" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("include/")])
PY
[[ -f "$tmp/x/include/cudnn_frontend.h" ]] ||
  { echo "cudnn_frontend.sh: $(basename "$whl") holds no include/cudnn_frontend.h" >&2; exit 1; }
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
mv "$tmp/x/include" "$dest.tmp/include"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "$PWD/$dest/include"
