# Sourced by scripts/gpu_session.sh: real NCCL with several ranks on the one GPU (NCCL 2.30 and
# later, NCCL_MULTI_RANK_GPU_ENABLE=1; the issue of many ranks per GPU is docs/CUDA.md's "NCCL on one
# GPU"). The NCCL used is the newest of 2.30 or later that the probe found (nccl_multi_rank in
# probe.txt): the machine's own, PyTorch's wheel, or the one given with --nccl TAR
# (scripts/nccl_for_device.sh). Its folder goes first on the library path of ptdp's programs alone
# (PTDP_NCCL_DIR, read by the bundle's wrappers). Stages:
#   test_nccl          the NCCL communicator's tests (collectives, p2p, splits, abort, a rank that
#                      stops inside a collective) and every NCCL layout (t, p, d, v, ZeRO-1/3, SP,
#                      GQA, uneven stages) against the CPU backend, 2 to 8 thread ranks on the GPU
#   nccl_train         ptdp train --comm nccl, t = p = d = 2 (8 ranks): losses equal the CPU backend's
#   sanitize_nccl      compute-sanitizer memcheck over one NCCL layout
#   bench_nccl_shared  bench_nccl with 4 ranks on the GPU: every collective ptdp uses, checked
#                      element by element, same-GPU times (not link bandwidth)
# The dry run takes the same stages on one virtual GPU emulating NCCL 2.30.7.

nccl_used=$(sed -n 's/^nccl_multi_rank: \([0-9.]*\) \(.*\)$/\2/p' "$work/probe.txt" | head -1)
if ((dry)); then
  nccl_env=(env VGPU_DEVICES=1 VGPU_NCCL_VERSION=2.30.7 NCCL_MULTI_RANK_GPU_ENABLE=1)
  nccl_filter="NcclComm.*:Nccl/CudaPtdp.*/t2_p2_d2_v2_interleaved_full_sg_overlap_nccl"
  nccl_san_filter="Nccl/CudaPtdp.*/t1_p2_d1_v1_1f1b_none_sg_nccl"
  nccl_ok=1
elif [[ -n "$nccl_used" ]]; then
  nccl_env=(env NCCL_MULTI_RANK_GPU_ENABLE=1 "PTDP_NCCL_DIR=$(dirname "$nccl_used")")
  nccl_filter="NcclComm.*:Nccl/CudaPtdp.*:Grid/CudaGqa.*nccl*:Grid/CudaContextParallelism.*nccl*"
  nccl_san_filter="Nccl/CudaPtdp.*/t2_p2_d1_v1_1f1b_selective_nosg_nccl"
  nccl_ok=1
else
  nccl_ok=0
fi

if ((!nccl_ok)); then
  why="no NCCL 2.30 or later here (probe.txt lists those found; scripts/nccl_for_device.sh makes one for --nccl)"
  for s in test_nccl nccl_train sanitize_nccl bench_nccl_shared; do skip "$s" "$why"; done
else
  if [[ -n "$TESTS" ]]; then
    stage test_nccl 120 "${nccl_env[@]}" "$TESTS" "--gtest_filter=$nccl_filter:-$nogpu" \
      "--gtest_output=json:$work/raw/test_nccl.json"
  else
    skip test_nccl "no ptdp_tests binary"
  fi
  nccl_layout=(--model tiny --layers 8 --tp 2 --pp 2 --dp 2 --vpp 2 --schedule interleaved --micro-batch 1
               --global-batch 8 --iters 3 --warmup 0 --lr 3e-3 --data synthetic)
  ((dry)) && nccl_layout=(--model tiny --layers 2 --tp 2 --dp 2 --micro-batch 1 --global-batch 4 --iters 3 --warmup 0
                          --lr 3e-3 --data synthetic)
  # bash -c ARGS: the folder, the length n of the command, the command (env ... ptdp), the layout.
  run=("${nccl_env[@]}" "$PTDP")
  stage nccl_train 60 bash -c '
    set -e
    out=$1 n=$2
    shift 2
    cmd=("${@:1:n}") layout=("${@:n+1}")
    "${cmd[@]}" train "${layout[@]}" --backend cpu --loss-log "$out/nccl_train_cpu.csv" >/dev/null
    "${cmd[@]}" train "${layout[@]}" --backend cuda --comm nccl --loss-log "$out/nccl_train_nccl.csv"
    python3 - "$out/nccl_train_cpu.csv" "$out/nccl_train_nccl.csv" <<PY
import csv, sys
a, b = ([float(r[1]) for r in list(csv.reader(open(p)))[1:]] for p in sys.argv[1:])
assert len(a) == len(b) == 3, (a, b)
for i, (x, y) in enumerate(zip(a, b)):
    assert abs(x - y) <= 1e-4 * x, f"iteration {i + 1}: cpu {x} nccl {y}"
print("nccl_train: the losses equal those of the cpu backend to 1e-4:", b)
PY' nccl_train "$work/raw" "${#run[@]}" "${run[@]}" "${nccl_layout[@]}"
  if [[ -n "$TESTS" ]]; then
    sanitize sanitize_nccl 60 memcheck "${nccl_env[@]}" "$TESTS" "--gtest_filter=$nccl_san_filter"
  else
    skip sanitize_nccl "no ptdp_tests binary"
  fi
  if b=$(bin bench_nccl) && ((!dry)); then
    stage bench_nccl_shared 40 "${nccl_env[@]}" PTDP_NCCL_RANKS_PER_GPU=4 "$b" \
      '--benchmark_filter=bytes:(8|32768|33554432)$' --benchmark_min_time=0.05 \
      "--benchmark_out=$work/raw/bench_nccl_shared.json" --benchmark_out_format=json
  else
    skip bench_nccl_shared "$( ((dry)) && echo "the virtual GPU has no timing to benchmark" || echo "no bench_nccl")"
  fi
fi
