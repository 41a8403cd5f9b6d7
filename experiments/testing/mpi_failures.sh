#!/usr/bin/env bash
# ctest: failures under `mpirun ... ptdp train --comm mpi` end every rank within seconds (not the
# 300 s --comm-timeout), with one line naming the cause and the failing rank; MPMD launches with
# different flags per rank and launches without --comm mpi are refused at start.
#   mpi_failures.sh CASE PTDP MPIRUN
# A failure on one rank only is made with an MPMD launch whose ranks run in different working
# directories (-wdir): the same relative --load/--save path is then a different directory, as on
# nodes with their own disks.
set -uo pipefail
case_=$1
ptdp=$(realpath "$2")
mpirun=$3
run=("$mpirun" --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1)
args=(train --comm mpi --model tiny --tp 2 --dp 2 --micro-batch 2 --global-batch 8 --comm-timeout 300)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/a" "$tmp/b"
out=$tmp/out.txt

fail() { echo "FAIL: $*"; echo "--- output:"; cat "$out"; exit 1; }
# Runs the command, records its output, exit code (rc) and seconds (took).
timed() {
  local t0=$(date +%s.%N)
  timeout 120 "$@" >"$out" 2>&1
  rc=$?
  took=$(echo "$(date +%s.%N) - $t0" | bc)
  echo "exit code $rc after $took s"
}
expect_fast_failure() {  # expect_fast_failure PATTERN...: non-zero, < 20 s, each pattern in the output
  [ "$rc" -ne 0 ] || fail "exit code 0"
  [ "$rc" -ne 124 ] || fail "still running after 120 s"
  (($(echo "$took < 20" | bc))) || fail "took $took s (the others waited for the timeout?)"
  ! grep -q "did not arrive" "$out" || fail "a rank waited for another"
  ! grep -qiE "segmentation|signal [0-9]|core dumped" "$out" || fail "a rank crashed"
  for p in "$@"; do grep -qF -- "$p" "$out" || fail "no '$p'"; done
  grep -F "ptdp: " "$out"
}
# A checkpoint of iteration 2 in a/ck and b/ck.
save_checkpoint() {
  (cd "$tmp/a" && "${run[@]}" -np 4 "$ptdp" "${args[@]}" --iters 2 --save ck >/dev/null 2>&1) || fail "save"
  cp -r "$tmp/a/ck" "$tmp/b/ck"
}
shard=ck/iter_0000002/mp_rank_01/model_optim_rng.bin  # tensor-parallel rank 1's: world ranks 1 and 3
mpmd_load() {  # ranks 0-2 in a/, rank 3 in b/
  timed "${run[@]}" -np 3 -wdir "$tmp/a" "$ptdp" "${args[@]}" --iters 4 --load ck : \
                    -np 1 -wdir "$tmp/b" "$ptdp" "${args[@]}" --iters 4 --load ck
}

