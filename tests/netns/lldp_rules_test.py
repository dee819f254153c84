#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Whose word the node takes about a rail's switch, with Debian's lldpd as the judge (CTest, root;
exit 77 without root or lldpd).

Part 1, the frames: a node namespace whose rail netdev (ens1f0np0, the roce8 fixture's) is a veth
to a wire namespace. For each frame of our own generator (a valid LLDPDU to each of the three LLDP
group addresses; to the broadcast address; unicast to the rail's MAC; a repeated chassis ID, port
ID or TTL; the TTL before the port ID; an End TLV with a length; no End TLV; a chassis ID of a
reserved subtype; a TLV of a reserved type; a shutdown LLDPDU after a valid one), a fresh lldpd
(receive-only) on the rail netdev and `rdma-doctor node --lldp-wait` hear the same frames: the
doctor names a neighbour exactly when lldpd keeps one.

Part 2, the tenants: rdma-device-plugin --lldp records the switch its rails hear (leaf-1, leaf-2
from the wire). A pod holding a macvlan child of rail 1's netdev (shared mode) and a pod holding
rail 2's netdev itself (move mode) each send forged LLDPDUs naming "evil" (to the LLDP group, to
the broadcast address, to the rail's MAC): the record still says leaf-1 and leaf-2 after rounds
in which the forgeries were sent. What the host's side of each netdev received of them (an
ETH_P_ALL socket) is printed, so it shows which were delivered to the node and refused, and which
never reached it.

Every namespace and process is removed, whatever happens.
Usage: lldp_rules_test.py <rdma-doctor> <rdma-device-plugin> <sysfs fixture roce8> [--child ipvlan]
  --child ipvlan: part 2 only, the shared-mode pod on an ipvlan child (the VM tier runs it: this
  kernel's ipvlan, where the development machine's has none).
