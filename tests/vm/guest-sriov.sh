#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs inside a VM-tier guest with QEMU's emulated Intel 82576 (`-device igb`, an SR-IOV NIC;
# QEMU 8+): the `rdma` CNI's mode vf on real VFs of a real PF driver (Debian 12's igb/igbvf).
# The VFs are created through sriov_numvfs; each VF netdev goes into a pod with what its PF sets
# (MAC, VLAN and QoS, spoof-check, trust, max TX rate: all igb implements), read back from the
# kernel (`ip -d link show PF`: IFLA_VF_INFO), pods on one VLAN reach each other and a pod on
# another does not, and every setting is back as it was after DEL and after a SIGKILL mid-ADD.
#
# igb's VFs have no RDMA device, so the CNI sees them through a sysfs root (KUBERDMA_SYSFS_ROOT)
# whose class/infiniband names one mlx5-like device per PCI function and whose devices/, bus/ and
# class/net are the guest's real sysfs (bind mounts): every netlink call, every sriov_numvfs and
# driver rebind is real. Soft-RoCE on a VF netdev stands in for a VF's RDMA device.
# Exit: the number of failed checks.
#   guest-sriov.sh RESULTS
R=$1
B=$(cat "$R/build" 2>/dev/null || echo build/ci)
B=$(cd "$B" && pwd)
ip link set lo up
fails=0
check() { # check DESCRIPTION COMMAND...
  what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
# The PF: the netdev igb drives.
pf=""
for n in /sys/class/net/*; do
  [ "$(basename "$(readlink -f "$n/device/driver" 2>/dev/null)")" = igb ] && pf=$(basename "$n")
done
check "an igb PF is there" test -n "$pf"
[ -n "$pf" ] || exit "$fails"
dev=$(readlink -f "/sys/class/net/$pf/device")
pfbdf=$(basename "$dev")
# QEMU's user network advertises an IPv6 default route, which would make the PF the node's own NIC
# (and its VFs never a pod's): a rail carries no default route.
echo 0 >"/proc/sys/net/ipv6/conf/$pf/accept_ra"
ip link set "$pf" up
echo "PF $pf ($pfbdf): sriov_totalvfs $(cat "$dev/sriov_totalvfs")"
# igb (6.1) enables SR-IOV before its reinit: a VF probed at once misses the PF's reset messages.
# Create the VFs unbound, then bind igbvf to each (docs/development.md: what igb shows).
echo 0 >"$dev/sriov_drivers_autoprobe"
echo 3 >"$dev/sriov_numvfs"
check "three VFs exist" test "$(cat "$dev/sriov_numvfs")" = 3
for i in 0 1 2; do
  vf=$(basename "$(readlink -f "$dev/virtfn$i")")
  echo igbvf >"/sys/bus/pci/devices/$vf/driver_override"
  echo "$vf" >/sys/bus/pci/drivers_probe
done
sleep 3
vfbdf() { basename "$(readlink -f "$dev/virtfn$1")"; }
vfnet() { ls "$dev/virtfn$1/net" 2>/dev/null | head -1; }
for i in 0 1 2; do check "VF $i ($(vfbdf $i)) has a netdev ($(vfnet $i))" test -n "$(vfnet $i)"; done
# A VF netdev carries a real RDMA device: Soft-RoCE on VF 2's (on the host: rxe finds its netdev
# in the initial namespace only, and is deleted when the netdev leaves it).
ip link set "$(vfnet 2)" up
sleep 1
rdma link add rxevf type rxe netdev "$(vfnet 2)"
rdma link show | grep rxevf
check "Soft-RoCE on VF 2's netdev is ACTIVE" sh -c "rdma link show | grep -q 'rxevf/1 state ACTIVE'"
rdma link delete rxevf
ip link set "$(vfnet 2)" down

# The sysfs root the CNI reads: the real devices/, bus/ and class/net, and a class/infiniband
# naming an Ethernet RDMA device for the PF and each VF (port 1 ACTIVE at the PF's 1 Gb/s).
S=/run/sysroot
mkdir -p $S/sys/devices $S/sys/bus $S/sys/class/net $S/sys/class/infiniband $S/ib $S/dev
mount --bind /sys/devices $S/sys/devices
mount --bind /sys/bus $S/sys/bus
mount --bind /sys/class/net $S/sys/class/net
hca() { # hca NAME PCI-DEVICE-DIR NETDEV GUID
  d=$S/ib/$1
  mkdir -p "$d/ports/1/gids" "$d/ports/1/gid_attrs/ndevs" "$d/ports/1/gid_attrs/types" "$d/ports/1/pkeys"
  ln -s "$S/sys/devices/${2#/sys/devices/}" "$d/device"
  echo "$4" >"$d/node_guid"
  echo "4: ACTIVE" >"$d/ports/1/state"
  echo "5: LinkUp" >"$d/ports/1/phys_state"
  echo "1 Gb/sec (1X SDR)" >"$d/ports/1/rate"
  echo Ethernet >"$d/ports/1/link_layer"
  echo "fe80:0000:0000:0000:0000:0000:0000:0001" >"$d/ports/1/gids/0"
  echo "$3" >"$d/ports/1/gid_attrs/ndevs/0"
  echo "RoCE v2" >"$d/ports/1/gid_attrs/types/0"
  echo 0xffff >"$d/ports/1/pkeys/0"
  ln -s "$d" "$S/sys/class/infiniband/$1"
}
hca mlx5_0 "$dev" "$pf" 5254:0000:0000:1000
for i in 0 1 2; do hca "mlx5_$((i + 1))" "$(readlink -f "$dev/virtfn$i")" "$(vfnet $i)" "5254:0000:0000:100$((i + 1))"; done
export KUBERDMA_SYSFS_ROOT=$S
echo '{"allowUnallocated": true}' >/run/node.json
export KUBERDMA_NODE_CONFIG=/run/node.json

# host-local for addresses, and a copy that kills the plugin right after IPAM ADD (the crash).
bin=/run/cnibin
mkdir -p $bin
cp /usr/lib/cni/host-local $bin/host-local
cat >$bin/crash-ipam <<'EOF'
#!/bin/sh
out=$(/run/cnibin/host-local); rc=$?
[ "$CNI_COMMAND" = ADD ] && kill -9 $PPID
printf '%s' "$out"; exit $rc
EOF
chmod +x $bin/crash-ipam
state=/run/kube-rdma/cni-sriov
vfline() { ip -d link show "$pf" | grep "^ *vf $1 " | sed 's/  */ /g'; }
vfhas() { vfline "$1" | grep -q "$2"; } # vfhas VF REGEX: the PF reports it for the VF
cni() { # cni VERB CID POD CONF
  echo "$4" | CNI_COMMAND=$1 CNI_CONTAINERID=$2 CNI_NETNS=/run/netns/$3 CNI_IFNAME=net1 \
    CNI_PATH=$bin "$B/cni/kube-rdma" 2>>"$R/sriov.stderr"
}
conf() { # conf NAME VF VLAN MAC IPAM-TYPE SUBNET
  echo '{"cniVersion":"1.0.0","name":"'"$1"'","type":"rdma","mode":"vf","deviceID":"'"$(vfbdf "$2")"'",
   "vlan":'"$3"',"vlanQoS":3,"spoofchk":"on","trust":"on","max_tx_rate":100,"linkState":"up",
   "runtimeConfig":{"mac":"'"$4"'"},"stateDir":"'$state'",
   "ipam":{"type":"'"$5"'","dataDir":"/run/ipam","ranges":[[{"subnet":"'"$6"'"}]]}}'
}
for i in 0 1 2; do eval "before$i=\"\$(vfline $i)\""; echo "before: $(vfline $i)"; done
vn0=$(vfnet 0)
for p in a b c x; do ip netns add "pod-$p"; done
conf_a=$(conf vlan101 0 101 06:aa:00:00:00:01 host-local 10.101.0.0/24)
conf_b=$(conf vlan101 1 101 06:aa:00:00:00:02 host-local 10.101.0.0/24)
# Pod c shares pod a's and b's subnet, so only its VLAN keeps it from them.
conf_c=$(conf vlan102 2 102 06:aa:00:00:00:03 host-local 10.101.0.0/24)
conf_k=$(conf team-k 1 104 06:aa:00:00:00:04 crash-ipam 10.104.0.0/24)

