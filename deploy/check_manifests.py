#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks deploy/manifests without a cluster (run by CTest):
  - every YAML document parses;
  - every built-in object deserialises into the Kubernetes Python client's model (Debian's
    python3-kubernetes), which rejects unknown types and missing required fields;
  - every NetworkAttachmentDefinition's config is JSON for type rdma with a name and cniVersion;
  - names agree across objects: the resources in the ConfigMap, the NAD annotations and the pod
    requests; the CNI type and the binary the DaemonSet installs; the metrics port and the probe;
    the config file, its mount and its ConfigMap; the kubelet directory, its mount and the flag;
  - with --device-plugin BIN, the ConfigMap's config passes `BIN --check-config`.
check_renders.py runs the same checks on what the Helm chart and kustomize render.
Usage: check_manifests.py <manifests-dir> [--device-plugin BIN]
"""
import json
import os
import subprocess
import sys
import tempfile

import yaml
from kubernetes import client

MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Service"): "V1Service",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
}
NAD = ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition")


class Report:
    def __init__(self):
        self.failures = []

    def ok(self, msg):
        print("ok  ", msg)

    def fail(self, msg):
        self.failures.append(msg)
        print("FAIL", msg)

    def check(self, cond, msg):
        (self.ok if cond else self.fail)(msg)

    def summary(self, what):
        print(f"{len(self.failures)} failed" if self.failures else f"all {what} checks passed")
        return 1 if self.failures else 0


def load_text(text, source, report):
    """Objects (source, dict) from a YAML stream; a parse error is a failure."""
    try:
        return [(source, d) for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as e:
        report.fail(f"{source}: YAML does not parse: {e}")
        return []


def load_dir(root, report):
    objects = []
    for name in sorted(os.listdir(root)):
        # kustomization.yaml is kustomize's index of the directory, not an object.
        if name.endswith(".yaml") and name != "kustomization.yaml":
            with open(os.path.join(root, name)) as f:
                objects += load_text(f.read(), name, report)
    report.ok(f"{len(objects)} objects parsed from {root}")
    return objects


def deserialize(obj, model):
    api = client.ApiClient()

    class Resp:
        data = json.dumps(obj)

    return api.deserialize(Resp(), model)


def validate(objects, report, device_plugin=None):
    """Every object valid on its own, then the names that tie them together."""
    by_kind = {}
    for source, d in objects:
        key = (d.get("apiVersion"), d.get("kind"))
        name = (d.get("metadata") or {}).get("name")
        by_kind.setdefault(d.get("kind"), []).append(d)
        if key in MODELS:
            try:
                deserialize(d, MODELS[key])
                report.ok(f"{source}: {d['kind']} {name} is a valid {MODELS[key]}")
            except Exception as e:  # the client raises ValueError/TypeError on bad objects
                report.fail(f"{source}: {d['kind']} {name} is not a valid {MODELS[key]}: {e}")
        elif key == NAD:
            try:
                conf = json.loads(d["spec"]["config"])
                assert conf["type"] == "rdma", f'type is {conf["type"]!r}, not "rdma"'
                assert conf.get("name"), "no name"
                assert conf.get("cniVersion"), "no cniVersion"
                report.ok(f"{source}: NAD {name} config is JSON for type rdma")
            except Exception as e:
                report.fail(f"{source}: NAD {name} config invalid: {e}")
        else:
            report.fail(f"{source}: unexpected object {key}")

    cms = [c for c in by_kind.get("ConfigMap", []) if "device-plugin.json" in c.get("data", {})]
    dss = by_kind.get("DaemonSet", [])
    if len(cms) != 1 or len(dss) != 1:
        report.fail(f"expected one device plugin ConfigMap and one DaemonSet, found {len(cms)} and {len(dss)}")
        return
    cm, ds = cms[0], dss[0]
    cm_key = "device-plugin.json"
    dp = json.loads(cm["data"][cm_key])
    resources = {f'{r.get("resourcePrefix", "rdma")}/{r["resourceName"]}' for r in dp["configList"]}

    nads = {n["metadata"]["name"]: n for n in by_kind.get("NetworkAttachmentDefinition", [])}
    for nad in nads.values():
        res = nad["metadata"].get("annotations", {}).get("k8s.v1.cni.cncf.io/resourceName")
        report.check(res in resources,
                     f"NAD {nad['metadata']['name']} resourceName {res} is served by the device plugin ({sorted(resources)})")

    for sts in by_kind.get("StatefulSet", []):
        pod = sts["spec"]["template"]["spec"]
        for c in pod.get("initContainers", []) + pod["containers"]:
            limits = c.get("resources", {}).get("limits", {})
            rdma = [k for k in limits if k.startswith("rdma/")]
            report.check(rdma and all(k in resources for k in rdma),
                         f"StatefulSet {sts['metadata']['name']} container {c['name']} requests {rdma}, served by the device plugin")
        nets = json.loads(sts["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
        names = {n["name"] for n in nets}
        report.check(names and all(n in nads for n in names),
                     f"StatefulSet {sts['metadata']['name']} attaches {len(nets)} x {sorted(names)}, all defined")
        ns = sts["metadata"].get("namespace", "default")
        report.check(all(nads[n]["metadata"].get("namespace", "default") == ns for n in names if n in nads),
                     f"StatefulSet {sts['metadata']['name']} and its networks share namespace {ns}")

    spec = ds["spec"]["template"]["spec"]
    init = spec["initContainers"][0]
    install = " ".join(init.get("command", []) + init.get("args", []))
    for conf_type in sorted({json.loads(n["spec"]["config"])["type"] for n in nads.values()}):
        report.check(f"/opt/cni/bin/{conf_type}" in install and "mv -f" in install,
                     f"DaemonSet installs /opt/cni/bin/{conf_type} atomically (copy, then rename)")
    init_mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    report.check(init_mounts.get("cni-bin") == "/host/opt/cni/bin",
                 "the install step writes to the host's CNI directory mounted at /host/opt/cni/bin")
    plugin = spec["containers"][0]
    args = plugin.get("args", [])
    port = plugin["livenessProbe"]["httpGet"]["port"]
    report.check(f"--metrics-port={port}" in args, f"liveness probe port {port} is the metrics port")
    report.check(any(p["containerPort"] == port for p in plugin.get("ports", [])), f"port {port} is declared")
    mounts = {m["name"]: m["mountPath"] for m in plugin["volumeMounts"]}
    report.check(f"--config={mounts['config']}/{cm_key}" in args,
                 f"device plugin reads {mounts['config']}/{cm_key} from ConfigMap {cm['metadata']['name']}")
    vols = {v["name"]: v for v in spec["volumes"]}
    report.check(vols["config"]["configMap"]["name"] == cm["metadata"]["name"], "config volume names the ConfigMap")
    report.check(cm["metadata"].get("namespace") == ds["metadata"].get("namespace"),
                 "ConfigMap and DaemonSet share a namespace")
    kubelet_dir = vols["device-plugins"]["hostPath"]["path"]
    report.check(mounts["device-plugins"] == kubelet_dir and f"--device-plugin-dir={kubelet_dir}" in args,
                 f"kubelet directory {kubelet_dir} is mounted where --device-plugin-dir says")

    if device_plugin:
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            f.write(cm["data"][cm_key])
            f.flush()
            r = subprocess.run([device_plugin, "--check-config", "--config", f.name], capture_output=True, text=True)
            report.check(r.returncode == 0,
                         f"rdma-device-plugin --check-config accepts the ConfigMap: {(r.stdout + r.stderr).strip()}")


def main(argv):
    device_plugin = None
    if "--device-plugin" in argv:
        i = argv.index("--device-plugin")
        device_plugin = argv[i + 1]
        del argv[i:i + 2]
    root = argv[0] if argv else os.path.join(os.path.dirname(os.path.abspath(__file__)), "manifests")
    report = Report()
    validate(load_dir(root, report), report, device_plugin)
    return report.summary("manifest")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
