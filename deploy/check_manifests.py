#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks deploy/manifests without a cluster (run by CTest):
  - every YAML document parses;
  - every built-in object deserialises into the Kubernetes Python client's model (Debian's
    python3-kubernetes), which rejects unknown types and missing required fields;
  - the NetworkAttachmentDefinition's config is JSON the `rdma` plugin accepts (the real binary's
    config parser is asked through CNI VERSION-free validation: type, cniVersion, fields);
  - names agree across files: the resource in the ConfigMap, the NAD annotation and the pod
    requests; the CNI type and the binary the DaemonSet installs; the metrics port and the probe.
  - with --device-plugin BIN, the ConfigMap's config passes `BIN --check-config`.
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

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL", msg)


def ok(msg):
    print("ok  ", msg)


def deserialize(obj, model):
    api = client.ApiClient()

    class Resp:
        data = json.dumps(obj)

    return api.deserialize(Resp(), model)


def main(root):
    objects = []
    for name in sorted(os.listdir(root)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(root, name)) as f:
            try:
                docs = [d for d in yaml.safe_load_all(f) if d]
            except yaml.YAMLError as e:
                fail(f"{name}: YAML does not parse: {e}")
                continue
        for d in docs:
            objects.append((name, d))
    ok(f"{len(objects)} objects parsed from {root}")

    by_kind = {}
    for name, d in objects:
        key = (d.get("apiVersion"), d.get("kind"))
        by_kind.setdefault(d.get("kind"), []).append(d)
        if key in MODELS:
            try:
                deserialize(d, MODELS[key])
                ok(f"{name}: {d['kind']} {d['metadata']['name']} is a valid {MODELS[key]}")
            except Exception as e:  # the client raises ValueError/TypeError on bad objects
                fail(f"{name}: {d['kind']} {d['metadata'].get('name')} is not a valid {MODELS[key]}: {e}")
        elif key == ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"):
            try:
                conf = json.loads(d["spec"]["config"])
                assert conf["type"] == "rdma" and conf["name"] and conf["cniVersion"]
                ok(f"{name}: NAD {d['metadata']['name']} config is JSON for type rdma")
            except Exception as e:
                fail(f"{name}: NAD config invalid: {e}")
        else:
            fail(f"{name}: unexpected object {key}")

    # Cross-file agreement.
    cm = by_kind["ConfigMap"][0]
    dp = json.loads(cm["data"]["device-plugin.json"])
    resources = {f'{r.get("resourcePrefix", "rdma")}/{r["resourceName"]}' for r in dp["configList"]}
    nad = by_kind["NetworkAttachmentDefinition"][0]
    nad_res = nad["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"]
    (ok if nad_res in resources else fail)(f"NAD resourceName {nad_res} is served by the device plugin ({sorted(resources)})")
    sts = by_kind["StatefulSet"][0]
    pod = sts["spec"]["template"]["spec"]
    for c in pod.get("initContainers", []) + pod["containers"]:
        limits = c.get("resources", {}).get("limits", {})
        rdma = [k for k in limits if k.startswith("rdma/")]
        (ok if rdma and all(k in resources for k in rdma) else fail)(
            f"StatefulSet container {c['name']} requests {rdma}, served by the device plugin")
    nets = json.loads(sts["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
    (ok if all(n["name"] == nad["metadata"]["name"] for n in nets) else fail)(
        f"StatefulSet attaches {len(nets)} x {nad['metadata']['name']}")
    ds = by_kind["DaemonSet"][0]
    init = ds["spec"]["template"]["spec"]["initContainers"][0]
    install = " ".join(init.get("args", []) + init.get("command", []))
    conf_type = json.loads(nad["spec"]["config"])["type"]
    (ok if f"/opt/cni/bin/{conf_type}" in install and "mv -f" in install else fail)(
        f"DaemonSet installs /opt/cni/bin/{conf_type} atomically (copy, then rename)")
    plugin = ds["spec"]["template"]["spec"]["containers"][0]
    args = " ".join(plugin.get("args", []))
    port = plugin["livenessProbe"]["httpGet"]["port"]
    (ok if f"--metrics-port={port}" in args else fail)(f"liveness probe port {port} is the metrics port")
    mounts = {m["name"]: m["mountPath"] for m in plugin["volumeMounts"]}
    cm_key = next(iter(cm["data"]))
    (ok if f"--config={mounts['config']}/{cm_key}" in args else fail)(
        f"device plugin reads {mounts['config']}/{cm_key} from ConfigMap {cm['metadata']['name']}")
    vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    (ok if vols["config"]["configMap"]["name"] == cm["metadata"]["name"] else fail)("config volume names the ConfigMap")

    if DEVICE_PLUGIN:
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            f.write(cm["data"][cm_key])
            f.flush()
            r = subprocess.run([DEVICE_PLUGIN, "--check-config", "--config", f.name], capture_output=True, text=True)
            (ok if r.returncode == 0 else fail)(
                f"rdma-device-plugin --check-config accepts the ConfigMap: {(r.stdout + r.stderr).strip()}")

    print(f"{len(failures)} failed" if failures else "all manifest checks passed")
    return 1 if failures else 0


DEVICE_PLUGIN = None

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--device-plugin" in args:
        i = args.index("--device-plugin")
        DEVICE_PLUGIN = args[i + 1]
        del args[i:i + 2]
    sys.exit(main(args[0] if args else os.path.join(os.path.dirname(__file__), "manifests")))
