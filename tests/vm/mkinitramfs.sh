#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The VM tier's kernel and initramfs: Debian 12's own kernel (the version linux-image-amd64
# depends on, fetched with apt-get download through this machine's apt sources and cached), and an
# initramfs of busybox-static as /init plus the modules the tier needs, in dependency order
# (depmod -b, modprobe --show-depends). Prints the kernel's path, then the initramfs's.
#   tests/vm/mkinitramfs.sh CACHE_DIR
set -euo pipefail
cache=$1
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$cache"
pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-6/ && !found {print $2; found = 1}')
[ -n "$pkg" ] || { echo "mkinitramfs: apt knows no linux-image-amd64 (apt-get update?)" >&2; exit 1; }
kroot="$cache/$pkg"
if [ ! -d "$kroot/boot" ]; then
  deb=$(cd "$cache" && ls "${pkg}"_*.deb 2>/dev/null | head -1 || true)
  if [ -z "$deb" ]; then
    id _apt >/dev/null 2>&1 && chown _apt "$cache"
    (cd "$cache" && apt-get download -q "$pkg" >/dev/null 2>&1) ||
      { echo "mkinitramfs: apt-get download $pkg failed" >&2; exit 1; }
    deb=$(cd "$cache" && ls "${pkg}"_*.deb | head -1)
  fi
  rm -rf "$kroot.tmp"
  dpkg-deb -x "$cache/$deb" "$kroot.tmp"
  mv "$kroot.tmp" "$kroot"
fi
kver=$(ls "$kroot/lib/modules" | head -1)
vmlinuz="$kroot/boot/vmlinuz-$kver"
initrd="$cache/initramfs-$kver.cpio.gz"
if [ ! -s "$initrd" ] || [ "$here/init" -nt "$initrd" ] || [ "$0" -nt "$initrd" ]; then
  [ -f "$kroot/lib/modules/$kver/modules.dep" ] || /sbin/depmod -b "$kroot" "$kver"
  # Virtio (PCI, 9p root, NIC), RDMA (core, uverbs, umad, CM, Soft-RoCE: crc32_generic first or
  # `rdma link add` fails with ENOENT), and what the tests build with (veth, macvlan, ipvlan,
  # bridge (the simulated fleet's switches), netem, tbf), and igb/igbvf for QEMU's SR-IOV NIC.
  mods="virtio_pci 9pnet_virtio 9p virtio_net crc32_generic ib_core ib_uverbs ib_umad rdma_ucm rdma_rxe
        veth bridge macvlan ipvlan sch_netem sch_tbf sch_ingress cls_u32 act_gact act_police
        igb igbvf"
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/modules" "$stage/proc" "$stage/sys" "$stage/dev" "$stage/host"
  cp /bin/busybox "$stage/bin/busybox"
  : >"$stage/modules/order"
  for m in $mods; do
    /sbin/modprobe -d "$kroot" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}' |
      while read -r ko; do
        b=$(basename "$ko")
        grep -qx "$b" "$stage/modules/order" && continue
        cp "$ko" "$stage/modules/$b"
        echo "$b" >>"$stage/modules/order"
      done
  done
  cp "$here/init" "$stage/init"
  chmod +x "$stage/init"
  (cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) >"$initrd.tmp"
  mv "$initrd.tmp" "$initrd"
  rm -rf "$stage"
fi
echo "$vmlinuz"
echo "$initrd"
