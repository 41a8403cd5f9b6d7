#!/bin/sh
# ctest PyTorch.TinyModelLossesAgreeOverTenSteps: scripts/compare_pytorch.py's loss check on the
# CPU (tiny model, f32, 10 steps) against the ptdp binary given as $1. Exits 77 (ctest: skipped)
# when no Python here can import torch; $PTDP_PYTHON, python3 and /usr/bin/python3 are tried.
ptdp="$1"
here=$(dirname "$0")
for py in "${PTDP_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  if "$py" -c "import torch" >/dev/null 2>&1; then
    exec "$py" "$here/compare_pytorch.py" loss --device cpu --precision f32 --model tiny --iters 10 --ptdp "$ptdp"
  fi
done
echo "SKIP: no Python here can import torch (Debian: apt-get install python3-torch)"
exit 77
