# SPDX-License-Identifier: Apache-2.0
# Helpers of deploy/images/build.sh (sourced).

die() {
  echo "build.sh: $*" >&2
  exit 1
}

# This machine's Debian mirror and proxy, as apt uses them (no hardcoded mirror).
apt_mirror() {
  apt-get indextargets --format '$(SITE)' 'Identifier: Packages' 'Codename: bookworm' 2>/dev/null | awk 'NR == 1'
}
apt_proxy_env() {
  local http https
  http=$(apt-config dump --format '%v%n' Acquire::http::Proxy 2>/dev/null | awk 'NR == 1')
  https=$(apt-config dump --format '%v%n' Acquire::https::Proxy 2>/dev/null | awk 'NR == 1')
  [ -n "$http" ] && export http_proxy="$http"
  [ -n "$https" ] && export https_proxy="$https"
  return 0
}

# A Debian 12 minbase root as a tarball, made once with debootstrap (cached in $OUT/cache).
debian_root_tar() {
  local tar="$OUT/cache/debian-12-minbase.tar" mirror root
  if [ ! -s "$tar" ]; then
    command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
    mirror=$(apt_mirror)
    [ -n "$mirror" ] || die "no bookworm mirror in this machine's apt sources (apt-get indextargets)"
    apt_proxy_env
    root=$(mktemp -d)
    echo "build.sh: debootstrap --variant=minbase bookworm from $mirror" >&2
    debootstrap --variant=minbase bookworm "$root" "$mirror" >"$OUT/debootstrap.log" 2>&1 ||
      die "debootstrap failed (see $OUT/debootstrap.log)"
    mkdir -p "$OUT/cache"
    tar -C "$root" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$root"
  fi
  echo "$tar"
}

# debian:12 (and -slim) for the from-source build where Docker Hub is out of reach.
debian_base_image() {
  local tar ctr
  tar=$(debian_root_tar)
  ctr=$("${B[@]}" from scratch)
  tar -C "$("${B[@]}" mount "$ctr")" -xf "$tar"
  "${B[@]}" commit -q "$ctr" docker.io/library/debian:12 >/dev/null
  "${B[@]}" tag docker.io/library/debian:12 docker.io/library/debian:12-slim
  "${B[@]}" rm "$ctr" >/dev/null
}

# A value of a shipped manifest (deploy/manifests, plain YAML: no helm needed).
manifest() {
  /usr/bin/python3 -c 'import yaml, sys
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
print(eval(sys.argv[2], {"d": docs[0] if len(docs) == 1 else docs}))' "$@"
}

# Runs the checks inside the image, as a node would run it; then the copied rdma-validate in a
# plain Debian root.
smoke_image() {
  local engine=$1 tag=$2 hostbin copied config install_step copy_step ctr
  config=$(manifest deploy/manifests/10-configmap.yaml 'd["data"]["device-plugin.json"]')
  install_step=$(manifest deploy/manifests/20-daemonset.yaml 'd["spec"]["template"]["spec"]["initContainers"][0]["args"][0]')
  copy_step=$(manifest deploy/kustomize/example-trainer/statefulset.yaml \
    '[c for c in d[1]["spec"]["template"]["spec"]["initContainers"] if c["name"] == "rdma-validate-copy"][0]["args"][0]')
  hostbin=$(mktemp -d)
  copied=$(mktemp -d)
  local smoke='set -e
CNI_COMMAND=VERSION /usr/local/bin/kube-rdma </dev/null | grep -q supportedVersions
for b in /usr/local/bin/*; do
  case "$b" in
    */kube-rdma) continue ;;   # static
    */rdma-validate-ucx.so | */rdma-validate-mpi.so) continue ;;   # loaded in job images, on their UCX and MPI
  esac
  /lib64/ld-linux-x86-64.so.2 --list "$b" >/tmp/libs || { echo "$b: cannot be loaded"; exit 1; }
  ! grep "not found" /tmp/libs
