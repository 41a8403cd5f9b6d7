#!/usr/bin/env bash
# The whole first-contact run on one GPU machine (H100 or H200), as one command of at most
# 8 minutes, from the bundle scripts/device_bundle.sh makes here (docs/CUDA.md, "A GPU session"):
#
#   bash scripts/gpu_session.sh --bundle build-bundle/ptdp-device.tar.xz OUTDIR
#   bash scripts/gpu_session.sh --bin build-gpu OUTDIR     # binaries of a build made there instead
#   bash scripts/gpu_session.sh --dry-run OUTDIR           # CI: the same stages on the virtual GPU (build-vgpu)
#   bash scripts/gpu_session.sh --only fig7,profile_gpt ... # these stages only (after the probe)
#   bash scripts/gpu_session.sh --bundle ... --nccl build-bundle/nccl-sm90.tar.xz --only test_nccl,nccl_train OUTDIR
#                                                          # NCCL 2.30 brought along (scripts/nccl_for_device.sh)
#
# Stages, in the order of what the run must answer, each under its own time budget (timeout), so
# that a slow or hung stage costs its budget and no more; the session stops starting stages at
# PTDP_SESSION_LIMIT seconds (480; the dry run 1500, with every budget times 6, and a stage over
# its budget there named, not stopped: the dry run checks that stages work, a loaded machine is slow):
#   probe      the C library, driver, CUDA, the machine's cuBLAS(Lt) and NCCL, ldd of every binary:
#              stops the session in seconds, with the report, when something the bundle needs is missing
#   health     ptdp accept --level 1: the GPU's health as NVML reports it
#   correct    the CUDA kernel tests against the CPU backend (f32, bf16, f16, llama ops), every PTD-P
#              layout (the grid, SP, uneven stages, GQA) with thread ranks sharing the GPU;
#              compute-sanitizer memcheck, racecheck and synccheck over a subset and a 2-iteration
#              train --backend cuda
#   pytorch    scripts/compare_pytorch.py: losses over 10 steps (f32, bf16), then tokens/s and MFU of
#              ptdp, PyTorch eager and torch.compile (GPT 1.3B, LLaMA-7B shape with 4 layers; bf16, s 2048)
#   attention  the same per --attention-backend (cudnn where the probe finds libcudnn.so.9, else auto;
#              flash; unfused) for GPT 1.3B, LLaMA-7B x 4, LLaMA-3 8B-shaped GQA x 4 and s 8192, with
#              peak memory
#   fig7       the paper's Figure 7 on this GPU (b = 1..16), measured with the paper's unfused
#              attention, and with cuDNN's beside it where the probe found cuDNN (fig7_cudnn)
#   profile    GPU time per backend op (PTDP_OP_PROFILE) of the throughput models and a GQA LLaMA
#   bench      GEMMs, fused kernels, one layer, copies, a GEMM overlapped with a collective's kernel
#              (Google Benchmark JSON -> CSV)
#   accept     ptdp accept on the matching profile (gemm, memory, train)
#   kernels    ncu: every kernel's duration in one training step (if time is left)
#   nccl       real NCCL with several ranks on the GPU (NCCL 2.30+, scripts/gpu_session_nccl.sh): its
#              tests and layouts, a train run, memcheck, bench_nccl; skipped without such an NCCL
#
# OUTDIR receives at most 8 files: summary.csv (every stage and the headline numbers, with git sha,
# host, GPU, driver and CUDA), probe.txt, compare_pytorch.csv, fig7.csv, op_profile.csv,
# microbench.csv, and session.tar.gz (every log, JSON and CSV). Exit code: 0 when every stage
# passed, 1 when one failed, 3 when the probe stopped the session.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

dry=0 bundle="" bindir="" outdir="" only="" nccl_tar=""
while (($#)); do
  case "$1" in
    --dry-run) dry=1 ;;
    --bundle) bundle=$2; shift ;;
    --bin) bindir=$2; shift ;;
    --only) only=",$2,"; shift ;;
    --nccl) nccl_tar=$2; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_session.sh: unknown option '$1' (--bundle TAR, --bin DIR, --dry-run, --only STAGES, --nccl TAR)" >&2; exit 2 ;;
    *) [[ -z "$outdir" ]] || { echo "gpu_session.sh: one OUTDIR only ('$outdir', '$1')" >&2; exit 2; }
       outdir=$1 ;;
  esac
  shift
done
outdir=${outdir:-${OUT:-}}
[[ -n "$outdir" ]] || { echo "gpu_session.sh: give the output folder (OUTDIR, or OUT in the environment)" >&2; exit 2; }
((dry)) && [[ -z "$bundle" && -z "$bindir" ]] && bindir=build-vgpu
[[ -n "$bundle" || -n "$bindir" ]] || { echo "gpu_session.sh: --bundle TAR or --bin DIR is needed" >&2; exit 2; }
mkdir -p "$outdir" || exit 2
outdir=$(cd "$outdir" && pwd)

