#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs inside a VM-tier guest booted with ib_core netns_mode=0 (exclusive): the `rdma` CNI's
# exclusive-mode ADD against the real kernel. Soft-RoCE cannot follow a pod: moving its netdev out
# of the host namespace deletes the rxe device (measured here), and the RDMA device itself cannot
# change namespace. ADD must refuse before changing anything, with a clear error; the netdev and
# rxe0 stay on the host, and no record is left. Exit: the number of failed checks.
#   guest-exclusive.sh RESULTS
R=$1
B=$(cat "$R/build" 2>/dev/null || echo build/ci)
ip link set lo up
fails=0
check() { # check DESCRIPTION COMMAND...
  what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
check "the kernel is in exclusive mode" sh -c "rdma system show | grep -q 'netns exclusive'"
ip link add kvx0 type veth peer name kvx1 && ip link set kvx0 up && ip link set kvx1 up
rdma link add rxe0 type rxe netdev kvx0
ip netns add kvx-pod
state=/run/kube-rdma/cni-vm
conf='{"cniVersion":"1.0.0","name":"rdma-vm","type":"rdma","deviceID":"rxe0","stateDir":"'$state'"}'
out=$(echo "$conf" | CNI_COMMAND=ADD CNI_CONTAINERID=vmtest CNI_NETNS=/run/netns/kvx-pod CNI_IFNAME=net1 \
  CNI_PATH=/usr/lib/cni "$B/cni/kube-rdma" 2>"$R/exclusive.stderr")
rc=$?
echo "$out" >"$R/exclusive.out"
echo "ADD: exit $rc: $out"
check "ADD fails (exit $rc)" test "$rc" -ne 0
check "with a CNI error naming the HCA" sh -c "echo '$out' | grep -q '\"code\"' && echo '$out' | grep -q rxe0"
check "saying a software RDMA device cannot be moved, nothing changed" sh -c "echo '$out' | grep -q 'software RDMA device' && echo '$out' | grep -q 'nothing was changed'"
check "the netdev is back on the host" ip link show kvx0
check "the pod has no net1" sh -c "! ip -n kvx-pod link show net1 >/dev/null 2>&1"
check "no record is left" sh -c "[ -z \"\$(find $state -name '*.json' 2>/dev/null)\" ]"
check "rxe0 is still in the host's namespace" sh -c "rdma dev show | grep -q rxe0"
ip netns delete kvx-pod
rdma link delete rxe0 2>/dev/null
ip link delete kvx0 2>/dev/null
exit "$fails"
