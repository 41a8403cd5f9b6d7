#!/usr/bin/env bash
# The launchers' arguments, with a stand-in srun (it prints its arguments) and mpirun.sh --dry-run:
# srun gets the cluster's default MPI plugin unless PTDP_SRUN_MPI names one, PTDP_CONTAINER_IMAGE
# adds pyxis's container options, and NCCL's NIC variables reach the ranks only when set.
#   scripts/launch/launch_test.sh     (ctest Launch.Arguments)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#!/bin/sh\necho "SRUN: $*"\n' >"$tmp/srun"
chmod +x "$tmp/srun"
fail=0
expect() {  # NAME TEXT NEEDLE: TEXT holds NEEDLE
  if [[ "$2" != *"$3"* ]]; then echo "FAIL: $1: no '$3' in: $2"; fail=1; fi
}
refuse() {  # NAME TEXT NEEDLE: TEXT lacks NEEDLE
  if [[ "$2" == *"$3"* ]]; then echo "FAIL: $1: '$3' in: $2"; fail=1; fi
}
sbatch_run() {  # ENV...: the srun line the template runs
  env SLURM_SUBMIT_DIR="$tmp" SLURM_JOB_NUM_NODES=1 SLURM_NTASKS=8 SLURM_JOB_NODELIST=n1 PATH="$tmp:$PATH" "$@" \
    bash "$here/ptdp.sbatch" train --model tiny | grep '^SRUN:'
}
out=$(sbatch_run)
expect default "$out" "SRUN: --cpu-bind=cores $tmp/build/ptdp train --model tiny"
refuse default "$out" "--mpi"
refuse default "$out" "--container"
out=$(sbatch_run PTDP_SRUN_MPI=pmi2)
expect mpi "$out" "--mpi=pmi2"
out=$(sbatch_run PTDP_CONTAINER_IMAGE=nvcr.io#nvidia/pytorch:24.10-py3)
expect container "$out" "--container-image=nvcr.io#nvidia/pytorch:24.10-py3 --container-mounts=$tmp:$tmp --container-workdir=$tmp"

out=$(env -u NCCL_IB_HCA -u NCCL_SOCKET_IFNAME "$here/mpirun.sh" --dry-run --np 2 -- ptdp train --model tiny)
refuse "mpirun default" "$out" "NCCL_IB_HCA"
refuse "mpirun default" "$out" "NCCL_SOCKET_IFNAME"
expect "mpirun default" "$out" "-x CUDA_DEVICE_MAX_CONNECTIONS"
out=$(NCCL_IB_HCA=mlx5_0 NCCL_SOCKET_IFNAME=ib0 "$here/mpirun.sh" --dry-run --np 2 -- ptdp train --model tiny)
expect "mpirun named NICs" "$out" "-x NCCL_IB_HCA"
expect "mpirun named NICs" "$out" "-x NCCL_SOCKET_IFNAME"
((fail)) || echo "PASS: launch arguments"
exit $fail
