#!/usr/bin/env bash
# ctest (vgpu build): `ptdp accept` over a fleet launched one process per GPU, as
# `srun --ntasks-per-node=2` on 2 nodes of 2 GPUs would: 4 MPI processes named node1, node1, node2,
# node2 (Slurm's SLURMD_NODENAME), each seeing the 2 virtual GPUs of its "node". Each process checks
# the GPU of its place on its node, and the report has a row per node and GPU. The inter-node
# checks are left out: the virtual GPUs' NCCL joins threads of one process, not processes (the
# NCCL path is AcceptFleet.GpuFleetsMeasureBetweenGpusOverNccl, with thread ranks). Four processes
# on two cores make the rates noisy, so the fleet's spread is 90% of the median: nobody is named.
set -uo pipefail
ptdp=$1
mpirun=$2
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$here/../../hardware/vgpu-accept.toml" "$dir/vgpu-accept.toml"
printf '\n[accept.fleet]\nmin_spread = { value = 0.9, source = "test: four processes on two cores" }\n' >> "$dir/vgpu-accept.toml"
args=(accept --hardware "$dir/vgpu-accept.toml" --quick --checks gemm,memory --out "$dir/fleet.json")
node() { echo -np 1 -x SLURMD_NODENAME="$1" -x VGPU_DEVICES=2; }  # each context: mpirun's -x is per context
"$mpirun" --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 \
  $(node node1) "$ptdp" "${args[@]}" : $(node node1) "$ptdp" "${args[@]}" : \
  $(node node2) "$ptdp" "${args[@]}" : $(node node2) "$ptdp" "${args[@]}" > "$dir/out.txt" 2>&1
rc=$?
cat "$dir/out.txt"
fail() { echo "FAIL: $*"; exit 1; }
[ "$rc" -eq 0 ] || fail "the fleet exited $rc"
for row in "node1 gpu0 +0" "node1 gpu1 +1" "node2 gpu0 +2" "node2 gpu1 +3"; do
  grep -Eq "^$row +PASS" "$dir/out.txt" || fail "no PASS row '$row'"
done
grep -q '^ACCEPT: PASS (fleet of 4 processes)$' "$dir/out.txt" || fail "the verdict line"
python3 - "$dir/fleet.json" "$dir/fleet.csv" <<'PY' || fail "the fleet report"
import csv, json, sys
j = json.load(open(sys.argv[1]))
got = [(m["node"], m["gpu"], m["device"]) for m in j["members"]]
assert [(n, g) for n, g, _ in got] == [("node1", 0), ("node1", 1), ("node2", 0), ("node2", 1)], got
assert all(d.startswith(f"GPU {g} of 2 x vgpu") for _, g, d in got), got
for m in j["members"]:
    gemm = next(c for c in m["checks"] if c["check"] == "gemm")
    assert f"slowest GPU {m['gpu']}:" in gemm["detail"] and "per GPU: " in gemm["detail"], gemm["detail"]
    assert "," not in gemm["detail"].split("per GPU: ")[1].split(";")[0], gemm["detail"]  # one GPU's figure
rows = list(csv.DictReader(open(sys.argv[2])))
assert [r["gpu"] for r in rows] == ["0", "0", "1", "1", "0", "0", "1", "1"], [r["gpu"] for r in rows]
PY
# Three processes on a node of two GPUs: two would share one, so the job is refused.
"$mpirun" --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 \
  $(node node1) "$ptdp" "${args[@]}" : $(node node1) "$ptdp" "${args[@]}" : $(node node1) "$ptdp" "${args[@]}" \
  > "$dir/crowded.txt" 2>&1
rc=$?
cat "$dir/crowded.txt"
[ "$rc" -ne 0 ] || fail "three processes on two GPUs exited 0"
grep -q "3 processes of this job run on node node1, which has 2 GPUs: launch one process per node or at most one per GPU" \
  "$dir/crowded.txt" || fail "the refusal of three processes on two GPUs"
echo "PASS: accept fleet of GPUs"
