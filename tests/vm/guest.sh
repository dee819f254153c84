#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs inside a VM-tier guest (tests/vm/init chroots into the host's root): the VM-only tests on
# the guest kernel's real RDMA devices. RESULTS gets each suite's output; the exit status is the
# number of failed suites.
#   guest.sh RESULTS   (BUILD: build/ci, or the file RESULTS/build)
R=$1
B=$(cat "$R/build" 2>/dev/null || echo build/ci)
ip link set lo up
failed=0
suite() { # suite NAME COMMAND...
  name=$1
  shift
  echo "== $name: $*"
  t0=$(date +%s)
  "$@" >"$R/$name.txt" 2>&1
  rc=$?
  tail -3 "$R/$name.txt"
  echo "== $name: exit $rc in $(($(date +%s) - t0)) s"
  echo "$rc" >"$R/$name.rc"
  [ "$rc" = 0 ] || failed=$((failed + 1))
}
suite vm_tests "$B/tests/vm_tests" --doctor "$B/tools/doctor/rdma-doctor"
# RDMA netlink against this kernel, with a Soft-RoCE device in the dump.
ip link add kvl0 type veth peer name kvl1 && ip link set kvl0 up && rdma link add rxel0 type rxe netdev kvl0
suite live "$B/tests/rdma_live_tests" --doctor "$B/tools/doctor/rdma-doctor"
rdma link delete rxel0
ip link delete kvl0
# A pod on an ipvlan child of a rail forging LLDPDUs (this kernel has ipvlan; the development
# machine's does not): the device plugin's record keeps the real switch.
suite lldp_ipvlan /usr/bin/python3 tests/netns/lldp_rules_test.py "$B/tools/doctor/rdma-doctor" \
  "$B/deviceplugin/rdma-device-plugin" tests/fixtures/sysfs/roce8 --child ipvlan
exit "$failed"
