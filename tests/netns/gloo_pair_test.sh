#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# rdma-validate --transport gloo between two pods: two network namespaces joined by two veth
# rails (g0, g1), each side's rdma-validate running PyTorch's Gloo (Debian's python3-torch, TCP)
# over both rails. It passes with each rail's share in the report, and it fails naming g1 when
# g1 is down on one side. Everything it creates is removed on exit.
#
# Usage: gloo_pair_test.sh RDMA_VALIDATE   (root; exit 77 without root or torch)
set -euo pipefail
[ "$(id -u)" -eq 0 ] || { echo "gloo_pair_test: needs root (namespaces)"; exit 77; }
validate=$(realpath "$1")
python=${KUBERDMA_PYTHON:-/usr/bin/python3}
"$python" -c 'import torch.distributed' 2>/dev/null ||
  { echo "gloo_pair_test: $python has no torch (apt-get install python3-torch)"; exit 77; }
tmp=$(mktemp -d)
ns=(krgloo$$a krgloo$$b)
cleanup() {
  for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
for n in "${ns[@]}"; do ip netns add "$n" && ip -n "$n" link set lo up; done
for r in 0 1; do
  ip -n "${ns[0]}" link add "g$r" type veth peer name "g$r" netns "${ns[1]}"
  for s in 0 1; do
    ip -n "${ns[$s]}" addr add "10.233.$r.$((s + 1))/24" dev "g$r"
    ip -n "${ns[$s]}" link set "g$r" up
  done
done
# Each rail up at both ends (a veth's carrier comes a moment after its admin state), as a pod's
# rails are when its containers start.
for _ in $(seq 100); do
  down=0
  for n in "${ns[@]}"; do
    for r in 0 1; do ip -n "$n" -o link show "g$r" | grep -q 'state UP' || down=1; done
  done
  [ "$down" = 0 ] && break
  sleep 0.1
done
fails=0
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
pair() { # pair NAME TIMEOUT: both ranks at once; $tmp/NAME.{0,1}.{rc,out,json}
  local name=$1 timeout=$2 pids=() s
  for s in 0 1; do
    ip netns exec "${ns[$s]}" env KUBERDMA_PYTHON="$python" "$validate" --transport gloo \
      --mode multi-pod --rank "$s" --world-size 2 --comm-id 10.233.0.1:29500 --expect g0,g1 \
      --size 16M --iters 5 --timeout "$timeout" --json "$tmp/$name.$s.json" >"$tmp/$name.$s.out" 2>&1 &
    pids+=($!)
  done
  for s in 0 1; do
    if wait "${pids[$s]}"; then echo 0 >"$tmp/$name.$s.rc"; else echo $? >"$tmp/$name.$s.rc"; fi
  done
}
# report NAME RANK EXPR: EXPR (Python, over the JSON report `r`) holds.
report() {
  /usr/bin/python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if eval(sys.argv[2]) else 1)' "$tmp/$1.$2.json" "$3"
}

pair up 60
sed 's/^/  /' "$tmp/up.0.out" "$tmp/up.1.out"
for s in 0 1; do
  check "both rails up: rank $s passes (exit $(cat "$tmp/up.$s.rc"))" test "$(cat "$tmp/up.$s.rc")" = 0
  check "rank $s: Gloo was told both rails" grep -q 'told: GLOO_SOCKET_IFNAME=g0,g1' "$tmp/up.$s.out"
  check "rank $s: its allreduce ran and checked out" \
    report up "$s" 'r["libraryRuns"] and all(x["ok"] for x in r["libraryRuns"])'
  check "rank $s: each rail's counters carried a fifth of the bytes or more" \
    report up "$s" 'sorted(d["name"] for d in r["devices"] if d["carriedTraffic"] and d["share"] > 0.2) == ["g0", "g1"]'
done

ip -n "${ns[1]}" link set g1 down
pair cut 15
sed 's/^/  /' "$tmp/cut.0.out" "$tmp/cut.1.out"
check "g1 down on rank 1's side: rank 1 fails (exit $(cat "$tmp/cut.1.rc"))" test "$(cat "$tmp/cut.1.rc")" = 1
check "rank 1 names g1" grep -q 'problem: g1: link is administratively down' "$tmp/cut.1.out"
check "rank 1 gives Gloo's own error" grep -q 'gloo allreduce failed: .*Gloo exited' "$tmp/cut.1.out"
check "rank 0 does not pass either (exit $(cat "$tmp/cut.0.rc"))" test "$(cat "$tmp/cut.0.rc")" != 0
check "rank 0 names g1 too (its carrier is down)" grep -q "problem: g1: link is down" "$tmp/cut.0.out"

[ "$fails" = 0 ] && echo "gloo_pair_test: all passed" || echo "gloo_pair_test: $fails failed"
exit "$fails"
