#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The usage alerts against a live run's counters: `kuberdma-demo --fleet K --soak S` on the GPU
machine (tests/gpu/run.sh's usage steps) samples every rail's bytes every 5 s while NCCL runs;
this replays those samples through promtool as the device plugin would have exported them
(kuberdma_infiniband_port_data_{transmitted,received}_bytes_total per node and HCA, one
kuberdma_pod_hca_info per node's pod and rail) against the shipped rules
(deploy/monitoring/20-prometheusrule.yaml), with KubeRdmaPodNicUneven's `for` shortened to --for
(a soak of minutes, not hours), and checks which pods' NICs it names at the end of the run.

Usage: usage_alerts.py USAGE.json EXPECT [--for 1m] [--promtool promtool]
  EXPECT: "quiet" (no KubeRdmaPodNicUneven), or NODE:RAIL,... (exactly those fire).
Exit 0 when promtool agrees with EXPECT, 1 when not, 2 on bad input, 77 without promtool.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
RULES = os.path.join(HERE, "..", "..", "deploy", "monitoring", "20-prometheusrule.yaml")
ALERT = "KubeRdmaPodNicUneven"


def load_rules(for_window):
    with open(RULES) as f:
        doc = yaml.safe_load(f)
    groups = doc["spec"]["groups"]
    alert = None
    for g in groups:
        for r in g["rules"]:
            if r.get("alert") == ALERT:
                r["for"] = for_window
                alert = r
    if alert is None:
        sys.exit(f"usage_alerts: {RULES} has no {ALERT}")
    return {"groups": groups}, alert


def series(usage):
    """promtool input series: every rail's counters at 5 s steps, and each pod's HCA info."""
    by = {}
    for s in usage["samples"]:
        by.setdefault((int(s["node"]), int(s["rail"])), []).append(s)
    steps = min(len(v) for v in by.values())
    out = []
    for (node, rail), samples in sorted(by.items()):
        samples.sort(key=lambda s: s["t"])
        labels = f'node="node-{node}",hca="net{rail}",rail="{rail}"'
        for metric, key in (("transmitted", "tx"), ("received", "rx")):
            values = " ".join(str(int(s[key])) for s in samples[:steps])
            out.append({"series": f"kuberdma_infiniband_port_data_{metric}_bytes_total{{{labels}}}",
                        "values": values})
        out.append({"series": f'kuberdma_pod_hca_info{{node="node-{node}",hca="net{rail}",'
                              f'namespace="soak",pod="trainer-{node}"}}',
                    "values": f"1+0x{steps - 1}"})
    return out, steps


def expected(alert, expect):
    if expect == "quiet":
        return []
    alerts = []
    for item in expect.split(","):
        node, rail = item.split(":")
        labels = {"namespace": "soak", "pod": f"trainer-{node}", "hca": f"net{rail}",
                  "rail": rail, "node": f"node-{node}"}
        ann = {}
        for k, v in alert.get("annotations", {}).items():
            for name, value in labels.items():
                v = v.replace("{{ $labels.%s }}" % name, value)
            ann[k] = v
        alerts.append({"exp_labels": dict(labels, severity=alert["labels"]["severity"]),
                       "exp_annotations": ann})
    return alerts


def rates(usage):
    """Each rail's mean bytes/s (tx + rx) over the run, per node, for the record."""
    by = {}
    for s in usage["samples"]:
        by.setdefault((s["node"], s["rail"]), []).append(s)
    out = {}
    for k, v in sorted(by.items()):
        v.sort(key=lambda s: s["t"])
        dt = v[-1]["t"] - v[0]["t"]
        moved = (v[-1]["tx"] + v[-1]["rx"]) - (v[0]["tx"] + v[0]["rx"])
        out[f"node-{k[0]}/net{k[1]}"] = round(moved / dt / 1e6, 1) if dt > 0 else 0
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("usage")
    ap.add_argument("expect")
    ap.add_argument("--for", dest="window", default="1m")
    ap.add_argument("--promtool", default="promtool")
    a = ap.parse_args()
    promtool = shutil.which(a.promtool)
    if promtool is None:
        print("SKIP: no promtool (make promtool)")
        return 77
    try:
        with open(a.usage) as f:
            usage = json.load(f)
        inputs, steps = series(usage)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"usage_alerts: {a.usage} is not a soak's samples: {e}")
        return 2
    if steps < 13:
        print(f"usage_alerts: {a.usage} has {steps} samples a rail; a 5-minute rate needs 13 or more")
        return 2
    rules, alert = load_rules(a.window)
    test = {"rule_files": ["rules.yaml"], "evaluation_interval": "5s",
            "tests": [{"interval": "5s", "input_series": inputs,
                       "alert_rule_test": [{"eval_time": f"{(steps - 1) * 5}s", "alertname": ALERT,
                                            "exp_alerts": expected(alert, a.expect)}]}]}
    print(f"usage: {usage.get('runs')} runs, {steps} samples a rail, degrade {usage.get('degrade')}, "
          f"NCCL devices {usage.get('devices')}; MB/s per rail: {json.dumps(rates(usage))}")
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "rules.yaml"), "w") as f:
            yaml.safe_dump(rules, f)
        with open(os.path.join(tmp, "test.yaml"), "w") as f:
            yaml.safe_dump(test, f)
        r = subprocess.run([promtool, "test", "rules", "test.yaml"], cwd=tmp, capture_output=True,
                           text=True, timeout=120)
    print(r.stdout.strip() or r.stderr.strip())
    verdict = "as expected" if r.returncode == 0 else "NOT as expected"
    print(f"{ALERT} (for {a.window}) at {(steps - 1) * 5} s: {a.expect}: {verdict}")
    return 0 if r.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
