#!/usr/bin/env bash
# NCCL 2.30 for a GPU machine whose own NCCL is older (the toolkit here and the first H200 image
# carried 2.28): 2.30 is the first release that runs several ranks of a communicator on one GPU
# (NCCL_MULTI_RANK_GPU_ENABLE=1), which is how ptdp's NCCL layouts run on a one-GPU machine.
#
#   scripts/nccl_for_device.sh          # -> build-bundle/nccl-sm90.tar.xz (nccl/libnccl.so.2, nccl/MANIFEST)
#
# The library is PyPI's nvidia-nccl-cu13 wheel, pinned by version and SHA-256 (NVIDIA's build; the
# same binary PyTorch installs). Built for sm_75 to sm_120 it is 252 MB and compresses to ~190 MB;
# ptdp's GPU machines are sm_90 (H100, H200), so the device code of the other architectures is
# zeroed (scripts/ptdp_tools/fatbin.py: the sm_90 cubins and the rest of the file byte for byte as
# the wheel has them), which xz then packs to ~38 MB. gpu_session.sh --nccl TAR unpacks it there and
# puts it before the machine's NCCL for ptdp's programs alone.
set -euo pipefail
cd "$(dirname "$0")/.."

version=2.30.7
wheel=nvidia_nccl_cu13-$version-py3-none-manylinux_2_18_x86_64.whl
sha256=cefa7fdb9710efd0f39c5f1be1d61ff6fc9a996c451265bd7fbdcf9455ed4b50
sm=90
out=build-bundle/nccl-sm$sm.tar.xz

# The wheel (216 MB) is kept outside build-bundle/, which travels to the GPU machine whole.
cache=${PTDP_NCCL_CACHE:-.deps/nccl-cache}
mkdir -p "$cache" "$(dirname "$out")"
if ! echo "$sha256  $cache/$wheel" | sha256sum -c --status 2>/dev/null; then
  echo "nccl_for_device: downloading nvidia-nccl-cu13==$version (216 MB) from PyPI"
  rm -f "$cache/$wheel"
  python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux_2_18_x86_64 \
    "nvidia-nccl-cu13==$version" -d "$cache" ||
    { echo "nccl_for_device: pip could not download nvidia-nccl-cu13==$version" >&2; exit 1; }
  echo "$sha256  $cache/$wheel" | sha256sum -c --status ||
    { echo "nccl_for_device: $cache/$wheel: SHA-256 is not the pinned $sha256" >&2; exit 1; }
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/nccl"
python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract("nvidia/nccl/lib/libnccl.so.2", sys.argv[2])' \
  "$cache/$wheel" "$stage"
said=$(cd scripts && python3 -m ptdp_tools.fatbin prune "$stage/nvidia/nccl/lib/libnccl.so.2" "$stage/nccl/libnccl.so.2" --sm "$sm")
echo "$said"
{
  echo "nccl_version=$version"
  echo "source=PyPI nvidia-nccl-cu13==$version ($wheel, sha256 $sha256)"
  echo "device_code=sm_$sm cubins only (others zeroed by scripts/ptdp_tools/fatbin.py)"
  echo "pruned=${said#fatbin: }"
  echo "libnccl_sha256=$(sha256sum "$stage/nccl/libnccl.so.2" | cut -d' ' -f1)"
  echo "made=$(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
} >"$stage/nccl/MANIFEST"
tar -C "$stage" -cf - nccl | xz -T0 -6 >"$out.tmp"
mv "$out.tmp" "$out"
echo "nccl_for_device: $out $(($(stat -c %s "$out") / 1048576)) MiB (libnccl.so.2 $version, sm_$sm)"
# A device call carries the working tree and build-bundle/ in at most 64 MiB.
tree_b=$( (git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null || true) |
  awk '{s += $1} END {print s + 0}')
bundle_b=$(find build-bundle -type f -printf '%s\n' | awk '{s += $1} END {print s + 0}')
total_mib=$(( (tree_b + bundle_b + 1048575) / 1048576 ))
echo "nccl_for_device: build-bundle/ $((bundle_b / 1048576)) MiB and the tree $((tree_b / 1048576)) MiB: together ${total_mib} MiB of the 64 a device call carries"
if ((total_mib > 64)); then
  echo "nccl_for_device: build-bundle/ and the tree take ${total_mib} MiB, over the 64 MiB a device call carries" >&2
  exit 1
fi
echo "take along with the device bundle; run there: bash scripts/gpu_session.sh --bundle build-bundle/ptdp-device.tar.xz --nccl $out OUTDIR"
