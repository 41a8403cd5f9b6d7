#!/usr/bin/env bash
# Builds here, for a bare GPU machine (no Debian packages, no network; the driver, CUDA 13 with
# cuBLAS(Lt) and NCCL, python3 with PyTorch): a CUDA Release build for sm_90 (H100, H200) in
# build-device/, then the bundle build-bundle/ptdp-device.tar.xz holding the stripped binaries
# (ptdp, the test binary, the CUDA benchmarks) and every shared library they need that such a
# machine lacks (OpenBLAS with libgfortran and libquadmath, libgomp, fmt, Google Benchmark,
# toml++, cudart; libstdc++ and libgcc are linked statically). cuBLAS, cuBLASLt, NCCL and cuDNN are
# the machine's own (hundreds of MB): scripts/gpu_session.sh finds them there and says so if not
# (cuDNN is loaded at run time, for --attention-backend cudnn only).
#   scripts/device_bundle.sh            # build, bundle, print what to take along and the command
#   scripts/device_bundle.sh --check    # also fail if the bundle with the tree exceeds the budget
#   scripts/device_bundle.sh --nccl-session   # ptdp, ptdp_tests and bench_nccl only: beside NCCL
#                                             # 2.30 (scripts/nccl_for_device.sh, 36 MiB) in one call
# The tree plus the bundle must stay under 48 MiB (the device machine takes 64 MiB in all); with
# --nccl-session, the tree, the bundle and NCCL under 64 (nccl_for_device.sh checks it).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${PTDP_DEVICE_BUILD:-build-device}
out=build-bundle
limit_mib=48
check=0
targets=(ptdp ptdp_tests bench_gemm_cuda bench_kernels_cuda bench_copy_cuda bench_layer_cuda bench_overlap_cuda bench_nccl)
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    --nccl-session) targets=(ptdp ptdp_tests bench_nccl) ;;  # the NCCL stages' programs (gpu_session.sh)
    -h | --help) sed -nE '2,/^set -euo/{/^#/s/^# ?//p}' "$0"; exit 0 ;;
    *) echo "device_bundle: unknown argument $arg (--check, --nccl-session, --help)" >&2; exit 2 ;;
  esac
done

