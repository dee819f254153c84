#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The VM tier (`make vmtest`, run by `make test`): Debian 12's own kernel under QEMU (TCG) with
# Soft-RoCE, the host's root and build read-only over 9p, and the VM-only tests on the RDMA
# devices that kernel makes:
#   - guest "shared" (ib_core's default netns mode): tests/vm/guest.sh: vm_tests (the sysfs model
#     on rxe, GID tables, rdma-doctor, the device plugin's allocation opened from a pod namespace,
#     netem loss in the simulated fleet) and rdma_live_tests (RDMA netlink: device dump, netns
#     mode get/set, the doctor's view of it);
#   - guest "exclusive" (netns_mode=0): tests/vm/guest-exclusive.sh: the CNI's exclusive-mode ADD
#     refused cleanly;
#   - guests "verbs0" and "verbs1" at once, joined by a QEMU socket network:
#     tests/vm/guest-verbs.sh: rdma-validate --transport verbs between their Soft-RoCE HCAs,
#     healthy, rate-limited and cut;
#   - guest "sriov" (QEMU 8+: an emulated Intel 82576, igb): tests/vm/guest-sriov.sh: the CNI's
#     mode vf on real VFs (every setting igb implements set through the PF and read back, VLAN
#     isolation between pods, all restored on DEL and after a SIGKILL mid-ADD; and
#     tests/vm/sriov-sweep.sh: a VF tenant's forged LLDPDUs not believed, nothing of one pod
#     left to the next on its VF, a SIGKILL before each write and netlink send of ADD and DEL
#     (driver rebinds included) with the VF back exactly, bad input refused with nothing changed);
#   - guests "comm0" and "comm1" at once, two rails each on two QEMU multicast networks:
#     tests/vm/guest-comm.sh: Debian's UCX and Open MPI told what `rdma-validate --env` plans,
#     proven by rdma-validate --transport ucx and --transport mpi over both rails' Soft-RoCE;
#   - guests "fleet0".."fleet2" at once, two rails each on two QEMU multicast networks:
#     tests/vm/guest-fleet.sh: the fleet's verbs rail sweep (rdma-validate --mode acceptance
#     --transport verbs) names one node's cut rail and another's policed rail.
# Each guest's console and suites' output are kept in OUT (build/vm/results). Exit 0 when all
# passed, 1 on a failure or a hung guest, 77 when QEMU is not installed.
#   tests/vm/run.sh [BUILD] [OUT]
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:-build/ci}
OUT=${2:-build/vm/results}
command -v qemu-system-x86_64 >/dev/null || {
  echo "SKIP: the VM tier needs qemu-system-x86 (apt-get install qemu-system-x86)"; exit 77; }
for b in tests/vm_tests tests/rdma_live_tests tools/doctor/rdma-doctor cni/kube-rdma \
  tools/validator/rdma-validate tools/validator/rdma-validate-verbs.so \
  tools/validator/rdma-validate-ucx.so tools/validator/rdma-validate-mpi.so; do
  [ -x "$BUILD/$b" ] || { echo "vm: $BUILD/$b is missing: build first"; exit 1; }