"""
import ctypes
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

failures = []
TAG = f"lr{os.getpid() % 100000}"
NODE, WIRE, POD_SHARED, POD_MOVED = (f"{TAG}{x}" for x in ("n", "w", "ps", "pm"))
NAMESPACES = [NODE, WIRE, POD_SHARED, POD_MOVED]
RAILS = ["ens1f0np0", "ens2f0np0"]
NEAREST_BRIDGE = bytes.fromhex("0180c200000e")
NON_TPMR = bytes.fromhex("0180c2000003")
CUSTOMER = bytes.fromhex("0180c2000000")
BROADCAST = b"\xff" * 6
SOURCE = bytes.fromhex("02aabbccdd01")


LIBC = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def packet_socket(ns, netdev, proto=0):
    """An AF_PACKET socket made in namespace `ns` (it stays there), bound to `netdev`."""
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    me = os.open("/proc/self/ns/net", os.O_RDONLY)
    try:
        if LIBC.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {ns}")
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(proto))
        s.bind((netdev, 0))
        return s
    finally:
        LIBC.setns(me, CLONE_NEWNET)
        os.close(fd)
        os.close(me)


def check(cond, msg):
    print("ok  " if cond else "FAIL", msg, flush=True)
    if not cond:
        failures.append(msg)


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, text=True, timeout=60, **kw)


def tlv(t, value):
    return struct.pack("!H", t << 9 | len(value)) + value


def pdu(chassis=b"leaf-7", port=b"swp3", ttl=120, name=None, order=None, extra=b"", end=b""):
    parts = {"c": tlv(1, b"\x07" + chassis), "p": tlv(2, b"\x07" + port), "t": tlv(3, struct.pack("!H", ttl))}
    body = b"".join(parts[k] for k in (order or "cpt"))
    if name is not None:
        body += tlv(5, name)
    return body + extra + (tlv(0, end) if end is not None else b"")


def frame(dst, payload, src=SOURCE):
    return dst + src + b"\x88\xcc" + payload


class Sender:
    """Sends frames out of a netdev in a namespace, every 100 ms until stopped."""

    def __init__(self, ns, netdev, frames):
        self.frames, self.stop = frames, threading.Event()
        self.sock = packet_socket(ns, netdev)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop.is_set():
            for f in self.frames:
                try:
                    self.sock.send(f)
                except OSError:
                    pass
            time.sleep(0.1)

    def close(self):
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


class Tap:
    """Counts what a netdev in a namespace received that carries `marker` (ETH_P_ALL)."""

    def __init__(self, ns, netdev, marker):
        self.sock = packet_socket(ns, netdev, 0x0003)  # ETH_P_ALL
        self.sock.settimeout(0.2)
        self.marker, self.kinds, self.stop = marker, {}, threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        names = {0: "to-host", 1: "broadcast", 2: "multicast", 3: "other-host", 4: "outgoing"}
        while not self.stop.is_set():
            try:
                data, addr = self.sock.recvfrom(9216)
            except socket.timeout:
                continue
            if self.marker in data:
                kind = f"{names.get(addr[2], addr[2])} to {data[:6].hex(':')}"
                self.kinds[kind] = self.kinds.get(kind, 0) + 1

    def close(self):
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()
        return self.kinds


def mac_of(ns, netdev):
    return bytes.fromhex(json.loads(sh("ip", "-n", ns, "-j", "link", "show", netdev).stdout)[0]["address"]
                         .replace(":", ""))


def cable(node_ns, netdev, wire_ns, port):
    sh("ip", "link", "add", port, "netns", wire_ns, "type", "veth", "peer", "name", netdev, "netns", node_ns)
    sh("ip", "-n", wire_ns, "link", "set", port, "up")
    sh("ip", "-n", node_ns, "link", "set", netdev, "up")


def lldpd_start(tmp, procs):
    sock = os.path.join(tmp, "lldpd.sock")
    log = open(os.path.join(tmp, "lldpd.log"), "a")
    p = subprocess.Popen(["ip", "netns", "exec", NODE, "lldpd", "-d", "-r", "-I", RAILS[0], "-u", sock],
                         stdout=log, stderr=log)
    procs.append(p)
    for _ in range(100):
        r = subprocess.run(["lldpcli", "-u", sock, "-f", "json", "show", "interfaces"],
                           capture_output=True, text=True, timeout=10)
        if r.returncode == 0 and RAILS[0] in r.stdout:
            return p, sock
        time.sleep(0.1)
    raise RuntimeError("lldpd never listed " + RAILS[0])


def lldpd_neighbor(sock):
    r = subprocess.run(["lldpcli", "-u", sock, "-f", "json", "show", "neighbors"],
                       capture_output=True, text=True, timeout=10)
    doc = json.loads(r.stdout or "{}").get("lldp", {})
    return RAILS[0] in json.dumps(doc)


def doctor_neighbor(exe, fixture, config):
    r = subprocess.run(["ip", "netns", "exec", NODE, exe, "--sysfs-root", fixture, "--node-config", config,
                        "--json", "node", "--lldp-wait", "2"], capture_output=True, text=True, timeout=60)
    doc = json.loads(r.stdout) if r.stdout.startswith("{") else {}
    rails = {c["rail"]: c for c in doc.get("result", {}).get("cabling", [])}
    return rails.get(1, {}).get("neighbor") is not None


def judge_frames(exe, fixture, tmp, procs):
    config = os.path.join(tmp, "node.json")
    with open(config, "w") as f:
        json.dump({"rails": RAILS[:1]}, f)
    rail_mac = mac_of(NODE, RAILS[0])
    valid = pdu()
    cases = [
        ("a valid LLDPDU to the nearest bridge", [frame(NEAREST_BRIDGE, valid)]),
        ("a valid LLDPDU to the nearest non-TPMR bridge", [frame(NON_TPMR, valid)]),
        ("a valid LLDPDU to the nearest customer bridge", [frame(CUSTOMER, valid)]),
        ("an LLDPDU to the broadcast address", [frame(BROADCAST, valid)]),
        ("an LLDPDU unicast to the rail's own MAC", [frame(rail_mac, valid)]),
        ("a second chassis ID", [frame(NEAREST_BRIDGE, pdu(extra=tlv(1, b"\x07evil")))]),
        ("a second port ID", [frame(NEAREST_BRIDGE, pdu(extra=tlv(2, b"\x07evil")))]),
        ("a second TTL", [frame(NEAREST_BRIDGE, pdu(extra=tlv(3, b"\x00\x05")))]),
        ("the TTL before the port ID", [frame(NEAREST_BRIDGE, pdu(order="ctp"))]),
        ("an End TLV of one byte", [frame(NEAREST_BRIDGE, pdu(end=b"\x00"))]),
        ("no End TLV", [frame(NEAREST_BRIDGE, pdu(end=None))]),
        ("a chassis ID of reserved subtype 0",
         [frame(NEAREST_BRIDGE, tlv(1, b"\x00leaf") + pdu()[len(tlv(1, b"\x07leaf-7")):])]),
        ("a TLV of reserved type 9", [frame(NEAREST_BRIDGE, pdu(extra=tlv(9, b"x")))]),
    ]
    for what, frames in cases:
        p, sock = lldpd_start(tmp, procs)
        s = Sender(WIRE, "swp1", frames)
        try:
            ours = doctor_neighbor(exe, fixture, config)
            time.sleep(0.3)
            theirs = lldpd_neighbor(sock)
        finally:
            s.close()
            p.terminate()
            p.wait(timeout=10)
        check(ours == theirs, f"{what}: lldpd {'keeps' if theirs else 'drops'} it, rdma-doctor "
                              f"{'names a neighbour' if ours else 'names none'}")
    # A shutdown LLDPDU after a valid one: lldpd forgets the neighbour; the doctor names none.
    p, sock = lldpd_start(tmp, procs)
    try:
        s = Sender(WIRE, "swp1", [frame(NEAREST_BRIDGE, valid)])
        time.sleep(1)
        s.close()
        learned = lldpd_neighbor(sock)
        s = Sender(WIRE, "swp1", [frame(NEAREST_BRIDGE, pdu(ttl=0))])
        try:
            ours = doctor_neighbor(exe, fixture, config)
            theirs = lldpd_neighbor(sock)
        finally:
            s.close()
        check(learned and not theirs and not ours,
              f"a shutdown LLDPDU (TTL 0): lldpd had the neighbour ({learned}) and forgot it ({not theirs}); "
              f"rdma-doctor names none ({not ours})")
    finally:
        p.terminate()
        p.wait(timeout=10)


def recorded(alloc):
    path = os.path.join(alloc, "cabling.json")
    try:
        return {r["rail"]: r["switch"] for r in json.load(open(path)).get("rails", [])}
    except (OSError, ValueError):
        return {}


def tenants(dp, fixture, tmp, child="macvlan"):
    sh("ip", "link", "add", "swp2", "netns", WIRE, "type", "veth", "peer", "name", RAILS[1], "netns", NODE)
    sh("ip", "-n", WIRE, "link", "set", "swp2", "up")
    sh("ip", "-n", NODE, "link", "set", RAILS[1], "up")
    leaves = Sender(WIRE, "swp1", [frame(NEAREST_BRIDGE, pdu(chassis=b"leaf-1", name=b"leaf-1"))])
    leaves2 = Sender(WIRE, "swp2", [frame(NEAREST_BRIDGE, pdu(chassis=b"leaf-2", name=b"leaf-2"))])
    alloc = os.path.join(tmp, "alloc")
    config = os.path.join(tmp, "node2.json")
    with open(config, "w") as f:
        json.dump({"rails": RAILS}, f)
    dp_config = os.path.join(tmp, "device-plugin.json")
    with open(dp_config, "w") as f:
        json.dump({"configList": [{"resourceName": "hca", "rdmaHcaMax": 8, "policy": "per-hca",
                                   "selectors": {"linkTypes": ["ether"]}}]}, f)
    log = open(os.path.join(tmp, "dp.log"), "w")
    p = subprocess.Popen(["ip", "netns", "exec", NODE, dp, "--config", dp_config, "--sysfs-root", fixture,
                          "--device-plugin-dir", os.path.join(tmp, "plugins"), "--allocations-dir", alloc,
                          "--node-config", config, "--metrics-port", "-1", "--lldp", "--lldp-round", "1"],
                         stdout=log, stderr=log)
    taps, forgers = [], []
    try:
        for _ in range(300):
            if recorded(alloc) == {1: "leaf-1", 2: "leaf-2"}:
                break
            time.sleep(0.1)
        check(recorded(alloc) == {1: "leaf-1", 2: "leaf-2"}, f"the node heard its switches ({recorded(alloc)})")
        # Shared mode: a macvlan (or ipvlan) child of rail 1's netdev in a pod. Move mode: rail 2's
        # netdev itself.
        mode = ["mode", "bridge"] if child == "macvlan" else ["mode", "l2"]
        sh("ip", "-n", NODE, "link", "add", "link", RAILS[0], "name", "m1", "type", child, *mode)
        sh("ip", "-n", NODE, "link", "set", "m1", "netns", POD_SHARED)
        sh("ip", "-n", POD_SHARED, "link", "set", "m1", "name", "net1", "up")
        rail1_mac = mac_of(NODE, RAILS[0])
        evil = pdu(chassis=b"evil", name=b"evil")
        forged = [frame(NEAREST_BRIDGE, evil), frame(NON_TPMR, evil), frame(CUSTOMER, evil),
                  frame(BROADCAST, evil), frame(rail1_mac, evil)]
        taps.append((f"rail 1 ({RAILS[0]}) on the node", Tap(NODE, RAILS[0], b"evil")))
        forgers.append(Sender(POD_SHARED, "net1", forged))
        leaves2.close()  # rail 2 moves into a pod: its own switch's frames go there now
        sh("ip", "-n", NODE, "link", "set", RAILS[1], "netns", POD_MOVED)
        sh("ip", "-n", POD_MOVED, "link", "set", RAILS[1], "name", "net1", "up")
        forgers.append(Sender(POD_MOVED, "net1", forged))
        taps.append(("rail 2's switch port", Tap(WIRE, "swp2", b"evil")))
        time.sleep(4)  # four rounds of the watch while the forgeries are sent
        after = recorded(alloc)
        check(after == {1: "leaf-1", 2: "leaf-2"},
              f"a pod on a{'n' if child == 'ipvlan' else ''} {child} child of rail 1 and a pod holding "
              f"rail 2 do not change what the node believes of either rail's switch ({after})")
        for f in forgers:
            f.close()
        for where, t in taps:
            print(f"     what {where} received of the forgeries: {t.close() or 'nothing'}")
        taps = []
        check("evil" not in open(os.path.join(tmp, "dp.log")).read(), "no forged name reached the device plugin's log")
    finally:
        for f in forgers:
            f.close()
        for _, t in taps:
            t.close()
        leaves.close()
        leaves2.close()
        p.terminate()
        p.wait(timeout=10)
        log.close()


def main():
    if os.geteuid() != 0 or shutil.which("lldpd") is None or shutil.which("lldpcli") is None:
        print("skip: needs root and Debian's lldpd (apt-get install lldpd)")
        return 77
    exe, dp, fixture = sys.argv[1], sys.argv[2], sys.argv[3]
    child = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--child" else "macvlan"
    tmp = tempfile.mkdtemp(prefix="kuberdma-lldp-rules-")
    os.chmod(tmp, 0o755)  # lldpcli talks to lldpd's socket as the _lldpd group
    procs = []
    try:
        for ns in NAMESPACES:
            sh("ip", "netns", "add", ns)
        cable(NODE, RAILS[0], WIRE, "swp1")
        if child == "macvlan":
            judge_frames(exe, fixture, tmp, procs)
        tenants(dp, fixture, tmp, child)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        for ns in NAMESPACES:
            for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
                subprocess.run(["kill", "-9", pid], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if failures:
            for name in ("lldpd.log", "dp.log"):
                try:
                    print(f"--- {name}:\n" + open(os.path.join(tmp, name)).read()[-2000:])
                except OSError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)
    left = [ns for ns in NAMESPACES if ns in sh("ip", "netns", "list").stdout]
    check(not left, f"every namespace is gone ({left})")
    print(f"{len(failures)} failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