if [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
command -v nvcc >/dev/null || { echo "device_bundle: nvcc not found (the CUDA toolkit builds the bundle)" >&2; exit 2; }
scripts/setup_packages.sh
# cuDNN's C++ front end (headers only, pinned): the fused attention of --attention-backend cudnn.
# ptdp loads the machine's libcudnn at run time (PyTorch's, there), so no cuDNN travels.
scripts/cudnn_frontend.sh >/dev/null ||
  { echo "device_bundle: cuDNN's front end could not be fetched (scripts/cudnn_frontend.sh)" >&2; exit 1; }

# MPI off (the GPU machine has none), SentencePiece off (not needed there, and one library less);
# OpenSSL's libcrypto and PCRE2 travel in lib/ like the other libraries.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPTDP_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DPTDP_MPI=OFF -DPTDP_WITH_SENTENCEPIECE=OFF -UCMAKE_DISABLE_FIND_PACKAGE_PkgConfig \
  "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc" >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/ptdp-device/bin" "$stage/ptdp-device/libexec" "$stage/ptdp-device/lib" "$out"
# bin/NAME is a wrapper that puts the bundle's lib/ and the machine's CUDA library folders (the file
# libpath, which gpu_session.sh's probe writes) on LD_LIBRARY_PATH for that program alone: exported
# for the whole session they would also reach python3, whose PyTorch needs a newer libstdc++.
# PTDP_NCCL_DIR, when set, goes first: the NCCL the session's nccl stages chose.
for t in "${targets[@]}"; do
  f=$(find "$build" -maxdepth 2 -type f -name "$t" -perm -u+x | head -1)
  [[ -n "$f" ]] || { echo "device_bundle: $t was not built in $build" >&2; exit 1; }
  strip -o "$stage/ptdp-device/libexec/$t" "$f"
  cat >"$stage/ptdp-device/bin/$t" <<'WRAP'
#!/bin/sh
d=$(dirname "$(readlink -f "$0")")/..
p=$(cat "$d/libpath" 2>/dev/null)
LD_LIBRARY_PATH="${PTDP_NCCL_DIR:+$PTDP_NCCL_DIR:}$d/lib${p:+:$p}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/libexec/$(basename "$0")" "$@"
WRAP
  chmod +x "$stage/ptdp-device/bin/$t"
done

# Shared libraries: whatever ldd resolves outside the C library and the CUDA libraries the device
# machine has (cuBLAS, cuBLASLt, NCCL, the driver).
keep_system='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|linux-vdso)\.so'
theirs='^(libcublas|libcublasLt|libnccl|libcuda)\.so'
declare -A seen=()
for f in "$stage"/ptdp-device/libexec/*; do
  while read -r name _ path _; do
    [[ -z "$name" || "$name" =~ $keep_system || "$name" =~ $theirs ]] && continue
    [[ -n "${seen[$name]:-}" ]] && continue
    [[ -f "$path" ]] || { echo "device_bundle: $f needs $name, not found here" >&2; exit 1; }
    seen[$name]=1
    cp -L "$path" "$stage/ptdp-device/lib/$name"
    strip --strip-unneeded "$stage/ptdp-device/lib/$name" 2>/dev/null || true
  done < <(ldd "$f" | awk '$2 == "=>" {print $1, $2, $3, $4}')
done

sha=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
git diff --quiet HEAD 2>/dev/null || sha="$sha-dirty"
{
  echo "git_sha=$sha"
  echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host=$(hostname)"
  echo "nvcc=$(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  echo "cuda_arch=sm_90"
  echo "programs=${targets[*]}"
  echo "cudnn_frontend=$(basename "$(dirname "$(scripts/cudnn_frontend.sh)")" | sed 's/^cudnn-frontend-//')"
  echo "glibc=$(ldd --version | head -1 | awk '{print $NF}')"
  # The newest GLIBC symbol version any file needs: the device machine's C library must be at least this.
  echo "glibc_needed=$(objdump -T "$stage"/ptdp-device/libexec/* "$stage"/ptdp-device/lib/* 2>/dev/null |
    grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 | sed 's/GLIBC_//')"
  echo "needs_from_device=$(for f in "$stage"/ptdp-device/libexec/*; do ldd "$f"; done | awk '{print $1}' |
    grep -E "$theirs" | sort -u | tr '\n' ' ')"
} >"$stage/ptdp-device/MANIFEST"
(cd "$stage/ptdp-device" && sha256sum bin/* libexec/* lib/* >SHA256SUMS)

tar -C "$stage" -cf - ptdp-device | xz -T0 -6 >"$out/ptdp-device.tar.xz.tmp"
mv "$out/ptdp-device.tar.xz.tmp" "$out/ptdp-device.tar.xz"

bundle_b=$(stat -c %s "$out/ptdp-device.tar.xz")
tree_b=$( (git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null || true) |
  awk '{s += $1} END {print s + 0}')
total_mib=$(( (bundle_b + tree_b + 1048575) / 1048576 ))
cat "$stage/ptdp-device/MANIFEST"
echo "bundle: $out/ptdp-device.tar.xz $((bundle_b / 1024)) KiB ($(ls "$stage/ptdp-device/bin" | wc -l) binaries," \
  "$(ls "$stage/ptdp-device/lib" | wc -l) libraries); the tree $((tree_b / 1024)) KiB; together ${total_mib} MiB of ${limit_mib}"
if ((total_mib > limit_mib)); then
  echo "device_bundle: the bundle and the tree take ${total_mib} MiB, over ${limit_mib} MiB" >&2
  ((check)) && exit 1
fi
cat <<EOF
take along: the working tree and $out/ (ignored by git; carry it)
run there:  bash scripts/gpu_session.sh --bundle $out/ptdp-device.tar.xz OUTDIR     (8 minutes at most)
EOF
