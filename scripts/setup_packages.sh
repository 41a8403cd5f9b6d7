#!/usr/bin/env bash
# Installs the Debian packages ptdp builds and tests with, only those missing (apt-get, as root or
# through sudo). scripts/setup.sh and scripts/device_bundle.sh call it.
set -euo pipefail

packages=(cmake ninja-build g++ pkg-config git
          libopenmpi-dev openmpi-bin libopenblas-openmp-dev
          libgtest-dev libbenchmark-dev libcli11-dev libtomlplusplus-dev libfccp-dev libfmt-dev
          nlohmann-json3-dev  # compare --format json
          libxml2-utils  # xmllint: compare --format junit checked against the Ant JUnit schema (its tests)
          libssl-dev  # MD5 of Megatron's index cache names (core/data/megatron_description)
          libboost-context-dev  # fibers of the virtual GPU's kernel executor (vgpu/, scripts/test_vgpu.sh)
          libsentencepiece-dev sentencepiece  # preprocess --tokenizer-model; spm_train/spm_encode for its tests
          libpcre2-dev  # GPT-2's pre-tokenizer regex: preprocess --tokenizer-type GPT2BPETokenizer
          python3 python3-matplotlib
          python3-scipy  # plots/history.py --changes (its tests)
          python3-plotly  # plots/history.py's page (plotly.js inlined: it works offline)
          chromium  # its test in a real headless browser (plots/page_test.sh)
          python3-torch)  # CPU PyTorch for scripts/compare_pytorch.py's loss check (docs/PYTORCH.md)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
