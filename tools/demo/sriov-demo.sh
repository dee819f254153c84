#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `make demo SRIOV=1`: a node whose PF carries SR-IOV VFs, for real. No machine here has an SR-IOV
# NIC, so the node is a VM: Debian 12's kernel under QEMU 8+ with an emulated Intel 82576 (igb)
# whose VFs igbvf drives. There the `rdma` CNI gives three pods of three networks a VF each of the
# one PF, with a MAC of its own, a VLAN (two pods on 101 reach each other, the one on 102 reaches
# neither), QoS, spoof-check, trust and a rate set through the PF and read back from the kernel;
# then gives every VF back exactly as it was, also after a plugin killed mid-ADD. The run is
# tests/vm/guest-sriov.sh, the VM tier's SR-IOV guest; this prints what it did.
#   tools/demo/sriov-demo.sh [BUILD] [OUT]
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/ci}
OUT=${2:-$BUILD/demo-sriov}
qemu-system-x86_64 -device help 2>/dev/null | grep -q '"igb"' || {
  echo "demo SRIOV=1: this QEMU has no igb (an SR-IOV NIC): it needs QEMU 8+, on Debian 12 from" \
    "bookworm-backports (.ci/install-deps.sh demo-sriov installs it)" >&2
  exit 1
}
rm -rf "$OUT"
mkdir -p "$OUT"
echo "$BUILD" >"$OUT/build"
echo "=== A node with an SR-IOV PF (QEMU's igb, Debian 12's kernel): booting ==="
rc=0
bash tests/vm/boot.sh vm-sriov-demo "$OUT" tests/vm/guest-sriov.sh igb 1 || rc=$?
sed -n 's/^PF /PF /p' "$OUT/console.log"
echo
echo "=== The PF's VFs as the kernel reports them (ip -d link show PF) ==="
sed -n 's/^before: */before ADD: /p; s/^after ADD: */in pods:    /p; s/^after DEL: */after DEL:  /p' \
  "$OUT/console.log"
echo
echo "=== What was checked ==="
sed -n 's/^addresses: /pod addresses: /p; /^ok   /p; /^FAIL /p' "$OUT/console.log"
echo
if [ "$rc" = 0 ]; then
  echo "demo SRIOV=1: passed (console and the plugin's log: $OUT)"
else
  echo "demo SRIOV=1: FAILED (exit $rc; console and the plugin's log: $OUT)"
fi
exit "$rc"
