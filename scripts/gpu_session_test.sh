#!/usr/bin/env bash
# ctest GpuSession.*: scripts/gpu_session.sh --dry-run on the virtual-GPU build given as $1, so that
# every stage's commands, file names, parsing and budgets run before a GPU does.
#   dry-run   every stage passes or is skipped with its reason; the output folder holds at most 8
#             files (summary.csv with a row per stage and the tests', losses', ops' numbers,
#             probe.txt, compare_pytorch.csv, fig7.csv, op_profile.csv with FLOPs and bytes per op,
#             session.tar.gz with every log)
#   budget    with PTDP_SESSION_LIMIT=1 nothing after the probe starts: every stage is recorded as
#             skipped, and the files are still written
set -uo pipefail
# The session's logic is under test here, not its kernels: the vgpu's per-access checks (which
# double a kernel's time, and the kernel tests run) are off unless asked for.
export VGPU_ACCESS_CHECK=${VGPU_ACCESS_CHECK:-0}
build=$1
case_=${2:-dry-run}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/ptdp_session_test.XXXXXX")
trap 'rm -rf "$out"' EXIT
fail() {
  echo "FAIL: $*"
  cat "$out/log" 2>/dev/null | tail -n 60
  exit 1
}
stage_status() { awk -F, -v s="$1" '$1 == "stage" && $2 == s {print $5}' "$out/o/summary.csv"; }

if [[ $case_ == budget ]]; then
  PTDP_SESSION_LIMIT=1 bash "$here/gpu_session.sh" --dry-run --bin "$build" "$out/o" >"$out/log" 2>&1
  rc=$?
  ((rc == 0)) || fail "exit code $rc"
  for s in test_kernels test_grid pytorch_loss_f32 fig7 profile_gpt accept; do
    [[ $(stage_status "$s") == skipped ]] || fail "stage $s is '$(stage_status "$s")', not skipped"
  done
  grep -q "session time used up" "$out/o/summary.csv" || fail "the skips do not say why"
  [[ -f "$out/o/session.tar.gz" && -f "$out/o/probe.txt" ]] || fail "session.tar.gz or probe.txt missing"
  # A stage name in --only that no stage has is named, and the session fails.
  PTDP_SESSION_LIMIT=1 bash "$here/gpu_session.sh" --dry-run --bin "$build" --only fig7,fig_7 "$out/typo" \
    >"$out/log" 2>&1 && fail "--only fig_7 (no such stage) did not fail the session"
  grep -q -- "--only fig_7: no stage of this session has that name" "$out/log" || fail "--only fig_7 was not named"
  grep -q -- "--only fig7:" "$out/log" && fail "--only fig7 (a stage) was named"
  echo "PASS: budget"
  exit 0
fi

bash "$here/gpu_session.sh" --dry-run --bin "$build" "$out/o" >"$out/log" 2>&1
rc=$?
((rc == 0)) || fail "exit code $rc (a stage failed)"
n=$(ls "$out/o" | wc -l)
((n <= 8)) || fail "$n files in the output folder, more than 8: $(ls "$out/o")"
for f in summary.csv probe.txt session.tar.gz compare_pytorch.csv fig7.csv op_profile.csv; do
  [[ -s "$out/o/$f" ]] || fail "$f is missing or empty"
done
for s in probe test_kernels test_grid sanitize_memcheck_ops sanitize_memcheck_train pytorch_loss_f32 \
  pytorch_loss_f32_flash pytorch_loss_bf16 pytorch_loss_bf16_flash pytorch_eager_gpt pytorch_eager_llama fig7 profile_gpt profile_llama accept golden_cuda \
  test_nccl nccl_train sanitize_nccl attention_gpt attention_llama attention_gqa attention_long dispatch \
  memory_pp memory_pp_model; do
  [[ $(stage_status "$s") == ok ]] || fail "stage $s is '$(stage_status "$s")'"
done
for s in bench_gemm_cuda ncu_kernels bench_nccl_shared fig7_cudnn pytorch_loss_bf16_unfused pytorch_loss_bf16_cudnn; do
  [[ $(stage_status "$s") == skipped ]] || fail "stage $s is '$(stage_status "$s")', expected skipped on the virtual GPU"
done
grep -q '^tests,test_kernels passed,[1-9]' "$out/o/summary.csv" || fail "no passed kernel tests in summary.csv"
grep -q '^tests,test_kernels failed,0,' "$out/o/summary.csv" || fail "failed kernel tests in summary.csv"
grep -q '^tests,test_nccl passed,[1-9]' "$out/o/summary.csv" || fail "no passed NCCL tests in summary.csv"
grep -q '^tests,test_nccl failed,0,' "$out/o/summary.csv" || fail "failed NCCL tests in summary.csv"
grep -q '^dispatch,h=64 a=4 l=2 b=2,,us per kernel,skipped,"eager [0-9.]* ms' "$out/o/summary.csv" ||
  fail "summary.csv has no dispatch row with the eager time (skipped graph) of the dry run's shape"
grep -q '^nccl,found,[0-9]' "$out/o/summary.csv" || fail "summary.csv names no NCCL found by the probe"
grep -q '^nccl,used by the nccl stages,' "$out/o/summary.csv" || fail "summary.csv does not say which NCCL the stages used"
for a in auto flash; do
  grep -q "^pytorch,loss agreement f32 (attention $a),.*,ok," "$out/o/summary.csv" ||
    fail "no f32 loss agreement of attention $a in summary.csv"
done
grep -q '^fig7,b=16,' "$out/o/summary.csv" || fail "no Figure 7 b=16 point in summary.csv"
grep -q '^memory,pipeline stage 0 of 2 (rank 0),' "$out/o/summary.csv" ||
  fail "no first-stage memory row (measured against the model) in summary.csv"
grep -q '^pytorch,llama h=64 l=2 s=32 g=2 ptdp-flash/pytorch-eager,' "$out/o/summary.csv" ||
  fail "no ratio of ptdp's flash attention over PyTorch eager for the GQA shape in summary.csv"
awk -F, 'NR > 1 && $3 == "linear_forward" && $6 > 0 && $7 > 0 {found = 1} END {exit !found}' "$out/o/op_profile.csv" ||
  fail "op_profile.csv has no linear_forward row with FLOPs and bytes"
# The profile covers the timed iterations only (the dry run: 3 run, 1 untimed): 2 gradient norms.
awk -F, '$1 == "gpt" && $3 == "sum_squares" {n = $4} END {exit n != 2}' "$out/o/op_profile.csv" ||
  fail "the gpt op profile does not hold exactly the 2 timed iterations' gradient norms"
# The listing first: grep -q ending the pipe early would kill tar with SIGPIPE, a failure under pipefail.
listing=$(tar -tzf "$out/o/session.tar.gz") || fail "session.tar.gz cannot be listed"
grep -q 'logs/test_kernels.log' <<<"$listing" || fail "session.tar.gz lacks the logs"
echo "PASS: dry-run ($(awk -F, '$1 == "stage"' "$out/o/summary.csv" | wc -l) stages)"