done
printf "%s" "$KUBERDMA_CONFIG" > /tmp/device-plugin.json
/usr/local/bin/rdma-device-plugin --check-config --config /tmp/device-plugin.json
/usr/local/bin/rdma-doctor --help >/tmp/doctor-help   # not /dev/null: read-only in some builders
sh -c "$KUBERDMA_INSTALL_STEP" && cmp /usr/local/bin/kube-rdma /host/opt/cni/bin/kube-rdma
echo "#!/bin/sh another plugin" > /host/opt/cni/bin/rdma
! /usr/local/bin/kube-rdma --install /host/opt/cni/bin/rdma 2>/tmp/refused && grep -q "another plugin" /host/opt/cni/bin/rdma
grep -q "belongs to another CNI plugin" /tmp/refused
sh -c "$KUBERDMA_COPY_STEP" && cmp /usr/local/bin/rdma-validate /kube-rdma/bin/rdma-validate
for m in /usr/local/bin/rdma-validate-*.so; do cmp "$m" "/kube-rdma/bin/${m##*/}"; done
echo "smoke: rdma VERSION, libraries, --check-config, rdma-doctor, CNI install (and its refusal), validator copy: ok"'
  if [ "$engine" = docker ]; then
    docker run --rm --entrypoint /bin/sh -v "$hostbin:/host/opt/cni/bin" -v "$copied:/kube-rdma/bin" \
      -e KUBERDMA_CONFIG="$config" -e KUBERDMA_INSTALL_STEP="$install_step" \
      -e KUBERDMA_COPY_STEP="$copy_step" "$tag" -c "$smoke"
  else
    ctr=$("${B[@]}" from --pull=never "$tag")
    "${B[@]}" run --isolation chroot -v "$hostbin:/host/opt/cni/bin" -v "$copied:/kube-rdma/bin" \
      --env KUBERDMA_CONFIG="$config" --env KUBERDMA_INSTALL_STEP="$install_step" \
      --env KUBERDMA_COPY_STEP="$copy_step" "$ctr" -- /bin/sh -c "$smoke" || {
      "${B[@]}" rm "$ctr" >/dev/null
      rm -rf "$hostbin" "$copied"
      die "the image failed its smoke test"
    }
    "${B[@]}" rm "$ctr" >/dev/null
  fi
  bash tests/images/validator_plain_root.sh "$(debian_root_tar)" "$copied/rdma-validate" || {
    rm -rf "$hostbin" "$copied"
    die "the copied rdma-validate failed in a plain Debian root"
  }
  rm -rf "$hostbin" "$copied"
}

# A stand-in for CUDA_IMAGE where nvidia/cuda cannot be pulled: this machine's CUDA headers, NCCL's
# header and the static CUDA runtime (all the from-source build takes from it), at the paths the
# Dockerfile copies.
cuda_headers_image() {
  local name=localhost/kube-rdma/cuda-headers:local ctr mnt cuda=${CUDA_HOME:-/usr/local/cuda}
  [ -f "$cuda/include/nccl.h" ] && [ -f "$cuda/lib64/libcudart_static.a" ] ||
    die "CUDA_IMAGE cannot be pulled and $cuda has no nccl.h and libcudart_static.a to stand in"
  if ! "${B[@]}" inspect "$name" >/dev/null 2>&1; then
    ctr=$("${B[@]}" from scratch)
    mnt=$("${B[@]}" mount "$ctr")
    mkdir -p "$mnt/usr/local/cuda/lib64" "$mnt/usr/include"
    cp -rL "$cuda/include" "$mnt/usr/local/cuda/include"
    cp -L "$cuda/lib64/libcudart_static.a" "$mnt/usr/local/cuda/lib64/"
    cp -L "$cuda/include/nccl.h" "$mnt/usr/include/nccl.h"
    "${B[@]}" commit -q "$ctr" "$name" >/dev/null
    "${B[@]}" rm "$ctr" >/dev/null
  fi
  echo "$name"
}