case "$case_" in
  missing-shard)
    save_checkpoint
    rm "$tmp/b/$shard"
    mpmd_load
    expect_fast_failure "ptdp: error: --load ck: shard $shard is missing" "(rank 3 of 4)"
    ;;
  corrupt-shard)
    save_checkpoint
    truncate -s 100 "$tmp/b/$shard"
    mpmd_load
    expect_fast_failure "ptdp: error: --load ck: " "truncated" "(rank 3 of 4)"
    ;;
  unusable-save)  # rank 1 (a data-parallel rank 0: it writes a shard) finds a file where --save's directory goes
    touch "$tmp/b/out"
    mkdir "$tmp/a/out"
    timed "${run[@]}" -np 1 -wdir "$tmp/a" "$ptdp" "${args[@]}" --iters 2 --save out/ck : \
                      -np 1 -wdir "$tmp/b" "$ptdp" "${args[@]}" --iters 2 --save out/ck : \
                      -np 2 -wdir "$tmp/a" "$ptdp" "${args[@]}" --iters 2 --save out/ck
    expect_fast_failure "ptdp: error: --save out/ck" "(rank 1 of 4)"
    [ ! -e "$tmp/a/out/ck/latest_checkpointed_iteration.txt" ] || fail "a checkpoint marker was written"
    ;;
  different-iteration)  # rank 3's copy of the checkpoint marks an older iteration
    save_checkpoint
    (cd "$tmp/a" && "${run[@]}" -np 4 "$ptdp" "${args[@]}" --iters 3 --load ck --save ck >/dev/null 2>&1) || fail "save 3"
    mpmd_load
    expect_fast_failure "ptdp: error: the ranks of this job disagree on the iteration of --load ck: rank 0 has '3', rank 3 has '2'"
    ;;
  missing-dataset)  # rank 3's working directory has no copy of the dataset
    head -c 20000 "$ptdp" | base64 >"$tmp/text.txt"
    "$ptdp" preprocess --input "$tmp/text.txt" --output-prefix "$tmp/a/ds" >/dev/null || fail "preprocess"
    timed "${run[@]}" -np 3 -wdir "$tmp/a" "$ptdp" "${args[@]}" --iters 2 --data ds : \
                      -np 1 -wdir "$tmp/b" "$ptdp" "${args[@]}" --iters 2 --data ds
    expect_fast_failure "ptdp: error: " "ds" "(rank 3 of 4)"
    ;;
  different-dataset)  # rank 3's copy of the dataset has the same size and one other token
    head -c 20000 "$ptdp" | base64 >"$tmp/text.txt"
    "$ptdp" preprocess --input "$tmp/text.txt" --output-prefix "$tmp/a/ds" >/dev/null || fail "preprocess"
    cp "$tmp/a/ds.idx" "$tmp/a/ds.bin" "$tmp/b/"
    printf '~' | dd of="$tmp/b/ds.bin" bs=1 seek=100 conv=notrunc 2>/dev/null  # not a base64 character
    cmp -s "$tmp/a/ds.bin" "$tmp/b/ds.bin" && fail "the copy did not change"
    timed "${run[@]}" -np 3 -wdir "$tmp/a" "$ptdp" "${args[@]}" --iters 2 --data ds : \
                      -np 1 -wdir "$tmp/b" "$ptdp" "${args[@]}" --iters 2 --data ds
    expect_fast_failure "ptdp: error: the ranks of this job disagree on the content of --data ds (ds.idx and ds.bin): rank 0 has 'SHA-256 " \
                        "rank 3 has 'SHA-256 "
    ;;
  mpmd-hidden)
    one=(train --comm mpi --model tiny --dp 2 --iters 2)
    timed "${run[@]}" -np 1 "$ptdp" "${one[@]}" --hidden 64 : -np 1 "$ptdp" "${one[@]}" --hidden 128
    expect_fast_failure "ptdp: error: the ranks of this job disagree on --hidden: rank 0 has '64', rank 1 has '128'"
    ;;
  mpmd-seed)
    one=(train --comm mpi --model tiny --dp 2 --iters 2)
    timed "${run[@]}" -np 1 "$ptdp" "${one[@]}" --seed 1 : -np 1 "$ptdp" "${one[@]}" --seed 2
    expect_fast_failure "ptdp: error: the ranks of this job disagree on --seed: rank 0 has '1', rank 1 has '2'"
    ;;
  mpmd-bad-flag-on-one-rank)  # rank 1's flags fail validation; rank 0's pass
    one=(train --comm mpi --model tiny --dp 2 --iters 2)
    timed "${run[@]}" -np 1 "$ptdp" "${one[@]}" : -np 1 "$ptdp" "${one[@]}" --hidden 65
    expect_fast_failure "ptdp: error: --heads 4 must divide --hidden 65 (rank 1 of 2)"
    ;;
  without-comm-mpi)
    timed "${run[@]}" -np 2 -wdir "$tmp/a" "$ptdp" train --model tiny --iters 2 --csv rows.csv
    expect_fast_failure "ptdp: error: started by mpirun with 2 processes but --comm local" "add --comm mpi"
    [ "$(grep -c "started by mpirun" "$out")" -eq 1 ] || fail "not one line"
    [ ! -e "$tmp/a/rows.csv" ] || fail "a row was written"
    ;;
  accept-fleet-bad-flag)
    # A fleet whose flags every process refuses: one line from rank 0 and exit code 2, as on one
    # node (no MPI_Abort banner, no process waiting for the others).
    timed "${run[@]}" -np 2 "$ptdp" accept --hardware cpu --checks gemm,bogus
    [ "$rc" -eq 2 ] || fail "exit code $rc, not 2"
    expect_fast_failure "ptdp: error: --checks: unknown check 'bogus'" "(on all 2 ranks)"
    [ "$(grep -c "ptdp: " "$out")" -eq 1 ] || fail "not one line"
    ! grep -q "MPI_ABORT" "$out" || fail "MPI_Abort's banner"
    ;;
  reproduce-no-fitting-size)
    # A launched sweep whose world size none of its configurations needs runs nothing: it must
    # fail naming the sizes, not end as if done (exit 2, one line from rank 0).
    timed "${run[@]}" -np 3 "$ptdp" reproduce fig14 --mode run --scale small --out "$tmp/sweep"
    [ "$rc" -eq 2 ] || fail "exit code $rc, not 2"
    grep -qF "ptdp: error: fig14: no configuration still to run fits the 3 ranks of this launch; they need 64 ranks (" \
      "$out" || fail "no error naming the sizes"
    [ "$(grep -c "ptdp: error" "$out")" -eq 1 ] || fail "not one line"
    ;;
  reproduce-one-rank-estimate)
    # Fig. 8's t_f(b), t_b(b) are measured by one rank: a launch of several runs nothing of it and
    # fails saying so (it did not: "run it without mpirun", exit 0).
    timed "${run[@]}" -np 2 "$ptdp" reproduce fig8 --mode run --scale small --out "$tmp/sweep"
    [ "$rc" -eq 2 ] || fail "exit code $rc, not 2"
    grep -qF "ptdp: error: fig8: measured on one rank, not by the 2 ranks of this launch" "$out" || fail "no error"
    [ "$(grep -c "ptdp: error" "$out")" -eq 1 ] || fail "not one line"
    [ ! -e "$tmp/sweep/fig8.csv" ] || fail "rows written"
    ;;
  concurrent-rows)  # 3 MPI jobs at once, 3 times each, append to one CSV: one row per job, none lost
    one=(train --comm mpi --model tiny --dp 2 --iters 2 --micro-batch 1 --csv "$tmp/rows.csv")
    for round in 1 2 3; do
      pids=()
      for job in 1 2 3; do
        # (mpiruns started at once race creating one session directory: one each)
        mkdir -p "$tmp/ompi$job"
        "${run[@]}" --mca orte_tmpdir_base "$tmp/ompi$job" -np 2 "$ptdp" "${one[@]}" --experiment "job$job-round$round" \
          >"$tmp/job$job.txt" 2>&1 &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p" || { cat "$tmp"/job*.txt >"$out"; fail "a job failed"; }; done
    done
    cp "$tmp/rows.csv" "$out"
    rows=$(($(wc -l <"$tmp/rows.csv") - 1))
    echo "$rows rows"
    [ "$rows" -eq 9 ] || fail "$rows rows, not 9"
    for round in 1 2 3; do
      for job in 1 2 3; do
        [ "$(grep -c "^job$job-round$round," "$tmp/rows.csv")" -eq 1 ] || fail "job $job round $round: not one row"
      done
    done
    ;;
  *)
    echo "unknown case $case_"
    exit 2
    ;;
esac
echo "PASS: $case_"
