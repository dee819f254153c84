#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the node image and proves it works: the CNI binary answers VERSION, no binary misses a
# shared library, the DaemonSet's install step puts `kube-rdma` in a host directory (and refuses
# another plugin's file), the device plugin accepts the ConfigMap's config, rdma-doctor runs, the chart's copy step hands rdma-validate to a
# job container, and that copy runs in a plain Debian root (tests/images/validator_plain_root.sh).
# Saves it as an OCI archive in build/images and prints its size and digest.
#
#   deploy/images/build.sh                # `make images`: from the binaries in $BUILD (build/ci);
#                                         # exit 77 (skipped) when its validator has no NCCL runner
#   deploy/images/build.sh --from-source  # deploy/images/Dockerfile: compiles in a debian:12 stage
#
# Docker when an engine answers, else Debian's buildah (root, chroot isolation, vfs storage).
# Bases that cannot be pulled (no Docker Hub: our CI) are made here with debootstrap from this
# machine's own apt sources and proxies: debian:12 for --from-source, and the plain Debian root
# of the validator test. The image's own root is Debian packages unpacked (deploy/images/mkroot.sh).
# Environment: BUILD, OUT (build/images), KUBERDMA_IMAGE (localhost/kube-rdma: the local name; push.sh gives it your registry's),
# KUBERDMA_IMAGE_BUDGET_MB (80), CUDA_IMAGE (--from-source: where CUDA's headers come from; when
# nvidia/cuda cannot be pulled, this machine's /usr/local/cuda stands in).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=deploy/images
. "$here/lib.sh"
BUILD=${BUILD:-build/ci}
OUT=${OUT:-build/images}
repo=${KUBERDMA_IMAGE:-localhost/kube-rdma}
# The budget: 11 MB of stripped binaries, 36 MB of gRPC/Abseil/Protobuf/OpenSSL/prometheus-cpp,
# 13 MB of glibc and libstdc++ (54 MB when it was set): room for point releases and a binary
# more, and a failed build before the image doubles unnoticed.
budget_mb=${KUBERDMA_IMAGE_BUDGET_MB:-80}
from_source=0
[ "${1:-}" = --from-source ] && from_source=1

# The release (the chart's appVersion) at its tag v<appVersion>; anything else is that release
# plus the commit it was built from (and -dirty for uncommitted changes), never mistaken for it.
release=$(awk -F'"' '/^appVersion:/ {print $2}' deploy/helm/kube-rdma/Chart.yaml)
version=$release
if [ "$(git describe --exact-match --tags --dirty 2>/dev/null)" != "v$release" ]; then
  version="$release-$(git describe --always --dirty --abbrev=12 --exclude '*' 2>/dev/null || echo unknown)"
fi
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
epoch=$(git log -1 --format=%ct 2>/dev/null || echo 0)
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
tag="$repo:$version"
mkdir -p "$OUT"

engine=buildah
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  engine=docker
else
  command -v buildah >/dev/null || die "no container engine answers and buildah is not installed (apt-get install buildah)"
  [ "$(id -u)" -eq 0 ] || die "buildah here needs root"
fi
B=(buildah --storage-driver vfs)
args=(--build-arg VERSION="$version" --build-arg REVISION="$revision" --build-arg CREATED="$created")

if [ "$from_source" = 1 ]; then
  [ -n "${CUDA_IMAGE:-}" ] && args+=(--build-arg CUDA_IMAGE="$CUDA_IMAGE")
  if [ "$engine" = docker ]; then
    docker build "${args[@]}" -f "$here/Dockerfile" -t "$tag" .
  else
    "${B[@]}" inspect docker.io/library/debian:12 >/dev/null 2>&1 || debian_base_image
    if [ -z "${CUDA_IMAGE:-}" ] && ! "${B[@]}" pull -q nvidia/cuda:13.0.0-devel-ubuntu24.04 >/dev/null 2>&1; then
      args+=(--build-arg CUDA_IMAGE="$(cuda_headers_image)")
    fi
    "${B[@]}" bud --pull=never --isolation chroot --layers=false --timestamp "$epoch" "${args[@]}" \
      -f "$here/Dockerfile" -t "$tag" .
  fi
