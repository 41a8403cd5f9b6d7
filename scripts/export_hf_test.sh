#!/bin/sh
# ctests PyTorch.ExportHf*: scripts/export_hf_test.py against the ptdp binary $1 for the case $2
# (gpt, llama, llama-gqa). It needs a Python with transformers, safetensors and torch: $PTDP_HF_PYTHON,
# the environment scripts/setup_hf_venv.sh made in $3 (scripts/test.sh makes it in the build
# folder), python3 or /usr/bin/python3, the first that has all three. Exits 77 (ctest: skipped)
# when none has them.
ptdp="$1"
case="$2"
venv="${3:-}"
here=$(dirname "$0")
for py in "${PTDP_HF_PYTHON:-}" "${venv:+$venv/bin/python}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  if "$py" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('transformers', 'safetensors', 'torch')))" >/dev/null 2>&1; then
    exec "$py" "$here/export_hf_test.py" --ptdp "$ptdp" --case "$case"
  fi
done
echo "SKIP: no Python here has transformers, safetensors and torch (scripts/setup_hf_venv.sh DIR makes one from PyPI; then PTDP_HF_PYTHON=DIR/bin/python)"
exit 77