done
rm -rf "$OUT"
# The kernel and initramfs once, before guests boot at once (each boot.sh would build them).
bash tests/vm/mkinitramfs.sh "${KUBERDMA_VM_CACHE:-build/vm/cache}" >/dev/null || exit 1
failed=0
t0=$SECONDS
guest() { # guest NAME SCRIPT NETNS_MODE
  local name=$1 script=$2 mode=$3 t=$SECONDS rc
  mkdir -p "$OUT/$name"
  echo "$BUILD" >"$OUT/$name/build"
  bash tests/vm/boot.sh "vm-$name" "$OUT/$name" "$script" none "$mode"
  rc=$?
  # The guest's own report: its suites as it printed them on the console.
  sed -n '/^== /p; /^ok   /p; /^FAIL /p; /test cases/p' "$OUT/$name/console.log" | sed "s/^/  [$name] /"
  echo "vm: guest $name: exit $rc in $((SECONDS - t)) s"
  if [ "$rc" != 0 ]; then
    failed=$((failed + 1))
    echo "vm: guest $name failed; console tail:"
    tail -25 "$OUT/$name/console.log" | sed 's/^/    /'
    for f in "$OUT/$name"/*.txt; do
      [ -f "$f" ] && grep -q "FAILED\|failed" "$f" && { echo "  --- $f"; grep -B3 -A12 "FAILED" "$f" | head -60; }
    done
  fi
}
guest shared tests/vm/guest.sh 1
guest exclusive tests/vm/guest-exclusive.sh 0
guests=7
# SR-IOV on QEMU's emulated Intel 82576 (igb, QEMU 8+: bookworm-backports'; install-deps.sh).
if qemu-system-x86_64 -device help 2>/dev/null | grep -q '"igb"'; then
  guests=8
  t=$SECONDS
  mkdir -p "$OUT/sriov" && echo "$BUILD" >"$OUT/sriov/build"
  rc=0
  # Its crash sweep kills the plugin ~55 times: more than the default 300 s under a slow TCG.
  KUBERDMA_VM_TIMEOUT=${KUBERDMA_VM_TIMEOUT:-600} \
    bash tests/vm/boot.sh vm-sriov "$OUT/sriov" tests/vm/guest-sriov.sh igb 1 || rc=$?
  sed -n '/^ok   /p; /^FAIL /p' "$OUT/sriov/console.log" | sed "s/^/  [sriov] /"
  echo "vm: guest sriov: exit $rc in $((SECONDS - t)) s"
  if [ "$rc" != 0 ]; then
    failed=$((failed + 1))
    echo "vm: guest sriov failed; console tail:"
    tail -40 "$OUT/sriov/console.log" | sed 's/^/    /'
    tail -20 "$OUT/sriov/sriov.stderr" 2>/dev/null | sed 's/^/    /'
  fi
else
  echo "vm: SKIP guest sriov: this QEMU has no igb (SR-IOV NIC): QEMU 8+ (bookworm-backports)"
fi

# Two guests at once, joined by a QEMU socket network (vm-verbs0 listens): the verbs probe.
pair() {
  local t=$SECONDS port=$((20000 + RANDOM % 20000)) rc0 rc1 n
  for n in 0 1; do mkdir -p "$OUT/verbs$n" && echo "$BUILD" >"$OUT/verbs$n/build"; done
  bash tests/vm/boot.sh vm-verbs0 "$OUT/verbs0" tests/vm/guest-verbs.sh "listen:$port" 1 &
  local p0=$!
  sleep 1
  bash tests/vm/boot.sh vm-verbs1 "$OUT/verbs1" tests/vm/guest-verbs.sh "connect:$port" 1
  rc1=$?
  wait "$p0"
  rc0=$?
  for n in 0 1; do
    sed -n '/^ok   /p; /^FAIL /p' "$OUT/verbs$n/console.log" | sed "s/^/  [verbs$n] /"
  done
  echo "vm: guests verbs0/verbs1: exit $rc0/$rc1 in $((SECONDS - t)) s"
  for n in 0 1; do
    local rc=$rc0
    [ "$n" = 1 ] && rc=$rc1
    if [ "$rc" != 0 ]; then
      failed=$((failed + 1))
      echo "vm: guest verbs$n failed; console tail:"
      tail -40 "$OUT/verbs$n/console.log" | sed 's/^/    /'
    fi
  done
}
pair

# Three guests at once, two rails each: a rail is a multicast group on the host's loopback (a
# random group and ports, so that concurrent runs do not meet).
fleet() {
  local t=$SECONDS group="239.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"
  local p1=$((20000 + RANDOM % 20000)) n pids=() rc
  for n in 0 1 2; do
    mkdir -p "$OUT/fleet$n" && echo "$BUILD" >"$OUT/fleet$n/build"
    bash tests/vm/boot.sh "vm-fleet$n" "$OUT/fleet$n" tests/vm/guest-fleet.sh \
      "mcast:$group:$p1,$((p1 + 1)):$n" 1 &
    pids+=($!)
  done
  for n in 0 1 2; do
    rc=0
    wait "${pids[$n]}" || rc=$?
    sed -n '/^ok   /p; /^FAIL /p' "$OUT/fleet$n/console.log" | sed "s/^/  [fleet$n] /"
    if [ "$rc" != 0 ]; then
      failed=$((failed + 1))
      echo "vm: guest fleet$n failed (exit $rc); console tail:"
      tail -40 "$OUT/fleet$n/console.log" | sed 's/^/    /'
    fi
  done
  echo "vm: guests fleet0..2 in $((SECONDS - t)) s"
}
fleet

# Two guests at once, two rails each (multicast groups, as the fleet's): the communication
# libraries other than NCCL (UCX, Open MPI), from Debian's packages.
comm() {
  local t=$SECONDS group="239.$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1)).$((RANDOM % 250 + 1))"
  local p1=$((20000 + RANDOM % 20000)) n pids=() rc
  for n in 0 1; do
    mkdir -p "$OUT/comm$n" && echo "$BUILD" >"$OUT/comm$n/build"
    KUBERDMA_VM_TIMEOUT=${KUBERDMA_VM_TIMEOUT:-900} bash tests/vm/boot.sh "vm-comm$n" "$OUT/comm$n" \
      tests/vm/guest-comm.sh "mcast:$group:$p1,$((p1 + 1)):$n" 1 &
    pids+=($!)
  done
  for n in 0 1; do
    rc=0
    wait "${pids[$n]}" || rc=$?
    sed -n '/^ok   /p; /^FAIL /p' "$OUT/comm$n/console.log" | sed "s/^/  [comm$n] /"
    if [ "$rc" != 0 ]; then
      failed=$((failed + 1))
      echo "vm: guest comm$n failed (exit $rc); console tail:"
      tail -40 "$OUT/comm$n/console.log" | sed 's/^/    /'
    fi
  done
  echo "vm: guests comm0/comm1 in $((SECONDS - t)) s"
}
if command -v ucx_perftest >/dev/null && command -v mpirun >/dev/null; then
  guests=$((guests + 2))
  comm
else
  echo "vm: SKIP guests comm0/comm1: UCX and Open MPI are not installed (ucx-utils, openmpi-bin)"
fi
echo "vm: $((guests - failed)) of $guests guests passed in $((SECONDS - t0)) s (results in $OUT)"
[ "$failed" = 0 ]
