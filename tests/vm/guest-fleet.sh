#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs in each of three VM-tier guests (vm-fleet0..2, booted at once by tests/vm/run.sh), each
# with two NICs on two QEMU multicast networks (rail 1: 10.77.0.0/24, rail 2: 10.78.0.0/24) and a
# Soft-RoCE HCA on each (rxe0, rxe1): the fleet's verbs rail sweep, as the acceptance Job runs
# it on a new fabric before any GPU is involved. Two faults are planted:
#   - vm-fleet2's rail 1 is cut for RDMA (RoCE's UDP port 4791 dropped on ingress; TCP still up);
#   - vm-fleet1's rail 2 is policed on ingress to 1 Mbit/s.
# rdma-validate --mode acceptance --transport verbs must name both, node and rail, and pass
# vm-fleet0. --min-fleet-fraction 0.2: three TCG guests on two host cores spread far more than
# real HCAs; both faults are two orders of magnitude below the healthy figures.
# Exit: the number of failed checks.
R=$1
B=$(cat "$R/build" 2>/dev/null || echo build/ci)
rank=${HOSTNAME##*fleet}
[ -n "$rank" ] || rank=$(hostname | sed 's/.*fleet//')
fails=0
check() { # check DESCRIPTION COMMAND...
  what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
json() { /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
ip link set lo up
for rail in 0 1; do
  ip addr add "10.$((77 + rail)).0.$((rank + 1))/24" dev "eth$rail" && ip link set "eth$rail" up
  rdma link add "rxe$rail" type rxe netdev "eth$rail"
done
for peer in 1 2 3; do
  [ "$peer" = $((rank + 1)) ] && continue
  for rail in 77 78; do
    # Reached once within 90 tries is reached: a second, single ping raced a peer installing its
    # ingress filter (tc) and lost one packet under TCG now and then.
    i=0
    until /bin/busybox ping -c1 -W1 "10.$rail.0.$peer" >/dev/null 2>&1 || [ $i -ge 90 ]; do i=$((i + 1)); done
    check "rank $rank reaches 10.$rail.0.$peer" test "$i" -lt 90
  done
done
case $rank in
  2) tc qdisc add dev eth0 handle ffff: ingress
     tc filter add dev eth0 parent ffff: protocol ip u32 match ip protocol 17 0xff match ip dport 4791 0xffff action drop ;;
  1) tc qdisc add dev eth1 handle ffff: ingress
     tc filter add dev eth1 parent ffff: protocol ip u32 match ip protocol 17 0xff match ip dport 4791 0xffff \
       action police rate 1mbit burst 8k drop ;;
esac
"$B/tools/validator/rdma-validate" --mode acceptance --transport verbs --rank "$rank" --world-size 3 \
  --comm-id 10.77.0.1:29500 --expect rxe0,rxe1 --size 256K --iters 4 --timeout 20 \
  --min-fleet-fraction 0.2 --json "$R/fleet.json" --termination-log /nonexistent >"$R/fleet.txt" 2>&1
rc=$?
sed 's/^/  /' "$R/fleet.txt"
check "the sweep fails the fleet on this node too (exit $rc)" test "$rc" = 1
case $rank in
  0)
    check "no ring: the sweep is its pair rounds (3 for 3 nodes)" \
      test "$(json "$R/fleet.json" 'd["ring"]["ran"] == False and len(d["rounds"]) == 3')" = True
    check "every round measured both rails" \
      test "$(json "$R/fleet.json" 'all(len(p["rails"]) == 2 for r in d["rounds"] for p in r["pairs"])')" = True
    check "vm-fleet2's rxe0 (rail 1) is named for certain" \
      test "$(json "$R/fleet.json" '[(c["node"], c["hca"], c["rail"], c["certain"]) for c in d["culprits"] if c["node"] == "vm-fleet2"]')" = "[('vm-fleet2', 'rxe0', 1, True)]"
    check "vm-fleet1's rxe1 (rail 2) is named for certain" \
      test "$(json "$R/fleet.json" '[(c["node"], c["hca"], c["rail"], c["certain"]) for c in d["culprits"] if c["node"] == "vm-fleet1"]')" = "[('vm-fleet1', 'rxe1', 2, True)]"
    check "vm-fleet0 passes" test "$(json "$R/fleet.json" '[n["verdict"] for n in d["nodes"] if n["name"] == "vm-fleet0"]')" = "['pass']"
    check "the software HCAs skip the line-rate floor, said once" grep -q "note: line-rate floor not applied to 6 HCA(s)" "$R/fleet.txt" ;;
  1) check "vm-fleet1 hears its culprit rxe1" grep -q "problem: culprit: rxe1 (rail 2)" "$R/fleet.txt" ;;
  2) check "vm-fleet2 hears its culprit rxe0" grep -q "problem: culprit: rxe0 (rail 1)" "$R/fleet.txt" ;;
esac
exit "$fails"