else
  bins=("$BUILD/cni/kube-rdma" "$BUILD/deviceplugin/rdma-device-plugin" "$BUILD/tools/doctor/rdma-doctor"
    "$BUILD/tools/validator/rdma-validate" "$BUILD/tools/validator/rdma-validate-verbs.so")
  for b in "${bins[@]}"; do [ -x "$b" ] || die "$b is missing: make build first"; done
  # Every job's image gets its rdma-validate from this one: one built without CUDA and NCCL can
  # only take inventory, and would pass nodes it never proved. Exit 77: `make test` skips, saying so.
  if [ "$(cat "$BUILD/tools/validator/runner.txt" 2>/dev/null)" != nccl ]; then
    echo "SKIP: not building the node image: $BUILD's rdma-validate was built without CUDA and NCCL" \
      "(inventory only; CMake found no cuda_runtime.h, nccl.h and libcudart_static.a: set CUDA_HOME" \
      "and reconfigure, or build --from-source, whose stage has them)" >&2
    exit 77
  fi
  # The verbs probe's module needs libibverbs' providers (mlx5, rxe, ...), which it loads by name.
  SOURCE_DATE_EPOCH=$epoch EXTRA_PACKAGES="ibverbs-providers libcurl4" bash "$here/mkroot.sh" "$OUT/context/rootfs" "$OUT/debs" "${bins[@]}"
  # The UCX and MPI probes' modules, copied into job pods beside rdma-validate: they load the job
  # image's libucp and libmpi, so none of theirs goes into this image.
  for m in ucx mpi; do
    f="$BUILD/tools/validator/rdma-validate-$m.so"
    if [ -f "$f" ]; then install -m 0644 "$f" "$OUT/context/rootfs/usr/local/bin/"; fi
  done
  if [ "$engine" = docker ]; then
    docker build "${args[@]}" -f "$here/Dockerfile.runtime" -t "$tag" "$OUT/context"
  else
    "${B[@]}" bud --isolation chroot --layers=false --timestamp "$epoch" "${args[@]}" \
      -f "$here/Dockerfile.runtime" -t "$tag" "$OUT/context" >/dev/null
  fi
fi

smoke_image "$engine" "$tag"
archive="$OUT/kube-rdma-$version.oci.tar"
[ "$engine" = docker ] && archive="$OUT/kube-rdma-$version.docker.tar"
rm -f "$archive"
if [ "$engine" = docker ]; then
  docker save "$tag" -o "$archive"
  size=$(docker image inspect "$tag" --format '{{.Size}}')
  digest=$(docker image inspect "$tag" --format '{{.Id}}')
else
  "${B[@]}" push -q "$tag" "oci-archive:$archive:$tag" >/dev/null
  ctr=$("${B[@]}" from --pull=never "$tag")
  size=$(du -sb "$("${B[@]}" mount "$ctr")" | cut -f1)
  "${B[@]}" rm "$ctr" >/dev/null
  digest=$(skopeo inspect --format '{{.Digest}}' "oci-archive:$archive" 2>/dev/null || echo "?")
fi
size_mb=$(((size + 1048575) / 1048576))
echo "build.sh: $tag: ${size_mb} MB unpacked (budget ${budget_mb} MB), $(du -h "$archive" | cut -f1) to pull, digest $digest"
# What deploy/images/push.sh pushes.
printf 'archive=%s\nversion=%s\nrevision=%s\ndigest=%s\n' "$archive" "$version" "$revision" "$digest" >"$OUT/node-image.env"
echo "build.sh: archive $archive; push it to your registry with"
echo "  deploy/images/push.sh REGISTRY/PATH   # e.g. registry.example.com/kube-rdma"
echo "  ctr -n k8s.io images import $archive   # or onto one node, containerd"
[ "$size_mb" -le "$budget_mb" ] || die "$tag is ${size_mb} MB, over its ${budget_mb} MB budget (see deploy/images/build.sh)"