# The session's limit, and a factor on every stage's budget: the virtual GPU of the dry run is slower
# than any GPU, and shares its cores with other tests under ctest -j (golden_cuda, 18 s alone, took
# over 30 s beside a CUDA grid shard), so 6x; the dry run is not bound by a lease.
if ((dry)); then limit=${PTDP_SESSION_LIMIT:-1500} budget_scale=6; else limit=${PTDP_SESSION_LIMIT:-480} budget_scale=1; fi
t0=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/ptdp_session.XXXXXX")
mkdir -p "$work/logs" "$work/raw"
stages="$work/stages.csv"
echo "stage,status,rc,start_s,seconds,budget_s,command" >"$stages"
failed=0

log() { echo "[gpu_session +$(($(date +%s) - t0))s] $*"; }
elapsed() { echo $(($(date +%s) - t0)); }

# ---- the binaries ----
unpack() {  # OPTION TAR MAKER: TAR (.tar.xz) into $work, with xz or, where the machine has none, Python's lzma
  [[ -f "$2" ]] || { echo "gpu_session.sh: $1 $2: no such file ($3 makes it)" >&2; exit 2; }
  if command -v xz >/dev/null; then
    xz -dc "$2" | tar -C "$work" -xf -
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' "$2" "$work"
  fi || { echo "gpu_session.sh: $1 $2: cannot unpack" >&2; exit 2; }
}
if [[ -n "$bundle" ]]; then
  unpack --bundle "$bundle" scripts/device_bundle.sh
  bindir="$work/ptdp-device/bin"
  libdir="$work/ptdp-device/lib"
  manifest="$work/ptdp-device/MANIFEST"
else
  libdir="" manifest=""
fi
# NCCL 2.30 brought along (scripts/nccl_for_device.sh): unpacked to $work/nccl/.
if [[ -n "$nccl_tar" ]]; then
  unpack --nccl "$nccl_tar" scripts/nccl_for_device.sh
  [[ -f "$work/nccl/libnccl.so.2" ]] || { echo "gpu_session.sh: --nccl $nccl_tar: no nccl/libnccl.so.2 inside" >&2; exit 2; }
fi
bin() {  # NAME: the path of a binary under bindir (bundle: bin/; a build tree: ., core/)
  local d
  for d in "$bindir" "$bindir/core" "$bindir/bin"; do
    [[ -x "$d/$1" && -f "$d/$1" ]] && { echo "$d/$1"; return 0; }
  done
  return 1
}
PTDP=$(bin ptdp) || { echo "gpu_session.sh: no ptdp binary under $bindir" >&2; exit 2; }
TESTS=$(bin ptdp_tests) || TESTS=""

# python3 with PyTorch: $PTDP_PYTHON, python3 or /usr/bin/python3 (Debian's python3-torch), the first that imports it.
# shellcheck source=scripts/python_with.sh
. scripts/python_with.sh
PY=$(python_with torch) || PY=python3

# ---- stage runner ----
# stage NAME BUDGET CMD...: runs CMD under `timeout BUDGET` (capped by the session's time left)
# with its output in logs/NAME.log; records ok | failed | timeout | skipped in stages.csv.
record() {  # STAGE STATUS RC SECONDS BUDGET COMMAND (the stage started SECONDS before now)
  printf '%s,%s,%s,%s,%s,%s,"%s"\n' "$1" "$2" "$3" $(($(elapsed) - $4)) "$4" "$5" "${6//\"/\"\"}" >>"$stages"
}
stage() {
  local name=$1 budget=$(($2 * budget_scale))
  shift 2
  if [[ -n "$only" && "$only" != *",$name,"* ]]; then
    record "$name" skipped "" 0 "$budget" "not in --only"
    return 0
  fi
  local left=$((limit - $(elapsed)))
  if ((left < 5)); then
    record "$name" skipped "" 0 "$budget" "session time used up: $*"
    log "$name: skipped (the session's ${limit}s are used up)"
    return 0
  fi
  ((budget > left)) && budget=$left
  # The dry run checks that every stage works, not how fast: a stage there is stopped only by the
  # session's limit, and one over its budget (a loaded machine) is named, not failed.
  local stop_at=$budget
  ((dry)) && stop_at=$left
  log "$name (budget ${budget}s): $*"
  local s=$(date +%s)
  timeout -k 5 "$stop_at" "$@" >"$work/logs/$name.log" 2>&1
  local rc=$? secs=$(($(date +%s) - s)) status=ok
  if ((rc == 124 || rc == 137)); then status=timeout; elif ((rc != 0)); then status=failed; fi
  [[ $status == ok ]] || failed=1
  record "$name" "$status" "$rc" "$secs" "$budget" "$*"
  log "$name: $status (exit $rc, ${secs}s)"
  ((dry && secs > budget)) && log "$name: ${secs}s, over its budget of ${budget}s (the dry run does not fail on time)"
  tail -n 3 "$work/logs/$name.log" | sed 's/^/    /'
  return 0
}
skip() {  # NAME REASON
  record "$1" skipped "" 0 0 "$2"
  log "$1: skipped ($2)"
}

