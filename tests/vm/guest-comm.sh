#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs in each of two VM-tier guests (vm-comm0, vm-comm1, booted at once by tests/vm/run.sh), each
# with two NICs on two QEMU multicast networks (rail 1: 10.87.0.0/24, rail 2: 10.88.0.0/24) and a
# Soft-RoCE HCA on each (rxe0, rxe1): the communication libraries other than NCCL, with Debian's
# UCX 1.13 and Open MPI 4.1.4, told what `rdma-validate --env` plans, proven through their own
# transports by rdma-validate, judged from every rxe device's counters:
#   - the plan: each HCA's own RoCE v2 GID (index 1, the IPv4 entry), both rails, and what UCX 1.13
#     needs on a device that is not mlx5 (UCX_UD_ETH_DGID_CHECK=n: without it, UCX drops every UD
#     wireup packet of an IPv4 GID on rxe; shown here first);
#   - UCX, each rail on its own (tag rendezvous and RMA): both pass, each rail's counters carry it;
#   - UCX, one process over both rails: the tag rendezvous striped over both; UCX 1.13's RMA
#     keeps to one lane, and the judgement names the rail it left out;
#   - a rail cut for RDMA on vm-comm1 (RoCE's UDP port dropped): UCX on that rail fails, named;
#   - Open MPI: vm-comm0's mpirun starts both ranks (the remote one through a launch agent, as a
#     job's launcher would enter each pod); pml ucx over both rails, an allreduce and an alltoall,
#     every rxe device carrying its share.
#     (4 MiB: a 256 KiB allreduce's messages stay below UCX's rendezvous threshold and go eagerly
#     over one lane, which the judgement names as the library leaving a NIC out).
# Exit: the number of failed checks.
R=$1
B=$(cat "$R/build" 2>/dev/null || echo build/ci)
B=$(cd "$B" && pwd)
rank=$(hostname | sed 's/.*comm//')
peer=$((2 - rank))
fails=0
check() { # check DESCRIPTION COMMAND...
  what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
json() { /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }
validate() { "$B/tools/validator/rdma-validate" "$@"; }
ip link set lo up
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm  # UCX's shared memory transports
for rail in 0 1; do
  ip addr add "10.$((87 + rail)).0.$((rank + 1))/24" dev "eth$rail" && ip link set "eth$rail" up
  rdma link add "rxe$rail" type rxe netdev "eth$rail"
done
for r in 87 88; do
  i=0
  until /bin/busybox ping -c1 -W1 "10.$r.0.$peer" >/dev/null 2>&1 || [ $i -ge 90 ]; do i=$((i + 1)); done
  check "rank $rank reaches 10.$r.0.$peer" test "$i" -lt 90
done
# Meet the other guest at each step: a marker file over the rail (busybox nc).
barrier() { # barrier NAME
  if [ "$rank" = 0 ]; then
    busybox nc -l -p 29599 </dev/null >"/run/barrier.$1"
  else
    i=0
    until echo "$1" | busybox nc 10.87.0.1 29599 2>/dev/null || [ $i -ge 120 ]; do sleep 1; i=$((i + 1)); done
  fi
}

# ---- The plan ----
validate --env ucx,mpi,nvshmem,mooncake,nccl --one-process >"$R/env.sh" 2>"$R/env.err"
check "--env plans every library for this guest (exit $?)" test -s "$R/env.sh"
sed 's/^/  /' "$R/env.sh"
check "each HCA's own GID is index 1 (IPv4), told to UCX, NCCL, NVSHMEM and Mooncake" \
  sh -c "grep -q \"UCX_IB_GID_INDEX='1'\" $R/env.sh && grep -q \"NCCL_IB_GID_INDEX='1'\" $R/env.sh && grep -q \"NVSHMEM_IB_GID_INDEX='1'\" $R/env.sh && grep -q \"MC_GID_INDEX='1'\" $R/env.sh"
check "UCX is told both rails and to stripe over both" \
  sh -c "grep -q \"UCX_NET_DEVICES='rxe0:1,rxe1:1'\" $R/env.sh && grep -q \"UCX_MAX_RNDV_RAILS='2'\" $R/env.sh"
check "rxe is not mlx5: Open MPI's gate opened, UCX's UD dgid check off" \
  sh -c "grep -q \"OMPI_MCA_pml_ucx_devices='any'\" $R/env.sh && grep -q \"UCX_UD_ETH_DGID_CHECK='n'\" $R/env.sh"

# ---- Why UCX_UD_ETH_DGID_CHECK: UCX 1.13 on rxe with the IPv4 GID, the check left on ----
barrier dgid
if [ "$rank" = 0 ]; then
  UCX_NET_DEVICES=rxe0:1 UCX_TLS=rc_verbs,ud_verbs,self UCX_IB_GID_INDEX=1 \
    timeout 40 ucx_perftest -p 13330 -t tag_bw -s 65536 -n 4 >"$R/dgid.out" 2>&1
else
  sleep 3
  UCX_NET_DEVICES=rxe0:1 UCX_TLS=rc_verbs,ud_verbs,self UCX_IB_GID_INDEX=1 \
    timeout 40 ucx_perftest 10.87.0.1 -p 13330 -t tag_bw -s 65536 -n 4 >"$R/dgid.out" 2>&1
fi
rc=$?
check "with the dgid check on, UCX 1.13's wireup over rxe's IPv4 GID never completes (exit $rc)" test "$rc" != 0

# ---- UCX through rdma-validate ----
ucx() { # ucx NAME TIMEOUT ARGS...: rdma-validate --transport ucx with the peer
  name=$1 limit=$2
  shift 2
  barrier "$name"
  validate --transport ucx --mode multi-pod --rank "$rank" --world-size 2 --comm-id 10.87.0.1:29500 \
    --expect rxe0,rxe1 --size 256K --iters 4 --timeout "$limit" --json "$R/$name.json" "$@" >"$R/$name.txt" 2>&1
}
ucx rails 60
rc=$?
sed 's/^/  /' "$R/rails.txt" | head -30
check "UCX on each rail on its own: tag rendezvous and RMA pass (exit $rc)" test "$rc" = 0
check "each rail's counters carried its phases" \
  test "$(json "$R/rails.json" 'all(r["ok"] and r["moved"][r["rail"].split(":")[0]] >= r["bytes"] for r in d["libraryRuns"])')" = True
check "UCX's own ep_cfg names each rail's rc_verbs lane" \
  test "$(json "$R/rails.json" 'sorted({l for r in d["libraryRuns"] for l in r["lanes"] if "rxe" in l})')" = "['rc_verbs/rxe0:1', 'rc_verbs/rxe1:1']"
ucx one 60 --one-process
sed 's/^/  /' "$R/one.txt" | head -30
check "one process over both rails: the tag rendezvous is striped over both" \
  test "$(json "$R/one.json" '[sorted(r["lanes"]) for r in d["libraryRuns"] if r["phase"] == "tag"][0]')" = "['rc_verbs/rxe0:1', 'rc_verbs/rxe1:1']"
check "UCX 1.13 keeps RMA to one lane: the rail it left out is named" \
  grep -q "ucx rma: rxe1 carried" "$R/one.txt"
if [ "$rank" = 1 ]; then
  tc qdisc add dev eth1 handle ffff: ingress
  tc filter add dev eth1 parent ffff: protocol ip u32 match ip protocol 17 0xff match ip dport 4791 0xffff action drop
fi
ucx cut 20
rc=$?
check "rail 2 cut for RDMA on vm-comm1: UCX on rxe1 fails, named (exit $rc)" \
  sh -c "test $rc = 1 && grep -q 'ucx .* on rxe1:1' $R/cut.txt"
[ "$rank" = 1 ] && tc qdisc del dev eth1 ingress

# ---- Open MPI: pml ucx over both rails, started by vm-comm0's mpirun ----
# The launch agent: vm-comm1 runs what vm-comm0's mpirun sends it (one connection a command), as
# a job's launcher enters each pod. Both guests have it: orted checks its agent too (--tree-spawn).
cat >/run/rsh <<'EOF'
#!/bin/sh
# mpirun's rsh agent: run the command on the other guest (rail 1), its output back here.
host=$1
shift
printf 'exec %s\n' "$*" | busybox nc "$host" 29601
EOF
chmod +x /run/rsh
if [ "$rank" = 1 ]; then
  (while [ ! -f /run/mpi.done ]; do busybox nc -l -p 29601 -e /bin/sh; done) &
  agent=$!
  barrier mpi
  i=0
  until [ -f /run/mpi.json ] || [ $i -ge 420 ]; do sleep 1; i=$((i + 1)); done
  sleep 2
else
  barrier mpi
  sleep 2
  OMPI_MCA_plm_rsh_agent=/run/rsh OMPI_MCA_oob_tcp_if_include=eth0 OMPI_MCA_btl_tcp_if_include=eth0 \
    timeout 400 mpirun --allow-run-as-root -np 2 --host 10.87.0.1,10.87.0.2 \
    -x PATH sh -c "cd $(pwd) && $B/tools/validator/rdma-validate --transport mpi --expect rxe0,rxe1 --size 4M --iters 2 --timeout 300 --json /run/mpi.json" \
    >"$R/mpi.txt" 2>&1
  echo "mpirun: exit $?"
  tail -20 "$R/mpi.txt" | sed 's/^/  /'
fi
touch /run/mpi.done
cp /run/mpi.json "$R/mpi.json" 2>/dev/null
check "Open MPI's allreduce and alltoall through pml ucx passed on this guest's rails" \
  test "$(json "$R/mpi.json" 'd["verdict"]' 2>/dev/null)" = pass
check "pml ucx's UCX used both rxe devices, no TCP" \
  test "$(json "$R/mpi.json" 'sorted({l for r in d["libraryRuns"] for l in r["lanes"] if "rxe" in l or "tcp" in l})' 2>/dev/null)" = "['rc_verbs/rxe0:1', 'rc_verbs/rxe1:1']"
[ -n "${agent:-}" ] && kill "$agent" 2>/dev/null
exit "$fails"
