#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks deploy/monitoring's alerts without a Prometheus (run by CTest):
  - the PrometheusRule's groups pass `promtool check rules`;
  - `promtool test rules tests/deploy/alerts_test.yaml` passes: each alert fires on synthetic
    series of the metric it is about, after its `for`, with the labels and text it promises;
  - every alert has a test, and every kuberdma_* metric an expression names is one that
    rdma-device-plugin or rdma-validate exports (their family tables in the source), so a renamed
    metric cannot leave an alert that never fires.
promtool comes from Debian's prometheus package (.ci/install-promtool.sh).
Usage: check_monitoring.py [--promtool BIN]
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RULE = os.path.join(HERE, "monitoring", "20-prometheusrule.yaml")
TESTS = os.path.join(ROOT, "tests", "deploy", "alerts_test.yaml")
DASHBOARD = os.path.join(HERE, "monitoring", "30-grafana-dashboard.yaml")
# Where the exported metric families are declared.
SOURCES = [os.path.join(ROOT, "deviceplugin", "src", "metrics.cc"),
           os.path.join(ROOT, "deviceplugin", "src", "port_counters.cc"),
           os.path.join(ROOT, "deviceplugin", "include", "kuberdma", "deviceplugin", "pod_usage.h"),
           os.path.join(ROOT, "tools", "validator", "src", "reports", "push_samples.cc")]
failures = []


def check(cond, msg):
    print("ok  " if cond else "FAIL", msg)
    if not cond:
        failures.append(msg)


def exported():
    names = set()
    for path in SOURCES:
        names |= set(re.findall(r'"(kuberdma_[a-z_]+)"', open(path).read()))
    return names


def main(argv):
    promtool = argv[argv.index("--promtool") + 1] if "--promtool" in argv else shutil.which("promtool")
    rule = yaml.safe_load(open(RULE))
    groups = rule["spec"]["groups"]
    alerts = [r for g in groups for r in g["rules"] if "alert" in r]
    known = exported()
    # A recorded series stands for the metrics its expression reads (records may use records).
    records = {}
    for r in (r for g in groups for r in g["rules"] if "record" in r):
        used = set(re.findall(r"\bkuberdma_[a-z_]+", r["expr"]))
        for name in re.findall(r"\bkuberdma:[a-z_0-9:]+", r["expr"]):
            used |= records.get(name, {"undefined record " + name})
        records[r["record"]] = used
        check(used and used <= known, f"record {r['record']}: {sorted(used)} exported by our binaries")
    for r in alerts:
        used = set(re.findall(r"\bkuberdma_[a-z_]+", r["expr"]))
        for name in re.findall(r"\bkuberdma:[a-z_0-9:]+", r["expr"]):
            used |= records.get(name, {"undefined record " + name})
        if re.search(r'\bup\{job="kube-rdma/kube-rdma-node"\}', r["expr"]):
            used.add("up")  # Prometheus's own series for the PodMonitor's targets
        check(used and used <= known | {"up"}, f"{r['alert']}: {sorted(used)} exported by our binaries (or the scrape's up)")
    # Every alert links to its runbook, and the runbook has that section (GitHub's anchor: the
    # heading lower-cased).
    runbooks = open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "runbooks.md")).read()
    anchors = {h.strip().lower().replace(" ", "-") for h in re.findall(r"^## (.+)$", runbooks, re.M)}
    base = "https://github.com/kube-rdma/kube-rdma/blob/main/docs/runbooks.md#"
    for r in alerts:
        url = r.get("annotations", {}).get("runbook_url", "")
        check(url == base + r["alert"].lower() and r["alert"].lower() in anchors,
              f"{r['alert']}: runbook_url {url!r} names its section of docs/runbooks.md")
    tests = yaml.safe_load(open(TESTS))
    tested = {t["alertname"] for group in tests["tests"] for t in group.get("alert_rule_test", [])}
    check(tested >= {r["alert"] for r in alerts},
          f"every alert has a promtool test (untested: {sorted({r['alert'] for r in alerts} - tested)})")
    if not promtool:
        check(False, "promtool is installed (make deps: .ci/install-promtool.sh)")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "rules.yaml"), "w") as f:
            yaml.safe_dump({"groups": groups}, f)
        shutil.copy(TESTS, os.path.join(tmp, "alerts_test.yaml"))
        r = subprocess.run([promtool, "check", "rules", "rules.yaml"], cwd=tmp, capture_output=True, text=True)
        check(r.returncode == 0, f"promtool check rules: {(r.stdout + r.stderr).strip().splitlines()[-1]}")
        r = subprocess.run([promtool, "test", "rules", "alerts_test.yaml"], cwd=tmp, capture_output=True, text=True)
        check(r.returncode == 0, "promtool test rules alerts_test.yaml" + ("" if r.returncode == 0 else f":\n{r.stdout}{r.stderr}"))
        check_dashboard(promtool, tmp, known, records)
    print(f"{len(failures)} failed" if failures else "all monitoring checks passed")
    return 1 if failures else 0


def check_dashboard(promtool, tmp, known, records):
    """The dashboard is valid JSON, every panel that queries has a PromQL expression that promtool
    parses (each as a recording rule, with the dashboard's variables at their "All" value) and
    that names only metrics our binaries export (through the recording rules it reads)."""
    cm = yaml.safe_load(open(DASHBOARD))
    check(cm["metadata"].get("labels", {}).get("grafana_dashboard") == "1",
          "the dashboard ConfigMap carries Grafana's sidecar label grafana_dashboard")
    try:
        dash = json.loads(cm["data"]["kube-rdma.json"])
    except (KeyError, ValueError) as e:
        check(False, f"the dashboard is JSON: {e}")
        return
    exprs = [t["expr"] for p in dash.get("panels", []) for t in p.get("targets", [])]
    check(len(exprs) >= 10, f"the dashboard queries ({len(exprs)} expressions)")
    for e in exprs:
        used = set(re.findall(r"\bkuberdma_[a-z_]+", e))
        for name in re.findall(r"\bkuberdma:[a-z_0-9:]+", e):
            used |= records.get(name, {"undefined record " + name})
        check(used and used <= known, f"dashboard: {sorted(used)} exported by our binaries")
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"kuberdma:dashboard_{i}", "expr": re.sub(r"\$[a-z]+", ".*", e)}
        for i, e in enumerate(exprs)]}]}
    with open(os.path.join(tmp, "dashboard.yaml"), "w") as f:
        yaml.safe_dump(rules, f)
    r = subprocess.run([promtool, "check", "rules", "dashboard.yaml"], cwd=tmp, capture_output=True, text=True)
    check(r.returncode == 0, "promtool parses every dashboard expression" +
          ("" if r.returncode == 0 else f": {r.stdout}{r.stderr}"))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
