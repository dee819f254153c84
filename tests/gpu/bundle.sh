#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packs what tests/gpu/run.sh needs from a build tree into one small folder to carry to a GPU
# machine that has glibc, libstdc++, libnl and NCCL but not gRPC, Protobuf, abseil or
# prometheus-cpp: the binaries stripped of debug info in bin/, the shared libraries they need
# that such a machine lacks in lib/, the CNI reference plugins host-local (the demo's IPAM) and
# bridge (its cluster network) in cni/, and the chart rendering the demo runs in rendered/.
#   tests/gpu/bundle.sh [BUILD] [OUT]        (defaults: build/ci build/gpu-bundle)
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/ci}
OUT=${2:-build/gpu-bundle}
BINS="cni/kube-rdma deviceplugin/rdma-device-plugin tools/validator/rdma-validate tools/doctor/rdma-doctor
      tools/demo/kuberdma-demo tests/gpu_e2e tests/rdma_live_tests bench/nccl_bare"
# On the GPU machine already (or the loader's own): never carried.
PRESENT='^(linux-vdso|ld-linux|libc|libm|libpthread|librt|libdl|libstdc\+\+|libgcc_s|libnccl|libz|libnl-[a-z-]*3)\.so'
rm -rf "$OUT"
mkdir -p "$OUT/bin" "$OUT/lib" "$OUT/cni" "$OUT/rendered"
for b in $BINS; do
  objcopy --strip-debug "$BUILD/$b" "$OUT/bin/$(basename "$b")"
  { ldd "$BUILD/$b" 2>/dev/null || true; } | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
    if ! [[ $name =~ $PRESENT ]] && [ ! -e "$OUT/lib/$name" ]; then
      objcopy --strip-debug "$path" "$OUT/lib/$name"
    fi
  done
done
# What a binary loads rather than links (rdma-device-plugin's libcurl for the API server, the DRA
# demo's path), with what it links in turn.
LOADED=$(ldconfig -p | awk '$1 == "libcurl.so.4" && !seen++ {print $NF}')  # no early exit: ldconfig's SIGPIPE would fail the pipe
for path in $LOADED; do
  objcopy --strip-debug "$path" "$OUT/lib/$(basename "$path")"
  ldd "$path" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name dep; do
    if ! [[ $name =~ $PRESENT ]] && [ ! -e "$OUT/lib/$name" ]; then
      objcopy --strip-debug "$dep" "$OUT/lib/$name"
    fi
  done
done
cp /usr/lib/cni/host-local /usr/lib/cni/bridge "$OUT/cni/"
bash deploy/render.sh "$OUT/rendered" >/dev/null
du -sh "$OUT"
