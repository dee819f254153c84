#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Boots one VM-tier guest under QEMU (TCG: a KVM guest hangs on these machines) and waits for it:
# the host's root read-only over 9p, RESULTS (a host folder) writable, SCRIPT run in the repo.
#   tests/vm/boot.sh NAME RESULTS SCRIPT [NET] [NETNS_MODE]
#     NET: none, or listen:PORT / connect:PORT (a QEMU socket network to the other guest), or
#          mcast:GROUP:PORT[,PORT...]:INDEX (one NIC per port, each a multicast group on the
#          host's loopback that any number of guests join: a rail; INDEX makes the MACs unique),
#          or igb: an emulated Intel 82576 with SR-IOV (QEMU 8+) on a q35 machine
# Exit: the script's status in the guest; 124 when the guest hung (timeout); 125 no QEMU.
set -euo pipefail
name=$1 results=$2 script=$3 net=${4:-none} mode=${5:-1}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cache=${KUBERDMA_VM_CACHE:-$repo/build/vm/cache}
timeout_s=${KUBERDMA_VM_TIMEOUT:-300}
command -v qemu-system-x86_64 >/dev/null || { echo "boot.sh: no qemu-system-x86_64 (apt-get install qemu-system-x86)"; exit 125; }
mapfile -t kernel < <(bash "$here/mkinitramfs.sh" "$cache")
mkdir -p "$results"
rm -f "$results/guest.rc"
results=$(cd "$results" && pwd)
nic=(-nic none)
machine=()
case $net in
  # The VF BARs must stay below 4 GiB: QEMU 10's igb never maps them above (its VFs are created
  # before their BARs are declared 64-bit), and the VFs then never leave reset.
  igb) machine=(-M q35 -global q35-pcihost.pci-hole64-size=0)
    nic=(-netdev user,id=n0 -device igb,netdev=n0) ;;
  listen:*) nic=(-netdev "socket,id=n0,listen=127.0.0.1:${net#listen:}" -device "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:01") ;;
  connect:*) nic=(-netdev "socket,id=n0,connect=127.0.0.1:${net#connect:}" -device "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:02") ;;
  mcast:*)
    IFS=: read -r _ group ports index <<<"$net"
    nic=()
    i=0
    for port in ${ports//,/ }; do
      nic+=(-netdev "socket,id=n$i,mcast=$group:$port,localaddr=127.0.0.1"
        -device "virtio-net-pci,netdev=n$i,mac=52:54:00:77:$(printf %02x "$i"):$(printf %02x "$index")")
      i=$((i + 1))
    done ;;
esac
rc=0
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 "${machine[@]}" -accel tcg -smp 2 -m 2048 -nographic -no-reboot \
  -kernel "${kernel[0]}" -initrd "${kernel[1]}" \
  -append "console=ttyS0 panic=-1 quiet kuberdma.repo=$repo kuberdma.results=$results kuberdma.script=$script kuberdma.hostname=$name kuberdma.netns_mode=$mode" \
  -virtfs "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap" \
  -virtfs "local,path=$repo,mount_tag=repo,security_model=none,readonly=on,multidevs=remap" \
  -virtfs "local,path=$results,mount_tag=results,security_model=none,multidevs=remap" \
  "${nic[@]}" >"$results/console.log" 2>&1 </dev/null || rc=$?
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  echo "boot.sh: $name hung: no power-off within ${timeout_s} s (console: $results/console.log)"
  exit 124
fi
[ -f "$results/guest.rc" ] || { echo "boot.sh: $name stopped without a result (console: $results/console.log)"; exit 1; }
exit "$(cat "$results/guest.rc")"