# Three pods of different tenants on VFs of one PF: a and b on VLAN 101, c on VLAN 102.
out=$(cni ADD ca pod-a "$conf_a")
echo "ADD a: $out"
check "ADD of VF 0 into pod a succeeds" sh -c "echo '$out' | grep -q '\"interfaces\"'"
out=$(cni ADD cb pod-b "$conf_b")
check "ADD of VF 1 into pod b succeeds" sh -c "echo '$out' | grep -q '\"interfaces\"'"
out=$(cni ADD cc pod-c "$conf_c")
check "ADD of VF 2 into pod c succeeds" sh -c "echo '$out' | grep -q '\"interfaces\"'"
for i in 0 1 2; do echo "after ADD: $(vfline $i)"; done
check "the PF reports VF 0's MAC, VLAN 101 and QoS 3" vfhas 0 'link/ether 06:aa:00:00:00:01.*vlan 101, qos 3'
check "the PF reports VF 0's spoof-check on and trust on" vfhas 0 'spoof checking on.*trust on'
check "the PF reports VF 0's max TX rate 100 Mbit/s" vfhas 0 'max_tx_rate 100Mbps'
check "the PF reports VF 2 on VLAN 102 with its own MAC" vfhas 2 'link/ether 06:aa:00:00:00:03.*vlan 102'
check "pod a's net1 is VF 0's netdev with its MAC, up" sh -c "ip -n pod-a link show net1 | grep -q 'link/ether 06:aa:00:00:00:01' && ip -n pod-a link show net1 | grep -q 'UP'"
check "VF 0's netdev ($vn0) left the host" sh -c "! ip link show $vn0 >/dev/null 2>&1"
a=$(ip -n pod-a -4 -o addr show net1 | awk '{print $4}' | cut -d/ -f1)
b=$(ip -n pod-b -4 -o addr show net1 | awk '{print $4}' | cut -d/ -f1)
c=$(ip -n pod-c -4 -o addr show net1 | awk '{print $4}' | cut -d/ -f1)
echo "addresses: a=$a b=$b c=$c"
check "pods a and b (VLAN 101) reach each other through the NIC" ip netns exec pod-a busybox ping -c 2 -W 2 "$b"
check "pod c (VLAN 102) does not reach pod a: the VLAN isolates it" sh -c "! ip netns exec pod-c busybox ping -c 2 -W 2 $a"
# CHECK re-reads the PF: a VLAN changed behind the plugin is error 105.
cni CHECK ca pod-a "$conf_a" >"$R/check.out"
check "CHECK of pod a's VF passes" test $? = 0
ip link set "$pf" vf 0 vlan 7 qos 3
cni CHECK ca pod-a "$conf_a" >"$R/check.out"
check "CHECK fails (105) once VF 0's VLAN is changed behind the plugin" grep -q '"code":105.*vlan is 7' "$R/check.out"
ip link set "$pf" vf 0 vlan 101 qos 3
# A VF already in a pod is never reset under it.
out=$(cni ADD cx pod-x "$(conf team-x 0 103 06:aa:00:00:00:09 host-local 10.101.0.0/24)")
echo "ADD x (VF 0 again): $out"
check "a VF already in a pod is refused (error 100)" sh -c "echo '$out' | grep -q '\"code\": *100'"
check "and its settings are unchanged" vfhas 0 'vlan 101, qos 3'

