#!/bin/sh
# ctests PyTorch.*: scripts/compare_pytorch.py's loss check on the CPU (f32, 10 steps) against the
# ptdp binary given as $1, for the case given as $2:
#   gpt             the tiny GPT, warm-up 3 and cosine decay to iteration 10 (the default)
#   llama           llama-tiny at a constant learning rate, losses within 1e-5
#   llama-schedule  llama-tiny with warm-up 3 and cosine decay to iteration 10, within 1e-5
#   llama-gqa       llama-tiny-gqa (grouped-query attention, 2 query groups for 4 heads), warm-up 3
#                   and cosine decay, within 1e-5
#   llama-gqa-flash the same with ptdp's block attention (--attention-backend flash: the flash form,
#                   online softmax, query groups read in place), within 1e-5
# Exits 77 (ctest: skipped) when no Python here has torch installed; $PTDP_PYTHON, python3 and
# /usr/bin/python3 are tried.
ptdp="$1"
case="${2:-gpt}"
here=$(dirname "$0")
case "$case" in
  gpt) args="--model tiny" ;;
  llama) args="--model llama-tiny --rtol 1e-5 --lr-warmup-iters 0 --lr-decay-iters 0" ;;
  llama-schedule) args="--model llama-tiny --rtol 1e-5 --lr-warmup-iters 3 --lr-decay-iters 10" ;;
  llama-gqa) args="--model llama-tiny-gqa --rtol 1e-5 --lr-warmup-iters 3 --lr-decay-iters 10" ;;
  llama-gqa-flash) args="--model llama-tiny-gqa --rtol 1e-5 --lr-warmup-iters 3 --lr-decay-iters 10 --ptdp-attention-backend flash" ;;
  *) echo "compare_pytorch_test.sh: unknown case '$case' (gpt, llama, llama-schedule, llama-gqa or llama-gqa-flash)" >&2; exit 2 ;;
esac
# The probe finds torch without importing it (an import takes 2 s, which the comparison then pays
# again); a torch that is found but does not import fails the comparison, it is not skipped.
for py in "${PTDP_PYTHON:-}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  if "$py" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)" >/dev/null 2>&1; then
    # shellcheck disable=SC2086 # $args is a list of words
    exec "$py" "$here/compare_pytorch.py" loss --device cpu --precision f32 $args --iters 10 --ptdp "$ptdp"
  fi
done
echo "SKIP: no Python here can import torch (Debian: apt-get install python3-torch)"
exit 77
