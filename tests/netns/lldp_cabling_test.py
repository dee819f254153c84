#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Rail cabling proven with Debian's lldpd as the switches (CTest, root; exit 77 without root or
lldpd):
  - three leaf switches, each a network namespace running lldpd under its own hostname (leaf-1..3),
    and three nodes, each a namespace whose rails (the roce8 fixture's netdevs) are veths to the
    leaves' ports swp<node>;
  - gpu-1 and gpu-2 are cabled rail i -> leaf-i; gpu-3's rails 2 and 3 are crossed;
  - rdma-doctor node --lldp-wait in each node names each rail's switch and port, and holds them to
    the node config's railSwitches: gpu-3 fails naming both crossed rails and whose leaf they
    reached; the others pass;
  - rdma-doctor cabling over the three documents (no railSwitches: the fleet's majority) names
    gpu-3's rails 2 and 3, and only them;
  - every namespace and lldpd is removed, whatever happens.
  - rdma-device-plugin --lldp in gpu-3's namespace records what it hears (cabling.json), and
    rdma-doctor node without listening shows that record and fails the same two rails;
  - lldpd stopped (SIGTERM) sends its shutdown LLDPDU: the watch withdraws that leaf from the
    record at once; lldpd killed (SIGKILL, no word) is withdrawn once its TTL (4 s here) passes;
Usage: lldp_cabling_test.py <rdma-doctor> <rdma-device-plugin> <sysfs fixture roce8>
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

failures = []
TAG = f"lc{os.getpid() % 100000}"
LEAVES = [f"{TAG}l{i}" for i in (1, 2, 3)]
NODES = [f"{TAG}n{i}" for i in (1, 2, 3)]
NETDEVS = ["ens1f0np0", "ens2f0np0", "ens3f0np0"]


def check(cond, msg):
    print("ok  " if cond else "FAIL", msg)
    if not cond:
        failures.append(msg)


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, text=True, timeout=60, **kw)


def cable(node_ns, netdev, leaf_ns, port):
    sh("ip", "link", "add", port, "netns", leaf_ns, "type", "veth", "peer", "name", netdev, "netns", node_ns)
    sh("ip", "-n", leaf_ns, "link", "set", port, "up")
    sh("ip", "-n", node_ns, "link", "set", netdev, "up")


def start_leaves(tmp, procs):
    for i, ns in enumerate(LEAVES, 1):
        sock = os.path.join(tmp, f"leaf{i}.sock")
        log = open(os.path.join(tmp, f"leaf{i}.log"), "w")
        procs.append(subprocess.Popen(
            ["ip", "netns", "exec", ns, "unshare", "--uts", "sh", "-c",
             f"hostname leaf-{i}; exec lldpd -d -u {sock}"], stdout=log, stderr=log))
    for i in (1, 2, 3):
        sock = os.path.join(tmp, f"leaf{i}.sock")
        # Once a second instead of every 30 s, as a test's patience needs; retried while lldpd
        # starts (its control socket answers once it runs).
        for _ in range(100):
            r = subprocess.run(["lldpcli", "-u", sock, "configure", "lldp", "tx-interval", "1"],
                               capture_output=True, text=True, timeout=10)
            if r.returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError(f"lldpd of leaf-{i} never answered: {r.stderr}")


def doctor_node(exe, fixture, tmp, ns, name, switches):
    config = os.path.join(tmp, f"{name}.json")
    with open(config, "w") as f:
        json.dump({"rails": NETDEVS, "railSwitches": switches}, f)
    r = subprocess.run(["ip", "netns", "exec", ns, exe, "--sysfs-root", fixture, "--node-config", config,
                        "--json", "node", "--node", name, "--lldp-wait", "30"],
                       capture_output=True, text=True, timeout=60)
    return r, json.loads(r.stdout) if r.stdout.startswith("{") else {}


def cabling_findings(doc, check_name):
    return [f for f in doc.get("findings", []) if f["check"] == check_name]


def withdrawals(alloc, procs, tmp):
    record = os.path.join(alloc, "cabling.json")

    def rails():
        try:
            return {r["rail"]: r["switch"] for r in json.load(open(record)).get("rails", [])}
        except (OSError, ValueError):
            return None

    def wait_for(want, seconds):
        for _ in range(seconds * 10):
            if rails() == want:
                return True
            time.sleep(0.1)
        return False

    def agent(p):  # lldpd's unprivileged child: it speaks LLDP (and says goodbye when it exits)
        return [int(x) for x in subprocess.run(["pgrep", "-P", str(p.pid)], capture_output=True,
                                               text=True).stdout.split()]

    # gpu-3: rail 1 on leaf-1, rail 2 on leaf-3, rail 3 on leaf-2 (crossed).
    for pid in agent(procs[0]):
        os.kill(pid, signal.SIGTERM)  # leaf-1's agent stops: a shutdown LLDPDU on every port
    t = time.monotonic()
    ok = wait_for({2: "leaf-3", 3: "leaf-2"}, 5)
    check(ok, f"leaf-1 stopped (its shutdown LLDPDU): rail 1 is withdrawn from the record within "
              f"{time.monotonic() - t:.1f} s ({rails()})")
    for pid in agent(procs[1]):
        os.kill(pid, signal.SIGKILL)  # leaf-2's agent dies without a word: its TTL (1 s x 4) runs out
    procs[1].kill()
    procs[1].wait(timeout=10)
    t = time.monotonic()
    ok = wait_for({2: "leaf-3"}, 15)
    waited = time.monotonic() - t
    check(ok and waited >= 2, f"leaf-2 gone silent: rail 3 is withdrawn once its TTL passed, after "
                              f"{waited:.1f} s ({rails()})")
    log = open(os.path.join(tmp, "dp.log")).read()
    check("event=rail_neighbor_withdrawn hca=mlx5_0 rail=1 was=\"leaf-1 swp3\" reason=shutdown" in log and
          "event=rail_neighbor_withdrawn hca=mlx5_2 rail=3 was=\"leaf-2 swp3\" reason=expired" in log,
          "each withdrawal is logged with the switch it withdrew and why")


def device_plugin_watch(exe, dp, fixture, tmp, procs):
    alloc = os.path.join(tmp, "alloc")
    config = os.path.join(tmp, "gpu-3.json")
    log = open(os.path.join(tmp, "dp.log"), "w")
    dp_config = os.path.join(tmp, "device-plugin.json")
    with open(dp_config, "w") as f:
        json.dump({"configList": [{"resourceName": "hca", "rdmaHcaMax": 8, "policy": "per-hca",
                                   "selectors": {"linkTypes": ["ether"]}}]}, f)
    p = subprocess.Popen(["ip", "netns", "exec", NODES[2], dp, "--config", dp_config, "--sysfs-root", fixture,
                          "--device-plugin-dir", os.path.join(tmp, "plugins"), "--allocations-dir", alloc,
                          "--node-config", config, "--metrics-port", "-1", "--lldp", "--lldp-round", "2"],
                         stdout=log, stderr=log)
    try:
        record = os.path.join(alloc, "cabling.json")
        for _ in range(600):  # a minute at most; done as soon as every rail is recorded
            if os.path.exists(record) and len(json.load(open(record)).get("rails", [])) == 3:
                break
            time.sleep(0.1)
        rails = {r["rail"]: (r["switch"], r["port"]) for r in json.load(open(record))["rails"]} if os.path.exists(record) else {}
        check(rails == {1: ("leaf-1", "swp3"), 2: ("leaf-3", "swp3"), 3: ("leaf-2", "swp3")},
              f"the device plugin's watch records each rail's switch and port ({rails})")
        r = subprocess.run(["ip", "netns", "exec", NODES[2], exe, "--sysfs-root", fixture, "--node-config", config,
                            "--allocations-dir", alloc, "--json", "node"], capture_output=True, text=True, timeout=60)
        doc = json.loads(r.stdout) if r.stdout.startswith("{") else {}
        withdrawals(alloc, procs, tmp)
    finally:
        p.terminate()
        p.wait(timeout=10)
        log.close()
        if not rails:
            print(open(os.path.join(tmp, "dp.log")).read()[-3000:])
    bad = [f["message"] for f in cabling_findings(doc, "rail-cabling") if f["status"] == "FAIL"]
    check(doc.get("result", {}).get("cablingSource", "").startswith("rdma-device-plugin --lldp") and len(bad) == 2,
          f"rdma-doctor node without listening judges the device plugin's record: {bad}")


def run(exe, dp, fixture, tmp):
    for ns in LEAVES + NODES:
        sh("ip", "netns", "add", ns)
    plan = {1: [1, 2, 3], 2: [1, 2, 3], 3: [1, 3, 2]}  # node -> the leaf each rail reaches
    for n, leaves in plan.items():
        for rail, leaf in enumerate(leaves, 1):
            cable(NODES[n - 1], NETDEVS[rail - 1], LEAVES[leaf - 1], f"swp{n}")
    procs = []
    try:
        start_leaves(tmp, procs)
        docs = {}
        for n in (1, 2, 3):
            r, doc = doctor_node(exe, fixture, tmp, NODES[n - 1], f"gpu-{n}", ["leaf-1", "leaf-2", "leaf-3"])
            docs[n] = doc
            shown = {c["rail"]: (c.get("switch"), c.get("port")) for c in doc.get("result", {}).get("cabling", [])}
            want = {rail: (f"leaf-{leaf}", f"swp{n}") for rail, leaf in enumerate(plan[n], 1)}
            check(shown == want, f"gpu-{n}: each rail's switch and port as lldpd sent them ({shown})")
            bad = [f for f in cabling_findings(doc, "rail-cabling") if f["status"] == "FAIL"]
            if n < 3:
                check(not bad and r.returncode in (0, 1), f"gpu-{n}: no cabling finding ({bad})")
            else:
                msgs = " | ".join(f["message"] for f in bad)
                check(len(bad) == 2 and r.returncode == 1, f"gpu-3: both crossed rails fail the node: {msgs}")
                check("rail 2 (mlx5_1, ens2f0np0) is cabled to leaf-3 (rail 3's switch), not leaf-2" in msgs,
                      "gpu-3: rail 2 names the leaf it reached and whose it is")
        paths = []
        for n, doc in docs.items():
            p = os.path.join(tmp, f"gpu-{n}.doctor.json")
            with open(p, "w") as f:
                json.dump(doc, f)
            paths.append(p)
        r = subprocess.run([exe, "--json", "cabling", *paths], capture_output=True, text=True, timeout=30)
        fleet = json.loads(r.stdout) if r.stdout.startswith("{") else {}
        bad = [f["message"] for f in cabling_findings(fleet, "fleet-cabling") if f["status"] == "FAIL"]
        check(r.returncode == 1 and len(bad) == 2 and all(m.startswith("gpu-3 rail ") for m in bad),
              f"the fleet's majority names gpu-3's crossed rails, and only them: {bad}")
        check(any("gpu-3 rail 3 (mlx5_2, ens3f0np0) is cabled to leaf-2 (rail 2's switch), not leaf-3" in m for m in bad),
              "with the rail whose leaf it reached")
        r = subprocess.run([exe, "cabling", "--labels", *paths], capture_output=True, text=True, timeout=30)
        lines = sorted(r.stdout.splitlines())
        blocks = {l.split()[3]: [w for w in l.split() if w.startswith("topology.kube-rdma.io/block=")] for l in lines}
        check(r.returncode == 0 and len(lines) == 3 and
              "topology.kube-rdma.io/rail-2-leaf=leaf-3" in lines[2] and "topology.kube-rdma.io/rail-2-leaf=leaf-2" in lines[0]
              and len({tuple(b) for b in blocks.values()}) == 1,
              f"one kubectl label command a node: each rail's leaf, one block for nodes on the same leaves: {lines}")
        device_plugin_watch(exe, dp, fixture, tmp, procs)
    finally:
        for p in procs:
            p.kill()  # lldpd's monitor; its privilege-separated child goes with the namespace below
            p.wait(timeout=10)


def main():
    if os.geteuid() != 0 or shutil.which("lldpd") is None or shutil.which("lldpcli") is None:
        print("skip: needs root and Debian's lldpd (apt-get install lldpd)")
        return 77
    exe, dp, fixture = sys.argv[1], sys.argv[2], sys.argv[3]
    tmp = tempfile.mkdtemp(prefix="kuberdma-lldp-")
    os.chmod(tmp, 0o755)  # lldpcli talks to lldpd's socket as the _lldpd group
    try:
        run(exe, dp, fixture, tmp)
    finally:
        for ns in LEAVES + NODES:
            # Whatever still runs there (lldpd's children), then the namespace.
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
            for pid in pids:
                subprocess.run(["kill", "-9", pid], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if failures:  # what each switch said of itself, for whoever reads a failed run
            for i in (1, 2, 3):
                try:
                    print(f"--- leaf-{i}'s lldpd:\n" + open(os.path.join(tmp, f"leaf{i}.log")).read()[-1500:])
                except OSError:
                    pass
        shutil.rmtree(tmp, ignore_errors=True)
    left = [ns for ns in LEAVES + NODES if ns in sh("ip", "netns", "list").stdout]
    check(not left, f"every namespace is gone ({left})")
    running = subprocess.run(["pgrep", "-f", tmp], capture_output=True, text=True).stdout.split()
    check(not running, f"no lldpd of the test is left ({running})")
    print(f"{len(failures)} failed" if failures else "all cabling checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
