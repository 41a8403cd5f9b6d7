#!/usr/bin/env bash
# Makes DIR a Python environment with Hugging Face transformers (pinned) beside Debian's torch and
# numpy, for the export-hf tests (ctest PyTorch.ExportHf*: scripts/export_hf_test.sh), and with
# tensorboard (pinned), whose EventAccumulator reads the event files of --tensorboard-dir back
# (ctest Megatron.*: scripts/megatron_log_test.sh). Debian has neither package, so they come from
# PyPI; without PyPI (no network) this fails and those tests are skipped, saying why. tensorboard
# is installed first and marked on its own (DIR/tensorboard-ready), so a machine without Debian's
# torch still has it. Idempotent: DIR/ready marks a complete environment.
#   scripts/setup_hf_venv.sh DIR
set -euo pipefail
dir=${1:?usage: setup_hf_venv.sh DIR}
transformers_version=4.40.2  # the newest that supports Debian 12's torch 1.13
tensorboard_version=2.18.0
[[ -f "$dir/ready" ]] && grep -qx "transformers==$transformers_version" "$dir/ready" &&
  grep -qx "tensorboard==$tensorboard_version" "$dir/ready" && exit 0
rm -rf "$dir"
/usr/bin/python3 -m venv --system-site-packages "$dir"
"$dir/bin/python" -m pip install -q --disable-pip-version-check --timeout 20 --retries 1 \
  "tensorboard==$tensorboard_version"
"$dir/bin/python" -c "from tensorboard.backend.event_processing import event_accumulator"
echo "tensorboard==$tensorboard_version" > "$dir/tensorboard-ready"
"$dir/bin/python" -m pip install -q --disable-pip-version-check --timeout 20 --retries 1 \
  "transformers==$transformers_version" safetensors
"$dir/bin/python" -c "import transformers, safetensors, torch, numpy"
printf 'transformers==%s\ntensorboard==%s\n' "$transformers_version" "$tensorboard_version" > "$dir/ready"
