#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The library boundaries that live in the CMake target graph, checked on the graph itself
(`cmake --graphviz` of a configured build tree; run by `make boundaries`):
  - the node library's link operations do not depend on the sysfs model (kuberdma_link has no
    path to kuberdma_sysfs);
  - no production binary links test support: rdma, rdma-device-plugin, rdma-validate and
    rdma-doctor reach none of kuberdma_nl_testing (veths, bridges, qdiscs, named namespaces),
    kuberdma_sim, kuberdma_fakes, the kubelet stand-in or Catch2;
  - rdma-doctor reads CNI state records without linking the CNI plugin (kuberdma_cni);
  - the node library (netlink/) depends on no other part of the repo;
  - the node's contract (contract/, kuberdma_contract) depends on no party, and the CNI, the
    validator and the doctor reach the device plugin's and the DRA driver's code only through it:
    kuberdma_cni, kuberdma_validator_core and kuberdma_doctor link no kuberdma_deviceplugin*
    library (the doctor's one exception is the kubelet's pod-resources client) and no kuberdma_dra.
Usage: check-targets.py <build-dir>
"""
import os
import re
import subprocess
import sys
import tempfile

PRODUCTION = ["kube-rdma", "rdma-device-plugin", "rdma-validate", "rdma-doctor"]
TEST_SUPPORT = ["kuberdma_nl_testing", "kuberdma_sim", "kuberdma_fakes",
                "kuberdma_standins", "kuberdma_test_main", "Catch2::Catch2"]
NODE_LIBRARY = ["kuberdma_base", "kuberdma_netns", "kuberdma_sysfs", "kuberdma_topology", "kuberdma_dcb",
                "kuberdma_nl", "kuberdma_link", "kuberdma_rdma", "kuberdma_events", "kuberdma_rails",
                "kuberdma_sriov", "kuberdma_lldp", "kuberdma_smp", "kuberdma_sock"]


def graph(build):
    with tempfile.TemporaryDirectory() as d:
        dot = os.path.join(d, "targets.dot")
        subprocess.run(["cmake", f"--graphviz={dot}", build], check=True, capture_output=True)
        text = open(dot).read()
    edges = {}
    for a, b in re.findall(r"//\s*(\S+)\s*->\s*(\S+)", text):
        edges.setdefault(a, set()).add(b)
    return edges


def closure(edges, start):
    seen, todo = set(), [start]
    while todo:
        for n in edges.get(todo.pop(), ()):
            if n not in seen:
                seen.add(n)
                todo.append(n)
    return seen


def main(build):
    edges = graph(build)
    failures = []

    def check(ok, what):
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            failures.append(what)

    check("kuberdma_link" in edges, "the graph has kuberdma_link")
    print("     kuberdma_link -> " + ", ".join(sorted(edges.get("kuberdma_link", ()))))
    check("kuberdma_sysfs" not in closure(edges, "kuberdma_link"),
          "kuberdma_link does not depend on kuberdma_sysfs")
    for exe in PRODUCTION:
        deps = closure(edges, exe)
        check(exe in edges, f"the graph has {exe}")
        bad = sorted(set(TEST_SUPPORT) & deps)
        check(not bad, f"{exe} links no test support" + (f" (it links {', '.join(bad)})" if bad else ""))
    check("kuberdma_cni" not in closure(edges, "rdma-doctor"),
          "rdma-doctor does not link the CNI plugin library")
    for lib in NODE_LIBRARY:
        outside = sorted(d for d in closure(edges, lib)
                         if d.startswith("kuberdma_") and d not in NODE_LIBRARY + ["kuberdma_libnl", "kuberdma_log"])
        check(not outside, f"{lib} depends on nothing outside netlink/" + (f" ({', '.join(outside)})" if outside else ""))
    parties = ["kuberdma_cni", "kuberdma_cni_state", "kuberdma_deviceplugin_core", "kuberdma_deviceplugin",
               "kuberdma_dra", "kuberdma_validator_core", "kuberdma_doctor"]
    check("kuberdma_contract" in edges, "the graph has kuberdma_contract")
    inside = sorted(set(parties) & closure(edges, "kuberdma_contract"))
    check(not inside, "kuberdma_contract depends on no party" + (f" ({', '.join(inside)})" if inside else ""))
    for lib in ["kuberdma_cni", "kuberdma_validator_core", "kuberdma_doctor"]:
        check(lib in edges, f"the graph has {lib}")
        reach = closure(edges, lib)
        bad = sorted(d for d in reach if (d.startswith("kuberdma_deviceplugin") or d.startswith("kuberdma_dra"))
                     and d != "kuberdma_deviceplugin_podresources")
        check(not bad, f"{lib} reaches no device plugin or DRA library" + (f" ({', '.join(bad)})" if bad else ""))
        check("kuberdma_contract" in reach,
              f"{lib} reads the node's contract through kuberdma_contract")
    print("targets: ok" if not failures else f"targets: {len(failures)} boundary violation(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "build/ci"))