finish() {
  local code=$1 name
  [[ -n "${smi_pid:-}" ]] && kill "$smi_pid" 2>/dev/null
  # A name in --only that no stage has (a typo) ran nothing: said, and the session fails.
  for name in ${only//,/ }; do
    awk -F, -v s="$name" '$1 == s {found = 1} END {exit !found}' "$stages" ||
      { log "--only $name: no stage of this session has that name (stages.csv lists them)"; code=1; }
  done
  "$PY" "$repo/scripts/gpu_summary.py" "$work" "$outdir" --dry-run "$dry" >"$work/logs/summary.log" 2>&1 ||
    { log "summary: failed"; cat "$work/logs/summary.log"; code=1; }
  cat "$work/logs/summary.log"
  tar -C "$work" -czf "$outdir/session.tar.gz.tmp" logs raw stages.csv probe.txt 2>/dev/null &&
    mv "$outdir/session.tar.gz.tmp" "$outdir/session.tar.gz"
  rm -rf "$work"
  log "done in $(elapsed)s: $(ls "$outdir" | tr '\n' ' ')"
  exit "$code"
}

# ---- probe ----
find_lib() {  # SONAME: the folder of the machine's copy (ldconfig, CUDA folders, PyTorch's wheels)
  local p
  p=$(ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n {print $NF; exit}')
  [[ -n "$p" ]] && { dirname "$p"; return 0; }
  for p in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64 \
    /usr/lib/x86_64-linux-gnu /opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib \
    /usr/local/lib/python3*/dist-packages/nvidia/*/lib /usr/lib/python3/dist-packages/nvidia/*/lib; do
    [[ -e "$p/$1" ]] && { echo "$p"; return 0; }
  done
  # Anywhere else under /opt, /usr or /root (seconds at most).
  p=$(timeout 10 find /opt /usr /root -xdev -name "$1" -print -quit 2>/dev/null)
  [[ -n "$p" ]] && { dirname "$p"; return 0; }
  return 1
}
# Every NCCL on the machine (ldconfig, the CUDA folders, Python wheels, anywhere under /opt, /usr,
# /root) and the one of --nccl, each with its version (ncclGetVersion), newest first; then the one
# the NCCL stages use: the newest of 2.30 or later (several ranks on one GPU), or none.
nccl_inventory() {
  local libs=() p
  mapfile -t libs < <({
    ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" {print $NF}'
    timeout 10 find /opt /usr /root -xdev -name libnccl.so.2 2>/dev/null
    [[ -f "$work/nccl/libnccl.so.2" ]] && echo "$work/nccl/libnccl.so.2"
  } | awk '!seen[$0]++')
  local found
  found=$( ((${#libs[@]})) && (cd "$repo/scripts" && python3 -m ptdp_tools.nccl_versions "${libs[@]}"))
  if [[ -z "$found" ]]; then
    echo "nccl found: none"
  else
    echo "$found" | sed 's/^/nccl found: /'
  fi
  p=$(echo "$found" | awk -F'[. ]' '$1 == 2 && $2 >= 30 {print; exit}')
  echo "nccl_multi_rank: ${p:-none (no NCCL 2.30 or later)}"
  [[ -f "$work/nccl/libnccl.so.2" ]] && echo "nccl_brought: $work/nccl/libnccl.so.2 (--nccl $nccl_tar)"
}
probe() {
  local missing=0 d lib
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "kernel: $(uname -sr) $(uname -m)"
  echo "glibc: $(ldd --version 2>/dev/null | head -1 | awk '{print $NF}')"
  [[ -n "$manifest" ]] && sed 's/^/bundle /' "$manifest"
  if command -v nvidia-smi >/dev/null; then
    echo "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version,pstate,clocks.sm,clocks.max.sm,power.limit,persistence_mode,ecc.mode.current --format=csv,noheader 2>&1 | head -1)"
    echo "cuda_driver: $(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: \([0-9.]*\).*/\1/p' | head -1)"
    echo "gpus: $(nvidia-smi -L 2>/dev/null | wc -l)"
    echo "gpu_processes: $(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | wc -l)"
  else
    echo "gpu: none (no nvidia-smi)"
  fi
  echo "nvcc: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  # PyTorch imported once (seconds): its version line, then its cuDNN's (printed below); on a
  # failure both say the error's last line.
  local torch_lines torch_version torch_cudnn
  if torch_lines=$("$PY" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available()); print(torch.backends.cudnn.version())' 2>"$work/torch_probe.err"); then
    torch_version=$(head -1 <<<"$torch_lines") torch_cudnn=$(sed -n 2p <<<"$torch_lines")
  else
    torch_version=$(tail -1 "$work/torch_probe.err") torch_cudnn=$torch_version
  fi
  echo "python3: $PY $torch_version"
  for tool in compute-sanitizer ncu; do echo "$tool: $(command -v "$tool" || echo none)"; done
  echo "cpus: $(nproc)"
  local paths=()
  [[ -n "$libdir" ]] && paths+=("$libdir")
  for lib in libcublasLt.so.13 libcublas.so.13 libnccl.so.2 libcudart.so.13 libcudnn.so.9; do
    if d=$(find_lib "$lib"); then
      echo "lib $lib: $d"
      paths+=("$d")
    else
      echo "lib $lib: not found on this machine"
    fi
  done
  nccl_inventory
  # cuDNN: loaded by ptdp at run time (--attention-backend cudnn; docs/CUDA.md), PyTorch's as a rule.
  echo "cudnn_torch: $torch_cudnn"
  # The bundle's programs get these folders through their wrappers (bin/NAME reads libpath); nothing
  # is exported to the session, whose python3 must keep PyTorch's own libraries.
  local libpath
  libpath=$(printf '%s\n' "${paths[@]}" | awk 'NF && !seen[$0]++' | paste -sd:)
  if [[ -n "$libdir" ]]; then
    printf '%s\n' "$libpath" >"$(dirname "$libdir")/libpath"
    echo "libpath: $libpath"
  fi
  local f
  for f in "$PTDP" $TESTS $(for b in bench_gemm_cuda bench_kernels_cuda bench_copy_cuda bench_layer_cuda bench_overlap_cuda bench_nccl; do bin "$b"; done); do
    local real=$f nf
    [[ -n "$libdir" ]] && real="$(dirname "$libdir")/libexec/$(basename "$f")"
    nf=$(LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$real" 2>&1 |
      grep -E 'not found|version .* not found' || true)
    if [[ -n "$nf" ]]; then
      echo "MISSING for $(basename "$f"):"
      echo "$nf" | sed 's/^/  /'
      missing=1
    else
      echo "ldd $(basename "$f"): ok"
    fi
  done
  if ! "$PTDP" --help >/dev/null 2>&1; then
    echo "MISSING: $PTDP --help does not run: $("$PTDP" --help 2>&1 | tail -1)"
    missing=1
  fi
  echo "blas: $("$PTDP" --version 2>&1 | sed -n 's/^blas: //p')"
  echo "cudnn_ptdp: $("$PTDP" --version 2>&1 | sed -n 's/^cudnn: //p')"
  return $missing
}
probe >"$work/probe.txt" 2>&1
probe_rc=$?
cp "$work/probe.txt" "$outdir/probe.txt"
cat "$work/probe.txt"
if ((probe_rc != 0)); then
  record probe failed "$probe_rc" "$(elapsed)" 15 "probe"
  log "probe: the bundle cannot run here (above); nothing else was started"
  finish 3
fi
record probe ok 0 "$(elapsed)" 15 "probe"
# OpenBLAS's kernels for every program of the session, as ptdp chose them where OpenBLAS does not
# know the CPU (core/backend/cpu/blas_core.h): chosen once, so that nothing starts itself again
# under a sanitizer.
blas_core=$(sed -n 's/^blas: .*(OPENBLAS_CORETYPE=\([A-Za-z0-9]*\), set by ptdp.*/\1/p' "$work/probe.txt")
[[ -n "$blas_core" && -z "${OPENBLAS_CORETYPE:-}" ]] && export OPENBLAS_CORETYPE=$blas_core
if ((!dry)) && ! grep -q '^gpus: [1-9]' "$work/probe.txt"; then
  record gpu failed 3 0 0 "nvidia-smi -L"
  log "probe: no GPU visible (nvidia-smi); nothing else was started"
  finish 3
fi
# The GPU's memory, load, clocks, power and throttling twice a second for the whole session
# (raw/nvidia_smi.csv; stages.csv's start_s places each stage on it).
if command -v nvidia-smi >/dev/null; then
  # Everything the driver reports (ECC and row-remap counters, PCIe link, clocks, throttle reasons):
  # what a health pre-flight reads, from a real GPU.
  nvidia-smi -q -x >"$work/raw/nvidia_smi_q.xml" 2>&1
  nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 500 >"$work/raw/nvidia_smi.csv" 2>&1 &
  smi_pid=$!
fi

# ---- the stages: real sizes, or small ones on the virtual GPU (--dry-run) ----
nogpu='*WithoutGpu*:*WithoutAGpu*:*NoGpu*'
if ((dry)); then
  # The virtual GPU runs kernels on the CPU, thousands of times slower: the same commands at the
  # smallest sizes that still exercise every stage's logic, files and parsing.
  k_filter="Cuda/CudaOps.LayerNorm*/f32:Cuda/CudaOps.Swiglu*/bf16:CudaAllocator.*:CudaGemm.*"
  # One layout for the grid stage's command, output and parsing: the layouts themselves are ctest's
  # (this one in SequenceParallel/CudaPtdp:gpu, the grid's in Grid/CudaPtdp:gpu), each a minute of
  # the dry run's time here.
  g_filter="SequenceParallel/CudaPtdp.*/t2_p2_d1_v1_1f1b_none_sg_sp"
  san_filter="Cuda/CudaOps.Gelu*/f32"
  # The dry run has no sanitizer: a grid layout would run again exactly as in test_grid; the
  # stage's command (sanitize, a ptdp_tests filter) is the ops stages' and runs with their filter.
  san_grid_filter=$san_filter
  device=cpu precision=f32
  gpt_shape="h=64,a=4,l=2,s=32,b=2,V=256"
  llama_shape="arch=llama,h=64,a=4,l=2,s=32,b=2,V=256"
  gpt_train=(--layers 2 --hidden 64 --heads 4 --seq-length 32 --vocab-size 256 --micro-batch 2)
  llama_train=(--arch llama "${gpt_train[@]}")
  gqa_train=("${llama_train[@]}" --group-query-attention --num-query-groups 2 --ffn-hidden-size 160)
  tp_iters=(--iters 3 --warmup 1)
  # Half tiny's layers and micro-batches (2 of 2 sequences): the stage's command, loss log and
  # agreement; tiny's 10 steps against PyTorch on the CPU are ctest PyTorch.*.
  loss_iters=(--iters 3 --model custom --layers 2 --hidden 64 --heads 4 --seq-length 32 --vocab-size 256
              --global-batch 4)
  gqa_shape="arch=llama,h=64,a=4,g=2,l=2,s=32,b=2,V=256"
  long_shape="arch=llama,h=64,a=4,g=2,l=2,s=128,b=1,V=256"
  attn_backends=(flash unfused)      # cudnn is refused on the virtual GPU
  cudnn_found=0
  attn_impls=(ptdp pytorch-eager)    # torch.compile on the CPU: its own stages above
  fig7=(--scale small)
  dispatch_shapes=(--shape "$gpt_shape" --iters 3 --warmup 1)
  accept_hw=vgpu
else
  k_filter="Cuda*:MixedPrecision.Cuda*"
  g_filter="*/CudaPtdp.*:*/CudaGqa.*:*/CudaContextParallelism.*"  # every layout: the grid, SP, uneven stages, GQA, CP
  san_filter="Cuda/CudaOps.*/bf16:CudaBackend.AdamWMatchesCpu:Cuda/CudaBlockAttention.*/bf16:Cuda/CudaAdamWMulti.*/bf16"
  san_grid_filter="Uneven/CudaPtdp.*:SequenceParallel/CudaPtdp.*:Grid/CudaGqa.*"  # the newest layouts
  device=cuda precision=bf16
  gpt_shape="h=2048,a=16,l=24,s=2048,b=4,V=51200"           # Megatron's GPT 1.3B (gpt-1.3b of its examples)
  llama_shape="arch=llama,h=4096,a=32,l=4,s=2048,b=2,V=32000"  # LLaMA-7B's layer and vocabulary, 4 layers
  gpt_train=(--layers 24 --hidden 2048 --heads 16 --seq-length 2048 --vocab-size 51200 --micro-batch 4)
  llama_train=(--arch llama --layers 4 --hidden 4096 --heads 32 --seq-length 2048 --vocab-size 32000 --micro-batch 2)
  # LLaMA-3 8B's layer (8 query groups, FFN 14336) and vocabulary, 4 layers.
  gqa_train=(--arch llama --layers 4 --hidden 4096 --heads 32 --group-query-attention --num-query-groups 8
             --ffn-hidden-size 14336 --seq-length 2048 --vocab-size 128256 --micro-batch 2)
  tp_iters=(--iters 8 --warmup 3)
  loss_iters=(--iters 10)
  gqa_shape="arch=llama,h=4096,a=32,g=8,l=4,s=2048,b=2,V=128256"   # LLaMA-3 8B's attention and vocabulary
  long_shape="arch=llama,h=4096,a=32,g=8,l=4,s=8192,b=1,V=128256"  # the same at s = 8192
  # cudnn where the probe found cuDNN (ptdp then must run it: PTDP_REQUIRE_CUDNN fails the cuDNN
  # tests instead of skipping them), else auto (unfused)
  attn_backends=(auto flash unfused)
  cudnn_found=0
  if grep -q '^lib libcudnn.so.9: /' "$work/probe.txt"; then
    cudnn_found=1
    attn_backends=(cudnn flash unfused)
    export PTDP_REQUIRE_CUDNN=1
  fi
  attn_impls=(ptdp pytorch-eager pytorch-compile)
  fig7=(--scale paper)
  # Figure 7's 1B model (128 heads of 32) at b = 1 and 8, Figure 15's 5.9B layer (h 3840, 32 heads,
  # b = 1: the 20 ms a micro-batch the model lacks at every t, docs/SIMULATOR.md), GPT 1.3B.
  dispatch_shapes=(--shape "h=4096,a=128,l=4,s=2048,b=1,V=51200" --shape "h=4096,a=128,l=4,s=2048,b=8,V=51200"
                   --shape "h=3840,a=32,l=4,s=2048,b=1,V=51200" --shape "$gpt_shape")
  accept_hw=""
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
sanitize() {  # NAME BUDGET TOOL CMD...: under compute-sanitizer (the dry run: the command alone)
  local name=$1 budget=$2 tool=$3
  shift 3
  if ((dry)); then stage "$name" "$budget" "$@"; return; fi
  if ! command -v compute-sanitizer >/dev/null; then skip "$name" "no compute-sanitizer here"; return; fi
  stage "$name" "$budget" compute-sanitizer --tool "$tool" --error-exitcode 9 --print-limit 20 "$@"
}
tiny_train=("$PTDP" train --model tiny --backend cuda --iters 2 --data synthetic)

if [[ -z "$accept_hw" ]]; then
  case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
    *A100*) accept_hw=a100 ;;
    *H200*) accept_hw=h200 ;;
    *H100*) accept_hw=h100-dgx ;;
  esac
fi

# 0. The GPU's health as the driver reports it (NVML), before anything is measured.
if ((dry)); then
  skip accept_health "no NVML on the virtual GPU"
elif [[ -n "$accept_hw" ]]; then
  stage accept_health 10 "$PTDP" accept --hardware "$accept_hw" --level 1 --out "$work/raw/health.json"
else
  skip accept_health "no acceptance profile for this GPU"
fi

# 1. Correct on the GPU.
if [[ -n "$TESTS" ]]; then
  stage test_kernels 40 "$TESTS" "--gtest_filter=$k_filter:-$nogpu" \
    "--gtest_output=json:$work/raw/test_kernels.json"
  stage test_grid 45 "$TESTS" "--gtest_filter=$g_filter:-$nogpu" --gtest_shuffle --gtest_random_seed=7 \
    "--gtest_output=json:$work/raw/test_grid.json"
  sanitize sanitize_memcheck_ops 25 memcheck "$TESTS" "--gtest_filter=$san_filter"
else
  skip test_kernels "no ptdp_tests binary"
  skip test_grid "no ptdp_tests binary"
  skip sanitize_memcheck_ops "no ptdp_tests binary"
fi
sanitize sanitize_memcheck_train 15 memcheck "${tiny_train[@]}"
if [[ -n "$TESTS" ]]; then
  sanitize sanitize_racecheck 20 racecheck "$TESTS" "--gtest_filter=$san_filter"
  sanitize sanitize_synccheck 15 synccheck "$TESTS" "--gtest_filter=$san_filter"
  # Reads of device memory no one wrote (the class the virtual GPU tracks only per argument), and
  # memcheck over the layouts with uneven stages, sequence parallelism and GQA (thread ranks).
  sanitize sanitize_initcheck_ops 40 initcheck "$TESTS" "--gtest_filter=$san_filter"
  sanitize sanitize_memcheck_grid 60 memcheck "$TESTS" "--gtest_filter=$san_grid_filter"
fi
sanitize sanitize_initcheck_train 20 initcheck "${tiny_train[@]}"

# 2. Against PyTorch on the same GPU.
cmp=("$PY" "$repo/scripts/compare_pytorch.py")
# Per attention backend (issue: every backend's losses equal): auto (f32: unfused; bf16: cuDNN where it
# runs), then each other one the precision has: flash; unfused in bf16 where auto is cuDNN; cuDNN
# (bf16 only) where the probe found it.
loss_stage() {  # PRECISION [ATTENTION_BACKEND]
  stage "pytorch_loss_$1${2:+_$2}" 20 "${cmp[@]}" loss --device "$device" --ptdp-backend cuda --precision "$1" \
    "${loss_iters[@]}" --ptdp "$PTDP" --ptdp-attention-backend "${2:-auto}"
}
loss_stage f32
loss_stage f32 flash
loss_stage bf16
loss_stage bf16 flash
if ((cudnn_found)); then
  loss_stage bf16 unfused
  loss_stage bf16 cudnn
else
  skip pytorch_loss_bf16_unfused "auto is unfused here: pytorch_loss_bf16"
  skip pytorch_loss_bf16_cudnn "the probe found no libcudnn.so.9"
fi
tp=("${cmp[@]}" throughput --device "$device" --ptdp-backend cuda --precision "$precision" --recompute none
    "${tp_iters[@]}" --ptdp "$PTDP" --peak-tflops 989.4)
stage pytorch_eager_gpt 35 "${tp[@]}" --shape "$gpt_shape" --implementations ptdp pytorch-eager \
  --out "$work/raw/compare_eager_gpt.csv"
stage pytorch_eager_llama 30 "${tp[@]}" --shape "$llama_shape" --implementations ptdp pytorch-eager \
  --out "$work/raw/compare_eager_llama.csv"
stage pytorch_compile_gpt 75 "${tp[@]}" --shape "$gpt_shape" --implementations pytorch-compile \
  --out "$work/raw/compare_compile_gpt.csv"
stage pytorch_compile_llama 30 "${tp[@]}" --shape "$llama_shape" --implementations pytorch-compile \
  --out "$work/raw/compare_compile_llama.csv"

# 2b. Each attention backend of ptdp (--attention-backend) against PyTorch eager and torch.compile
# (both with SDPA), interleaved, with the peak memory of each: GPT 1.3B, LLaMA-7B x 4, a LLaMA-3
# 8B-shaped GQA x 4 and the same at s = 8192. About 7 minutes on a GPU: a session of their own,
# `--only attention_gpt,attention_llama,attention_gqa,attention_long` (a full session skips them).
# ptdp recomputes the MLP's activation in backward (--recompute-activation), as torch.compile's
# min-cut partitioner does for pointwise ops: the same trade of a pass for b*s*ffn bytes a layer on both sides.
attn=("${tp[@]}" --implementations "${attn_impls[@]}" --ptdp-attention-backend "${attn_backends[@]}"
  --ptdp-recompute-activation)
attention_stage() {  # NAME BUDGET SHAPE
  if ((!dry)) && [[ "$only" != *",$1,"* ]]; then skip "$1" "a session of its own (--only $1,...)"; return; fi
  stage "$1" "$2" "${attn[@]}" --shape "$3" --out "$work/raw/compare_$1.csv"
}
attention_stage attention_gpt 150 "$gpt_shape"
attention_stage attention_llama 90 "$llama_shape"
attention_stage attention_gqa 90 "$gqa_shape"
attention_stage attention_long 120 "$long_shape"

# 2c. The host's dispatch time per kernel of an eager PyTorch step, Figure 7's question
# (docs/SIMULATOR.md): one micro-batch's forward and backward eager against the same work replayed
# as a CUDA graph, with the kernel count. On the virtual GPU: eager on the CPU, the graph skipped.
stage dispatch 90 "${cmp[@]}" dispatch --device "$device" --precision "$precision" "${dispatch_shapes[@]}" \
  --out "$work/raw/dispatch.csv"

# 3. The paper's Figure 7 on this GPU.
# Six iterations a point (two untimed), not the 30 of a cluster run: the spec with iters and warmup set.
# bf16, not the paper's f16: f16's dynamic loss scale starts at 2^32 and overflows for the first
# dozen steps, each skipping AdamW (the first H200 session measured such steps); the H200's bf16
# and f16 tensor rates are the same. The paper's attention is unfused (Megatron-LM of 2021), which
# --attention-backend auto would not run where cuDNN loads; the fastest, cuDNN's, runs beside it.
fig7_spec() {  # ATTENTION_BACKEND
  sed -e "/^\[base\]/a iters = 6\nwarmup = 2\nattention_backend = \"$1\"" -e 's/^precision = "f16"/precision = "bf16"/' \
    experiments/specs/fig7.toml
}
fig7_spec unfused >"$work/fig7.toml"
stage fig7 90 "$PTDP" reproduce "$work/fig7.toml" --mode run "${fig7[@]}" --out "$work/raw/fig7"
if ((cudnn_found)); then
  fig7_spec cudnn >"$work/fig7_cudnn.toml"
  stage fig7_cudnn 90 "$PTDP" reproduce "$work/fig7_cudnn.toml" --mode run "${fig7[@]}" --out "$work/raw/fig7_cudnn"
else
  skip fig7_cudnn "the probe found no libcudnn.so.9"
fi

# 4. GPU time per op of the throughput models, over the timed iterations (ptdp train restarts the
# profile when its warm-up ends).
prof_train=("$PTDP" train --backend cuda --precision "$precision" --data synthetic "${tp_iters[@]}")
stage profile_gpt 30 env PTDP_OP_PROFILE="$work/raw/op_profile_gpt.csv" "${prof_train[@]}" "${gpt_train[@]}" \
  --csv "$work/raw/profile_train.csv"
stage profile_llama 20 env PTDP_OP_PROFILE="$work/raw/op_profile_llama.csv" "${prof_train[@]}" "${llama_train[@]}" \
  --csv "$work/raw/profile_train.csv"
stage profile_llama_gqa 25 env PTDP_OP_PROFILE="$work/raw/op_profile_llama_gqa.csv" "${prof_train[@]}" "${gqa_train[@]}" \
  --csv "$work/raw/profile_train.csv"

# 4b. The memory model against a pipeline layout's first stage: GPT 1.3B's layers in two stages, two
# thread ranks sharing this GPU (peak_mem_gb is rank 0's own tensors), and ptdp simulate's stage 0
# in use for the same layout (--stack ptdp; the attention that ran: cuDNN's where the probe found it).
mem_attention=unfused
((cudnn_found)) && mem_attention=cudnn
case "$accept_hw" in h200) sim_hw=h200 ;; a100) sim_hw=a100-selene ;; *) sim_hw=h100-dgx ;; esac
mem_layout=("${gpt_train[@]}" --pp 2 --global-batch 16 --attention-backend "$mem_attention")
stage memory_pp 40 "${prof_train[@]}" "${mem_layout[@]}" --csv "$work/raw/memory_pp.csv"
stage memory_pp_model 10 "$PTDP" simulate --hardware "$sim_hw" --stack ptdp --precision "$precision" "${mem_layout[@]}"

