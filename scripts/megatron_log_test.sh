#!/bin/sh
# ctests Megatron.LogLine and Megatron.TensorBoard: scripts/megatron_log_test.py against the ptdp
# binary $1 for the case $2 (log, tensorboard). The tensorboard case needs a Python with the
# tensorboard package: $PTDP_TB_PYTHON, the environment scripts/setup_hf_venv.sh made in $3
# (scripts/test.sh makes it in the build folder), python3 or /usr/bin/python3, the first that has
# it; exits 77 (ctest: skipped) when none has. The log case runs on any python3.
ptdp="$1"
case="$2"
venv="${3:-}"
here=$(dirname "$0")
if [ "$case" = log ]; then exec python3 "$here/megatron_log_test.py" --ptdp "$ptdp" log; fi
for py in "${PTDP_TB_PYTHON:-}" "${venv:+$venv/bin/python}" python3 /usr/bin/python3; do
  [ -n "$py" ] || continue
  if "$py" -c "import importlib.util as u, sys; sys.exit(u.find_spec('tensorboard') is None)" >/dev/null 2>&1; then
    exec "$py" "$here/megatron_log_test.py" --ptdp "$ptdp" "$case"
  fi
done
echo "SKIP: no Python here has tensorboard (scripts/setup_hf_venv.sh DIR installs it from PyPI; then PTDP_TB_PYTHON=DIR/bin/python)"
exit 77
