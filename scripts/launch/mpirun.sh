#!/usr/bin/env bash
# Launches ptdp on a GPU cluster with Open MPI's mpirun, one process per GPU, in Megatron's rank
# order: rank = tp + t*(dp + d*pp). Ranks fill a node before the next one (--map-by ppr:G:node,
# rank-by slot), so the t <= G tensor-parallel ranks of a group share a node (NVLink) and
# pipeline stages (and data-parallel replicas) go across nodes (InfiniBand), as in the paper.
#
#   scripts/launch/mpirun.sh --hostfile hosts.txt [--gpus-per-node 8] [--dry-run] -- \
#       build/ptdp reproduce fig13 --mode run --scale paper
#   scripts/launch/mpirun.sh --hosts a,b [--np N] -- build/ptdp train ...   # hosts by name; N ranks
#   scripts/launch/mpirun.sh --layout T P D [--gpus-per-node 8]     # where every rank runs
#
# The NCCL environment below is passed to every rank (-x); override any of it by exporting it
# first (see scripts/launch/README.md). Without --hostfile or --hosts: one node, --np defaults to
# the nodes times --gpus-per-node. MPIRUN_ARGS adds mpirun options.

set -euo pipefail

gpus_per_node=8
hostfile=""
hosts=""
np=""
dry_run=0
layout=()

usage() { sed -n '2,/^$/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# need N "$@": the option in $1 has its N values.
need() {
  local n=$1; shift
  (($# > n)) && return 0
  case "$1" in
    --layout) echo "mpirun.sh: error: --layout takes three positive integers T P D (e.g. --layout 8 8 1)" >&2 ;;
    *) echo "mpirun.sh: error: $1 needs a value (see --help)" >&2 ;;
  esac
  exit 2
}

while (($#)); do
  case "$1" in
    --hostfile) need 1 "$@"; hostfile=$2; shift 2 ;;
    --hosts) need 1 "$@"; hosts=$2; shift 2 ;;
    --gpus-per-node) need 1 "$@"; gpus_per_node=$2; shift 2 ;;
    --np) need 1 "$@"; np=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --layout) need 3 "$@"; layout=("$2" "$3" "$4"); shift 4 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "mpirun.sh: error: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

is_count() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
is_count "$gpus_per_node" || { echo "mpirun.sh: error: --gpus-per-node '$gpus_per_node' must be a positive integer" >&2; exit 2; }

# --layout T P D: Megatron's rank order on nodes of G GPUs.
if ((${#layout[@]})); then
  t=${layout[0]} p=${layout[1]} d=${layout[2]}
  for v in "$t" "$p" "$d"; do
    is_count "$v" || { echo "mpirun.sh: error: --layout T P D takes three positive integers" >&2; exit 2; }
  done
  n=$((t * p * d))
  echo "rank  node  gpu  tp  dp  pp    ($n ranks: t=$t p=$p d=$d on $(((n + gpus_per_node - 1) / gpus_per_node)) node(s) of $gpus_per_node GPUs)"
  for ((r = 0; r < n; r++)); do
    printf "%4d  %4d  %3d  %2d  %2d  %2d\n" "$r" $((r / gpus_per_node)) $((r % gpus_per_node)) \
      $((r % t)) $(((r / t) % d)) $((r / (t * d)))
  done
  if ((t > gpus_per_node)); then
    echo "note: t=$t > $gpus_per_node GPUs per node: tensor-parallel groups cross nodes (the paper's Fig. 13 shows the cost)"
  fi
  exit 0
fi

(($#)) || { echo "mpirun.sh: error: no command after -- (e.g. -- build/ptdp reproduce fig13 --mode run)" >&2; exit 2; }

hostargs=()
nodes=1
if [[ -n "$hostfile" ]]; then
  [[ -r "$hostfile" ]] || { echo "mpirun.sh: error: --hostfile $hostfile cannot be read" >&2; exit 2; }
  nodes=$(grep -cv '^\s*\(#\|$\)' "$hostfile")
  hostargs=(--hostfile "$hostfile")
elif [[ -n "$hosts" ]]; then
  nodes=$(tr ',' '\n' <<<"$hosts" | grep -c .)
  hostargs=(--host "$(tr ',' '\n' <<<"$hosts" | sed "s/\$/:$gpus_per_node/" | paste -sd, -)")
fi
[[ -n "$np" ]] || np=$((nodes * gpus_per_node))

# What NCCL and Megatron-style training need; each can be overridden from the environment.
# NCCL finds the HCAs and the bootstrap interface itself; NCCL_IB_HCA and NCCL_SOCKET_IFNAME go
# to every rank only when set.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}
export NCCL_IB_TIMEOUT=${NCCL_IB_TIMEOUT:-22}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
envs=(CUDA_DEVICE_MAX_CONNECTIONS NCCL_IB_TIMEOUT NCCL_DEBUG OMP_NUM_THREADS PATH)
for v in NCCL_IB_HCA NCCL_SOCKET_IFNAME LD_LIBRARY_PATH OMP_WAIT_POLICY NCCL_IB_GID_INDEX NCCL_NET_GDR_LEVEL NCCL_TOPO_FILE NCCL_DEBUG_SUBSYS NCCL_ALGO NCCL_PROTO UCX_NET_DEVICES; do
  [[ -n "${!v:-}" ]] && envs+=("$v")
done
xs=()
for v in "${envs[@]}"; do xs+=(-x "$v"); done

# Extra mpirun options (e.g. MPIRUN_ARGS="--allow-run-as-root --oversubscribe" on a test box).
read -r -a extra <<<"${MPIRUN_ARGS:-}"
cmd=(mpirun -np "$np" "${hostargs[@]}" "${extra[@]}" --map-by "ppr:${gpus_per_node}:node" --rank-by slot --bind-to none
     "${xs[@]}" "$@")
if ((dry_run)); then
  printf '%q ' "${cmd[@]}"
  echo
  exit 0
fi
exec "${cmd[@]}"
