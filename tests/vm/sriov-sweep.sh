# SPDX-License-Identifier: Apache-2.0
# Sourced by guest-sriov.sh (its PF, VFs, sysfs root, cni/conf/vfline/check helpers) after its own
# checks: what a VF tenant can and cannot do, on real igb VFs of Debian's kernel.
#  - The switch's word: a pod holding VF 0 forges LLDPDUs (to each LLDP group, the broadcast
#    address); igb switches them to the PF's netdev. rdma-doctor listening on the PF (its rail)
#    believes the same frame from the VF while the VF is on the host, and does not listen while
#    the VF is in a pod.
#  - Turnover: a pod that set everything a VF has (PF-side MAC, VLAN, QoS, spoof-check, trust,
#    rate; the netdev's MTU and state) leaves nothing of it to the next pod on the same VF.
#  - Crashes: the plugin SIGKILLed before each write and each netlink send of an ADD (trust off,
#    so igbvf's MAC takes a driver rebind: the kill lands between the unbind and the probe too),
#    then DEL; and before each of a DEL's, then DEL again: the VF is back exactly as it was (PF
#    side, netdev name, MAC, MTU, state), driver bound, no record left; and a pod's namespace
#    deleted before DEL.
#  - Bad input: VLAN 4095, a multicast, zero or another VF's MAC, a rate above the link's, the PF
#    named as a VF, a VF another pod holds: refused, nothing changed.