# 5. Microbenchmarks (short: 0.05 s a benchmark), then ptdp accept.
bench() {  # NAME BUDGET FILTER [STAGE VAR=VALUE...]: benchmark NAME as STAGE (default NAME) with VARs set
  local b name=${4:-$1} vars=("${@:5}")
  if ! b=$(bin "$1"); then skip "$name" "not built here (the virtual GPU has no timing to benchmark)"; return; fi
  ((${#vars[@]})) && b=(env "${vars[@]}" "$b")
  stage "$name" "$2" "${b[@]}" "--benchmark_filter=$3" --benchmark_min_time=0.05 \
    "--benchmark_out=$work/raw/$name.json" --benchmark_out_format=json
}
bench bench_gemm_cuda 20 'BM_GemmCuda/gpt3-175b/t:(1|8)/.*/bf16|BM_LinearCuda/h:(2048|4096)/t:1/.*/bf16'
# The attention core's strided-batched GEMMs at head dimension 32 (Figure 7's 128 heads) beside 64
# and 128 at the same hidden size: the candidate for Figure 7's gap (docs/SIMULATOR.md, Fig. 7).
bench bench_gemm_cuda 15 'BM_AttnGemmCuda/.*' attn_gemm_cuda
bench bench_kernels_cuda 12 '.*'
bench bench_layer_cuda 12 'h:(2048|4096)/t:1/.*/bf16'
# A GEMM and a collective's stand-in kernel overlapped: what each costs the other (docs/SIMULATOR.md),
# then again with one hardware queue for all streams (Megatron's CUDA_DEVICE_MAX_CONNECTIONS=1).
bench bench_overlap_cuda 50 '.*'
bench bench_overlap_cuda 50 '.*' bench_overlap_cuda_1conn CUDA_DEVICE_MAX_CONNECTIONS=1
# 1 MiB and 64 MiB: 1 GiB (its fill and byte check on the host) ran out of 20 s on the H200.
bench bench_copy_cuda 20 'bytes:(1048576|67108864)/'
if [[ -n "$accept_hw" ]]; then
  # The dry run's training check runs once, in golden_cuda (tiny on the virtual GPU takes 13 s).
  stage accept 25 "$PTDP" accept --hardware "$accept_hw" --checks "gemm,memory$( ((dry)) || echo ,train)" --quick \
    --out "$work/raw/accept.json"
  stage golden_cuda 10 "$PTDP" accept --hardware "$accept_hw" --checks train \
    --write-golden "$work/raw/tiny_cuda.csv" --out "$work/raw/golden.json"
  # The burn-in (--level 3): the GEMM and the golden run in rounds; does the card hold its rate?
  stage accept_burnin $( ((dry)) && echo 20 || echo 150) "$PTDP" accept --hardware "$accept_hw" --checks burnin \
    --burn-in-seconds $( ((dry)) && echo 1 || echo 100) --out "$work/raw/burnin.json"
else
  skip accept "no acceptance profile for this GPU"
  skip accept_burnin "no acceptance profile for this GPU"
fi

# 6. Real NCCL with several ranks on the one GPU.
# shellcheck source=scripts/gpu_session_nccl.sh
. scripts/gpu_session_nccl.sh

# 7. Every kernel of one GPT step by duration (ncu), with what time is left.
if ((!dry)) && command -v ncu >/dev/null; then
  stage ncu_kernels 30 ncu --clock-control none --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size --csv --print-units base \
    --log-file "$work/raw/ncu.csv" "$PTDP" train --backend cuda --precision bf16 --data synthetic --iters 1 \
    --warmup 0 --layers 2 --hidden 2048 --heads 16 --seq-length 2048 --vocab-size 51200 --micro-batch 4
else
  skip ncu_kernels "$( ((dry)) && echo "dry run" || echo "no ncu here")"
fi

finish $((failed ? 1 : 0))
