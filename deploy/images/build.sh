#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the node image (deploy/images/Dockerfile) and proves it works: the CNI binary answers
# VERSION, the DaemonSet's install step puts it in a host directory, the device plugin accepts
# the ConfigMap's config, rdma-doctor runs, and no binary misses a shared library.
#
#   deploy/images/build.sh [TAG]          # default ghcr.io/kube-rdma/kube-rdma:0.1.0
#
# Uses Docker when an engine answers, else buildah (Debian's `buildah`, run as root, chroot
# isolation, vfs storage). Where Docker Hub is out of reach (air-gapped build hosts, our CI), set
# KUBERDMA_OFFLINE_BASE=1: debian:12 and debian:12-slim are then made locally with debootstrap
# from the Debian mirror apt already uses. The validator image starts from nvidia/cuda, which
# has no such substitute: build it with an engine that can pull it.
set -euo pipefail
cd "$(dirname "$0")/../.."
tag=${1:-ghcr.io/kube-rdma/kube-rdma:0.1.0}
config=$(/usr/bin/python3 -c 'import yaml,sys; print(yaml.safe_load(open(sys.argv[1]))["data"]["device-plugin.json"])' \
  deploy/manifests/10-configmap.yaml)
install_step=$(/usr/bin/python3 -c 'import yaml,sys
ds = yaml.safe_load(open(sys.argv[1]))
print(ds["spec"]["template"]["spec"]["initContainers"][0]["args"][0])' deploy/manifests/20-daemonset.yaml)
smoke='set -e
CNI_COMMAND=VERSION /usr/local/bin/rdma </dev/null | grep -q supportedVersions
for b in /usr/local/bin/*; do ! ldd "$b" 2>&1 | grep "not found"; done
printf "%s" "$KUBERDMA_CONFIG" > /tmp/device-plugin.json
/usr/local/bin/rdma-device-plugin --check-config --config /tmp/device-plugin.json
/usr/local/bin/rdma-doctor --help >/dev/null
sh -c "$KUBERDMA_INSTALL_STEP" && cmp /usr/local/bin/rdma /host/opt/cni/bin/rdma
echo "smoke: rdma VERSION, libraries, --check-config, rdma-doctor, atomic CNI install: ok"'
hostbin=$(mktemp -d)
trap 'rm -rf "$hostbin"' EXIT

if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  docker build -f deploy/images/Dockerfile -t "$tag" .
  docker run --rm --entrypoint /bin/sh -v "$hostbin:/host/opt/cni/bin" \
    -e KUBERDMA_CONFIG="$config" -e KUBERDMA_INSTALL_STEP="$install_step" "$tag" -c "$smoke"
  exit 0
fi

command -v buildah >/dev/null || {
  echo "build.sh: no container engine answers and buildah is not installed (apt-get install buildah)" >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || { echo "build.sh: buildah here needs root" >&2; exit 1; }
B=(buildah --storage-driver vfs)
if [ "${KUBERDMA_OFFLINE_BASE:-0}" = 1 ] && ! "${B[@]}" inspect docker.io/library/debian:12 >/dev/null 2>&1; then
  command -v debootstrap >/dev/null || { echo "build.sh: KUBERDMA_OFFLINE_BASE needs debootstrap" >&2; exit 1; }
  root=$(mktemp -d)
  echo "build.sh: making debian:12 with debootstrap" >&2
  debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
  ctr=$("${B[@]}" from scratch)
  cp -a "$root/." "$("${B[@]}" mount "$ctr")/"
  "${B[@]}" commit -q "$ctr" docker.io/library/debian:12 >/dev/null
  "${B[@]}" tag docker.io/library/debian:12 docker.io/library/debian:12-slim
  "${B[@]}" rm "$ctr" >/dev/null
  rm -rf "$root"
fi
pull=()
[ "${KUBERDMA_OFFLINE_BASE:-0}" = 1 ] && pull=(--pull=never)
"${B[@]}" bud "${pull[@]}" --isolation chroot --layers=false -f deploy/images/Dockerfile -t "$tag" .
ctr=$("${B[@]}" from --pull=never "$tag")
trap '"${B[@]}" rm "$ctr" >/dev/null; rm -rf "$hostbin"' EXIT
"${B[@]}" run --isolation chroot -v "$hostbin:/host/opt/cni/bin" \
  --env KUBERDMA_CONFIG="$config" --env KUBERDMA_INSTALL_STEP="$install_step" "$ctr" -- /bin/sh -c "$smoke"
echo "build.sh: $tag ($("${B[@]}" images --format '{{.Size}}' "$tag"))"
