#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# VF ADD+DEL: the `rdma` plugin in mode vf (one process per verb: planning, the node lock, the
# record, the PF-side settings and their undo, the move) against the same done by hand with
# iproute2 to the same end state (`ip link set PF vf 0 mac .. vlan .. qos .. spoofchk .. trust ..
# max_tx_rate ..`; the VF netdev's MAC, the move, its pod name and up in one `ip link set`; the same
# back; the settings undone: four processes, as few as iproute2 allows), interleaved, on a real VF of
# QEMU's emulated igb in the VM tier's SR-IOV guest (tests/vm/guest-sriov.sh; QEMU 8+). Under TCG
# both run slowly; the ratio is what is compared. Target: within 1.25x.
#   bench/vf_bench.sh [BUILD] [ITERATIONS]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/ci}
N=${2:-15}
qemu-system-x86_64 -device help 2>/dev/null | grep -q '"igb"' || {
  echo "vf_bench: SKIP: this QEMU has no igb (QEMU 8+, bookworm-backports)"; exit 0; }
OUT=$BUILD/bench/vf
rm -rf "$OUT" && mkdir -p "$OUT"
echo "$BUILD" >"$OUT/build"
echo "$N" >"$OUT/bench"
bash tests/vm/boot.sh vm-vf-bench "$OUT" tests/vm/guest-sriov.sh igb 1 >/dev/null ||
  { echo "vf_bench: the guest failed (console: $OUT/console.log)"; exit 1; }
median() { sort -n "$1" | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)] / 1e6}'; }
r=$(median "$OUT/bench-rdma")
h=$(median "$OUT/bench-ip")
awk -v r="$r" -v h="$h" -v n="$N" 'BEGIN {
  printf "VF ADD+DEL on igb (VM, TCG), %d each, interleaved (medians):\n", n
  printf "  rdma mode vf (ADD + DEL)                   %8.1f ms\n", r
  printf "  by hand: ip link (PF settings, move, back) %8.1f ms\n", h
  printf "  rdma / by hand = %.2fx (target 1.25x: %s)\n", r / h, r / h <= 1.25 ? "MET" : "MISSED" }'
