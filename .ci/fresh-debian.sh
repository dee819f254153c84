#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Proves the README's commands on a freshly installed Debian 12: a debootstrap chroot holding only
# git, make and CA certificates (no kubectl, Helm, compiler or library), this repository's HEAD
# cloned into it, and `make demo` or `make test` run there as root, timed. What a green run in a
# developer's tree can hide (a missing install step, a tool only our machines carry) fails here.
# Needs root and Debian's mirror; not run by CI (CI is such a machine already).
#   .ci/fresh-debian.sh demo|test [CHROOT] [LOG]     (defaults: /srv/kuberdma-fresh, CHROOT.log)
# KEEP_CLONE=1 runs again in the clone the last run made (its build directory kept).
# CUDA=1 lends the chroot this machine's /usr/local/cuda, read-only (a GPU node's build: the
# validator's NCCL runner, the images tier); without it the chroot has no CUDA.
set -euo pipefail
what=${1:?usage: fresh-debian.sh demo|test [CHROOT] [LOG]}
root=${2:-/srv/kuberdma-fresh}
log=${3:-$root.$what.log}
repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
[ "$(id -u)" -eq 0 ] || { echo "fresh-debian.sh: needs root (debootstrap, mounts)" >&2; exit 2; }
if [ ! -x "$root/usr/bin/git" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
  debootstrap --include=git,make,ca-certificates bookworm "$root" >/dev/null
fi
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
# The chroot's root a mount point of its own, as / is on a machine: `ip -n` makes it rslave.
if ! mountpoint -q "$root"; then
  mount --bind "$root" "$root"
  mounted+=("$root")
fi
for m in proc sys dev dev/pts run tmp; do
  mountpoint -q "$root/$m" && continue
  case $m in
    proc) mount -t proc proc "$root/proc" ;;
    run|tmp) mount -t tmpfs "$m" "$root/$m" ;;
    *) mount --rbind "/$m" "$root/$m" ;;
  esac
  mounted+=("$root/$m")
done
if [ "${CUDA:-0}" = 1 ]; then
  [ -d /usr/local/cuda ] || { echo "fresh-debian.sh: CUDA=1 but this machine has no /usr/local/cuda" >&2; exit 2; }
  mkdir -p "$root/usr/local/cuda"
  mount --bind -o ro /usr/local/cuda "$root/usr/local/cuda"
  mounted+=("$root/usr/local/cuda")
elif mountpoint -q "$root/usr/local/cuda" 2>/dev/null; then
  umount -l "$root/usr/local/cuda"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The site's own CAs (a TLS-inspecting proxy to the package registries, say): a machine of this
# site trusts them, so the chroot does too; Debian's public CAs are there already.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null 2>&1 || true
fi
if [ "${KEEP_CLONE:-0}" != 1 ] || [ ! -d "$root/root/kube-rdma" ]; then
  rm -rf "$root/root/kube-rdma"
  git clone -q "$repo" "$root/root/kube-rdma"
fi
start=$(date +%s)
set +e
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  CI=true bash -c "cd /root/kube-rdma && make $what" > "$log" 2>&1
rc=$?
set -e
echo "fresh Debian 12: make $what exited $rc in $(( $(date +%s) - start )) s (log: $log)"
exit $rc
