#!/usr/bin/env bash
# The launchers' arguments, with a stand-in srun and scontrol and mpirun.sh --dry-run: srun gets
# the cluster's default MPI plugin when it is PMIx, pmix when it is not, PTDP_SRUN_MPI when srun
# has it, and the job stops with one line otherwise; PTDP_CONTAINER_IMAGE adds pyxis's container
# options and stops a binary the image lacks libraries for; NCCL's NIC variables reach the ranks
# only when set; mpirun.sh refuses an option without its values.
#   scripts/launch/launch_test.sh     (ctest Launch.Arguments)
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The stand-in srun: --mpi=list prints $PLUGINS as Slurm 23 does, ldd (the container check) prints
# $LDD, anything else its arguments; scontrol says MpiDefault=$MPI_DEFAULT.
cat >"$tmp/srun" <<'EOF'
#!/bin/sh
if [ "$1" = "--mpi=list" ]; then
  echo "MPI plugin types are..."; for p in $PLUGINS; do printf '\t%s\n' "$p"; done
  echo "specific pmix plugin versions available: pmix_v4"; exit 0
fi
for a in "$@"; do [ "$a" = ldd ] && { printf '%s\n' "$LDD"; exit 0; }; done
echo "SRUN: $*"
EOF
printf '#!/bin/sh\necho "MpiDefault              = $MPI_DEFAULT"\n' >"$tmp/scontrol"
chmod +x "$tmp/srun" "$tmp/scontrol"
fail=0
expect() {  # NAME TEXT NEEDLE: TEXT holds NEEDLE
  if [[ "$2" != *"$3"* ]]; then echo "FAIL: $1: no '$3' in: $2"; fail=1; fi
}
refuse() {  # NAME TEXT NEEDLE: TEXT lacks NEEDLE
  if [[ "$2" == *"$3"* ]]; then echo "FAIL: $1: '$3' in: $2"; fail=1; fi
}
sbatch_all() {  # ENV...: what the template prints (stdout and stderr), then its exit status
  env SLURM_SUBMIT_DIR="$tmp" SLURM_JOB_NUM_NODES=1 SLURM_NTASKS=8 SLURM_JOB_NODELIST=n1 PATH="$tmp:$PATH" \
    PLUGINS="none pmi2 pmix" MPI_DEFAULT=pmix LDD="	libc.so.6 => /lib/libc.so.6" "$@" \
    bash "$here/ptdp.sbatch" train --model tiny 2>&1
  echo "rc=$?"
}
sbatch_run() { sbatch_all "$@" | grep '^SRUN:'; }  # ENV...: the srun line the template runs
out=$(sbatch_run)
expect default "$out" "SRUN: --cpu-bind=cores $tmp/build/ptdp train --model tiny"
refuse default "$out" "--mpi"
refuse default "$out" "--container"
out=$(sbatch_run PTDP_SRUN_MPI=pmi2)
expect mpi "$out" "--mpi=pmi2"
out=$(sbatch_run PTDP_CONTAINER_IMAGE=nvcr.io#nvidia/pytorch:24.10-py3)
expect container "$out" "--container-image=nvcr.io#nvidia/pytorch:24.10-py3 --container-mounts=$tmp:$tmp --container-workdir=$tmp"

# The pre-flight: a default plugin that is no PMIx becomes --mpi=pmix, with a line saying so; a
# PTDP_SRUN_MPI that srun lacks, or no PMIx at all, stops the job with one line before any rank.
out=$(sbatch_all MPI_DEFAULT=none)
expect "default none" "$out" "default MPI plugin is 'none'"
expect "default none" "$out" "SRUN: --cpu-bind=cores --mpi=pmix $tmp/build/ptdp"
out=$(sbatch_all MPI_DEFAULT=pmix_v4)
refuse "default pmix_v4" "$out" "--mpi"
out=$(sbatch_all PTDP_SRUN_MPI=pmix_v4 MPI_DEFAULT=none)
expect "named version" "$out" "--mpi=pmix_v4"
out=$(sbatch_all PTDP_SRUN_MPI=pmix_v9)
expect "unknown plugin" "$out" "ptdp: error: PTDP_SRUN_MPI=pmix_v9 is not an MPI plugin of this cluster's srun (srun --mpi=list: none pmi2 pmix pmix_v4)"
expect "unknown plugin" "$out" "rc=2"
refuse "unknown plugin" "$out" "SRUN:"
out=$(sbatch_all PLUGINS="none pmi2" MPI_DEFAULT=none)
expect "no pmix" "$out" "ptdp: error: this cluster's srun has no PMIx plugin"
expect "no pmix" "$out" "PTDP_SRUN_MPI=pmi2"
refuse "no pmix" "$out" "SRUN:"
# The container check: a binary whose libraries the image lacks stops the job, naming them.
out=$(sbatch_all PTDP_CONTAINER_IMAGE=img LDD="	libfmt.so.9 => not found")
expect "container libraries" "$out" "ptdp: error: $tmp/build/ptdp cannot run in img"
expect "container libraries" "$out" "libfmt.so.9 => not found"
expect "container libraries" "$out" "rc=2"
refuse "container libraries" "$out" "SRUN:"

# mpirun.sh: an option without its values is one line, exit 2 (not bash's "unbound variable").
out=$("$here/mpirun.sh" --layout 2 2 2>&1; echo "rc=$?")
expect "layout short" "$out" "mpirun.sh: error: --layout takes three positive integers"
expect "layout short" "$out" "rc=2"
refuse "layout short" "$out" "unbound"
out=$("$here/mpirun.sh" --np 2>&1; echo "rc=$?")
expect "np without value" "$out" "mpirun.sh: error: --np needs a value"
expect "np without value" "$out" "rc=2"

out=$(env -u NCCL_IB_HCA -u NCCL_SOCKET_IFNAME "$here/mpirun.sh" --dry-run --np 2 -- ptdp train --model tiny)
refuse "mpirun default" "$out" "NCCL_IB_HCA"
refuse "mpirun default" "$out" "NCCL_SOCKET_IFNAME"
expect "mpirun default" "$out" "-x CUDA_DEVICE_MAX_CONNECTIONS"
out=$(NCCL_IB_HCA=mlx5_0 NCCL_SOCKET_IFNAME=ib0 "$here/mpirun.sh" --dry-run --np 2 -- ptdp train --model tiny)
expect "mpirun named NICs" "$out" "-x NCCL_IB_HCA"
expect "mpirun named NICs" "$out" "-x NCCL_SOCKET_IFNAME"
((fail)) || echo "PASS: launch arguments"
exit $fail