vf1net() { # vf1net I: the VF's netdev on the host as "name mac mtu operstate driver"
  n=$(vfnet "$1")
  [ -n "$n" ] || { echo "none"; return; }
  echo "$n $(cat /sys/class/net/$n/address) $(cat /sys/class/net/$n/mtu) $(cat /sys/class/net/$n/operstate) $(basename "$(readlink -f "$dev/virtfn$1/driver")")"
}
same_as_before() { # same_as_before I: the PF's report of VF I and its netdev are what they were
  eval "test \"\$(vfline $1)\" = \"\$before$1\" && test \"\$(vf1net $1)\" = \"\$net$1\""
}
cni_error() { echo "$out" | grep -q '"code"'; } # the last $out is a CNI error
records_left() { find "$state" -name '*.json' 2>/dev/null | wc -l; }
vf1_carries_none_of_a() { ! vfline 1 | grep -q 'vlan 201\|06:aa:00:00:01:01\|tx_rate'; }
vf1_unchanged_unrecorded() { same_as_before 1 && ! ls "$state"/*/cx:* >/dev/null 2>&1; }
for i in 0 1; do eval "net$i=\"\$(vf1net $i)\""; done
echo "VF netdevs before: $net0 | $net1"

# ---- The switch's word ----
cat >/run/lldp-node.json <<EOF
{"rails": ["$pf"]}
EOF
cat >/run/forge.py <<'PY'
import socket, struct, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
def tlv(t, v): return struct.pack("!H", t << 9 | len(v)) + v
pdu = tlv(1, b"\x07evil") + tlv(2, b"\x07swp9") + tlv(3, b"\x00\x78") + tlv(5, b"evil") + tlv(0, b"")
src = bytes.fromhex(sys.argv[2].replace(":", ""))
end = time.time() + float(sys.argv[3])
while time.time() < end:
    for dst in ("0180c200000e", "0180c2000003", "0180c2000000", "ffffffffffff"):
        s.send(bytes.fromhex(dst) + src + b"\x88\xcc" + pdu)
    time.sleep(0.1)
PY
doctor_heard() { # doctor_heard: rail 1's neighbour as rdma-doctor names it after a 3 s listen
  "$B/tools/doctor/rdma-doctor" --sysfs-root "$S" --node-config /run/lldp-node.json --json node \
    --lldp-wait 3 >"$R/lldp-doctor.json" 2>>"$R/sriov.stderr"
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); c=[r for r in d["result"].get("cabling",[]) if r["rail"]==1]; print((c[0].get("switch") if c and c[0].get("neighbor") else None) or "nothing")' "$R/lldp-doctor.json"
}
vn0=$(vfnet 0)
ip link set "$vn0" up
/usr/bin/python3 /run/forge.py "$vn0" "$(cat /sys/class/net/$vn0/address)" 4 &
heard=$(doctor_heard)
wait
echo "doctor on the PF while VF 0 (on the host) sends LLDPDUs: $heard"
check "a VF's LLDPDUs reach its PF as the switch's would (the doctor names 'evil' while the VF is on the host)" test "$heard" = evil
ip link set "$vn0" down
lconf=$(conf lldp-t 0 111 06:aa:00:00:00:11 host-local 10.111.0.0/24)
out=$(cni ADD cl pod-a "$lconf")
echo "ADD of VF 0 for the LLDP check: $out"
check "VF 0 goes into a pod" ip -n pod-a link show net1
ip netns exec pod-a /usr/bin/python3 /run/forge.py net1 "0c:42:a1:00:00:09" 4 &
heard=$(doctor_heard)
wait
echo "doctor on the PF while a pod on VF 0 forges LLDPDUs: $heard"
check "a pod holding a VF of the rail's PF is not believed: the rail is not listened on" test "$heard" = nothing
check "and the doctor says why" grep -q "a VF of the rail's PF is in a pod or a VM" "$R/lldp-doctor.json"
cni DEL cl pod-a "$lconf" >/dev/null
check "VF 0 is back after the LLDP check" same_as_before 0

# ---- Turnover ----
full=$(echo "$(conf team-a 1 201 06:aa:00:00:01:01 host-local 10.121.0.0/24)" | sed 's/"linkState":"up"/"linkState":"up","mtu":9000/')
out=$(cni ADD ct1 pod-a "$full")
echo "ADD of pod a with everything set: $out"
check "pod a takes VF 1 with everything set" sh -c "echo '$out' | grep -q '\"interfaces\"'"
check "pod a's VF 1: MAC, VLAN 201, QoS 3, trust, rates as asked" vfhas 1 'link/ether 06:aa:00:00:01:01.*vlan 201, qos 3.*trust on'
check "pod a's net1 has MTU 9000" sh -c "ip -n pod-a link show net1 | grep -q 'mtu 9000'"
cni DEL ct1 pod-a "$full" >/dev/null
check "after pod a: VF 1 exactly as before (PF side, netdev name, MAC, MTU, state, driver)" same_as_before 1
plain='{"cniVersion":"1.0.0","name":"team-b","type":"rdma","mode":"vf","deviceID":"'"$(vfbdf 1)"'","stateDir":"'$state'"}'
out=$(cni ADD ct2 pod-b "$plain")
check "pod b takes VF 1 with nothing asked" sh -c "echo '$out' | grep -q '\"interfaces\"'"
check "pod b's VF 1 carries nothing of pod a's (no VLAN, QoS, rate, not its MAC)" vf1_carries_none_of_a
check "pod b's net1 has the VF's own MTU, not pod a's 9000" sh -c "ip -n pod-b link show net1 | grep -q 'mtu $(echo "$net1" | cut -d' ' -f3)'"
cni DEL ct2 pod-b "$plain" >/dev/null
check "after pod b: VF 1 exactly as before" same_as_before 1

# ---- Crashes: a SIGKILL before each write and netlink send of ADD, then of DEL ----
# trust off: igbvf refuses the pod's MAC on its own side, so ADD and DEL rebind its driver.
kconf=$(conf team-k 1 301 06:aa:00:00:02:01 host-local 10.131.0.0/24 | sed 's/"trust":"on"/"trust":"off"/')
traced() { # traced VERB CID POD CONF STRACE-ARGS...: the plugin under strace
  verb=$1 cid=$2 pod=$3 c=$4
  shift 4
  # In a subshell: the shell's "Killed" for each kill goes nowhere.
  (echo "$c" | CNI_COMMAND=$verb CNI_CONTAINERID=$cid CNI_NETNS=/run/netns/$pod CNI_IFNAME=net1 \
    CNI_PATH=$bin strace -qq -o "$R/strace.out" "$@" "$B/cni/kube-rdma" >/dev/null 2>>"$R/sriov.stderr") 2>/dev/null
}
calls() { # calls VERB SYSCALL: how often one plain run of VERB makes it
  awk -v s="$2" '$NF == s {print $4}' "$R/count-$1.txt"
}
traced ADD ck0 pod-a "$kconf" -c -e trace=write,sendmsg,sendto
mv "$R/strace.out" "$R/count-ADD.txt"
check "ADD with trust off rebinds VF 1's driver (igbvf refuses the MAC)" grep -q rebind "$R/sriov.stderr"
traced DEL ck0 pod-a "$kconf" -c -e trace=write,sendmsg,sendto
mv "$R/strace.out" "$R/count-DEL.txt"
check "a plain ADD and DEL leave VF 1 as it was" same_as_before 1
swept=0
lost=""
t=$(date +%s)
for verb in ADD DEL; do
  for sc in write sendmsg sendto; do
    n=$(calls $verb $sc)
    k=1
    while [ -n "$n" ] && [ "$k" -le "$n" ]; do
      if [ $verb = ADD ]; then
        traced ADD ck$k pod-a "$kconf" -e trace=$sc -e inject=$sc:signal=KILL:when=$k
      else
        cni ADD ck$k pod-a "$kconf" >/dev/null
        traced DEL ck$k pod-a "$kconf" -e trace=$sc -e inject=$sc:signal=KILL:when=$k
      fi
      cni DEL ck$k pod-a "$kconf" >"$R/del.out"
      if ! same_as_before 1 || [ "$(records_left)" != 0 ]; then
        lost="$lost $verb/$sc#$k[$(vfline 1) | $(vf1net 1) | records $(records_left)]"
        cni DEL ck$k pod-a "$kconf" >/dev/null  # put it back for the next kill
      fi
      swept=$((swept + 1))
      k=$((k + 1))
    done
  done
done
echo "crash sweep: $swept kills in $(($(date +%s) - t)) s; not restored:${lost:- none}"
check "VF 1 is back exactly, driver bound, no record left, after each of $swept kills of ADD and DEL" test -z "$lost"
# The pod's namespace gone before DEL (the runtime deleted it): the netdev came home by itself.
ip netns add pod-g
cni ADD cg pod-g "$kconf" >/dev/null
ip netns delete pod-g
cni DEL cg pod-g "$kconf" >/dev/null
check "DEL after the pod's namespace is gone: VF 1 exactly as before" same_as_before 1

# ---- Bad input: refused, nothing changed ----
cni ADD cx0 pod-a "$(conf team-a 0 101 06:aa:00:00:00:31 host-local 10.101.0.0/24)" >/dev/null
for bad in \
  "vlan 4095|$(conf team-x 1 4095 06:aa:00:00:00:41 host-local 10.141.0.0/24)" \
  "a multicast MAC|$(conf team-x 1 10 01:00:5e:00:00:01 host-local 10.141.0.0/24)" \
  "a zero MAC|$(conf team-x 1 10 00:00:00:00:00:00 host-local 10.141.0.0/24)" \
  "another VF's MAC|$(conf team-x 1 10 06:aa:00:00:00:31 host-local 10.141.0.0/24)" \
  "a rate above the link's 1 Gb/s|$(conf team-x 1 10 06:aa:00:00:00:41 host-local 10.141.0.0/24 | sed 's/"max_tx_rate":100/"max_tx_rate":2000/')" \
  "the PF named as a VF|$(conf team-x 1 10 06:aa:00:00:00:41 host-local 10.141.0.0/24 | sed "s/$(vfbdf 1)/$pfbdf/")" \
  "a VF another pod holds|$(conf team-x 0 10 06:aa:00:00:00:41 host-local 10.141.0.0/24)"; do
  what=${bad%%|*}
  out=$(cni ADD cx pod-b "${bad#*|}")
  echo "bad input, $what: $out"
  check "$what is refused with a CNI error" cni_error
  check "$what: VF 1 unchanged and nothing recorded for it" vf1_unchanged_unrecorded
done
check "pod a's VF 0 is untouched by the refusals (VLAN 101, its MAC)" vfhas 0 'link/ether 06:aa:00:00:00:31.*vlan 101'
cni DEL cx0 pod-a "$(conf team-a 0 101 06:aa:00:00:00:31 host-local 10.101.0.0/24)" >/dev/null
check "VF 0 back after the bad-input checks" same_as_before 0