cni DEL ca pod-a "$conf_a"
cni DEL cb pod-b "$conf_b"
cni DEL cc pod-c "$conf_c"
for i in 0 1 2; do echo "after DEL: $(vfline $i)"; done
check "DEL: VF 0's PF-side settings are back exactly" test "$(vfline 0)" = "$before0"
check "DEL: VF 1's PF-side settings are back exactly" test "$(vfline 1)" = "$before1"
check "DEL: VF 2's PF-side settings are back exactly" test "$(vfline 2)" = "$before2"
check "DEL: VF 0's netdev is back on the host ($(vfnet 0))" test -n "$(vfnet 0)"
check "DEL: each VF netdev has its own MAC back, not a pod's" sh -c "! cat /sys/class/net/*/address | grep -q '^06:aa:'"
check "DEL: no record is left" sh -c "[ -z \"\$(find $state -name '*.json' 2>/dev/null)\" ]"

# Killed (SIGKILL) right after IPAM ADD: the PF has set VF 1 and its netdev is in the pod.
out=$(cni ADD ck pod-b "$conf_k")
echo "ADD killed: rc=$? $out; $(vfline 1)"
check "the killed ADD left VF 1 set (VLAN 104)" vfhas 1 'vlan 104'
check "and its netdev in the pod" ip -n pod-b link show net1
cni DEL ck pod-b "$conf_k" >/dev/null
check "DEL after the kill: VF 1's settings are back exactly" test "$(vfline 1)" = "$before1"
check "DEL after the kill: VF 1's netdev is back on the host ($(vfnet 1))" test -n "$(vfnet 1)"

# bench/vf_bench.sh: VF ADD+DEL by the plugin against the same by hand, interleaved.
if [ -f "$R/bench" ]; then
  n=$(cat "$R/bench")
  vf=$(vfnet 0)
  mac0=$(vfline 0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
  vfmac0=$(cat "/sys/class/net/$vf/address")
  bconf=$(echo "$conf_a" | sed 's/"ipam":.*/"ipam":null}/')
  now() { date +%s%N; }
  : >"$R/bench-rdma"
  : >"$R/bench-ip"
  i=0
  while [ "$i" -lt "$n" ]; do
    t=$(now)
    cni ADD cb1 pod-a "$bconf" >/dev/null && cni DEL cb1 pod-a "$bconf" >/dev/null
    echo $(($(now) - t)) >>"$R/bench-rdma"
    t=$(now)
    ip link set "$pf" vf 0 mac 06:aa:00:00:00:01 vlan 101 qos 3 spoofchk on trust on max_tx_rate 100
    ip link set "$vf" address 06:aa:00:00:00:01 netns pod-a name net1 up
    ip -n pod-a link set net1 down address "$vfmac0" name "$vf" netns 1
    ip link set "$pf" vf 0 mac "$mac0" vlan 0 trust off max_tx_rate 0
    echo $(($(now) - t)) >>"$R/bench-ip"
    i=$((i + 1))
  done
  check "bench: VF 0 is back as it was" test "$(vfline 0)" = "$before0"
fi

# What a VF tenant can and cannot do: the switch's word, turnover, crashes, bad input.
. tests/vm/sriov-sweep.sh

for p in a b c x; do ip netns delete "pod-$p"; done
echo 0 >"$dev/sriov_numvfs"
exit "$fails"
