#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs in each of two VM-tier guests joined by a QEMU socket network (tests/vm/run.sh boots them
# at once): rdma-validate --transport verbs between the guests' Soft-RoCE HCAs, as two pods of a
# host-network Job run it. Guest vm-verbs0 is rank 0 (10.77.0.1), vm-verbs1 rank 1 (10.77.0.2).
#   1. a healthy link: both pass, each rail's bytes in the port counters;
#   2. both NICs policed on ingress to 1 Mbit/s, far below --min-busbw: both fail, naming rxe0
#      (tbf on egress would do it too, but Soft-RoCE's packets through a qdisc crash this kernel:
#      a page fault in validate_xmit_skb, seen in this tier);
#   3. RoCE's UDP port 4791 dropped on ingress (the link cut for RDMA, TCP still up): both fail,
#      naming rxe0.
# Exit: the number of failed checks.
R=$1
B=$(cat "$R/build" 2>/dev/null || echo build/ci)
rank=${HOSTNAME##*verbs}
[ -n "$rank" ] || rank=$(hostname | sed 's/.*verbs//')
me=10.77.0.$((rank + 1))
fails=0
check() { # check DESCRIPTION COMMAND...
  what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
ip link set lo up
ip addr add "$me/24" dev eth0 && ip link set eth0 up
rdma link add rxe0 type rxe netdev eth0
peer=10.77.0.$((2 - rank))
i=0
until /bin/busybox ping -c1 -W1 "$peer" >/dev/null 2>&1 || [ $i -ge 60 ]; do i=$((i + 1)); done
check "rank $rank reaches its peer $peer" /bin/busybox ping -c1 -W2 "$peer"
probe() { # probe NAME PORT [ARGS]: rdma-validate between the guests; its exit status
  name=$1 port=$2
  shift 2
  "$B/tools/validator/rdma-validate" --transport verbs --mode multi-pod --rank "$rank" --world-size 2 \
    --comm-id "10.77.0.1:$port" --expect rxe0 --size 256K --iters 4 --timeout 60 \
    --json "$R/$name.json" --termination-log /nonexistent "$@" >"$R/$name.txt" 2>&1
}
json() { /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

probe healthy 29500 --min-busbw 0.001
rc=$?
sed 's/^/  /' "$R/healthy.txt"
check "healthy: pass (exit $rc)" test "$rc" = 0
check "healthy: rxe0 carried the probe's bytes (port counters)" \
  test "$(json "$R/healthy.json" 'd["devices"][0]["carriedTraffic"]')" = True
check "healthy: a bandwidth and a latency" \
  test "$(json "$R/healthy.json" 'd["verbs"][0]["writeGBps"] > 0 and d["verbs"][0]["latencyUs"] > 0')" = True

tc qdisc add dev eth0 handle ffff: ingress
tc filter add dev eth0 parent ffff: protocol ip u32 match ip protocol 17 0xff match ip dport 4791 0xffff \
  action police rate 1mbit burst 8k drop
probe limited 29600 --min-busbw 0.001
rc=$?
sed 's/^/  /' "$R/limited.txt"
check "rate-limited: fail (exit $rc)" test "$rc" = 1
check "rate-limited: the problem names rxe0" grep -qE "problem: rxe0: (RDMA write .* below --min-busbw|the verbs probe failed)" "$R/limited.txt"
tc qdisc del dev eth0 ingress

tc qdisc add dev eth0 handle ffff: ingress
tc filter add dev eth0 parent ffff: protocol ip u32 match ip protocol 17 0xff match ip dport 4791 0xffff action drop
probe cut 29700 --min-busbw 0.001
rc=$?
sed 's/^/  /' "$R/cut.txt"
check "RDMA cut: fail (exit $rc)" test "$rc" = 1
check "RDMA cut: the problem names rxe0" grep -q "rxe0: the verbs probe failed" "$R/cut.txt"
tc qdisc del dev eth0 ingress
exit "$fails"
