#!/usr/bin/env bash
# The main job. Today it builds ptdp, turns real text (the GPL-3 licence, on every Debian
# machine) into a Megatron dataset and trains the `small` GPT on it on the CPU, appending the
# result row to results/train_small.csv. Later it will reproduce every figure of the paper.
# Knobs: ITERS (default 200), OUT (default results/train_small.csv).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

iters=${ITERS:-200}
out=${OUT:-results/train_small.csv}
text=/usr/share/common-licenses/GPL-3
mkdir -p build/data "$(dirname "$out")"

build/ptdp preprocess --input "$text" --output-prefix build/data/gpl3
build/ptdp train --model small --data build/data/gpl3 --micro-batch 4 --global-batch 8 \
  --iters "$iters" --warmup 2 --lr 1e-3 --lr-warmup-iters 20 --lr-decay-iters "$iters" --min-lr 1e-4 \
  --seed 1234 --log-interval 10 --experiment train-small --csv "$out"
echo "reproduce: results in $out"
