#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks deploy/manifests without a cluster (run by CTest):
  - every YAML document parses;
  - every built-in object deserialises into the Kubernetes Python client's model (Debian's
    python3-kubernetes), which rejects unknown types and missing required fields;
  - every NetworkAttachmentDefinition's config is JSON for type rdma with a name and cniVersion;
  - names agree across objects: the resources in the ConfigMap, the NAD annotations and the pod
    requests (trainer and acceptance pods); the CNI type and the binary the DaemonSet installs;
    the metrics port and the probe; the config file, its mount and its ConfigMap; the kubelet
    directory, its mount and the flag; the acceptance Job, its headless Service and NCCL_COMM_ID;
    the PodMonitor's selector and port and the DaemonSet's pods;
  - with --device-plugin BIN, the ConfigMap's config passes `BIN --check-config`.
check_renders.py runs the same checks on what the Helm chart and kustomize render.
Usage: check_manifests.py <dir>... [--device-plugin BIN]   (the dirs are checked as one set:
deploy/manifests deploy/acceptance deploy/monitoring)
"""
import json
import re
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
    ("v1", "ResourceQuota"): "V1ResourceQuota",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("apps/v1", "StatefulSet"): "V1StatefulSet",
    ("batch/v1", "Job"): "V1Job",
    ("batch/v1", "CronJob"): "V1CronJob",
}
# The Prometheus Operator's kinds: no model in the client; check_monitoring.py checks the rules
# with promtool, and the agreement checks below tie the PodMonitor to the DaemonSet.
OPERATOR = {("monitoring.coreos.com/v1", "PodMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}
NAD = ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition")


# The kustomize overlay (deploy/kustomize/private-registry) uses `patches:`, which kustomize v4
# introduced; Debian 12's own kubectl (kubernetes-client 1.20) embeds kustomize v2. Both checks
# that render it skip it there, saying so, rather than fail on the machine's tool.
OVERLAY_MIN_KUSTOMIZE = 4


def kustomize_version(kubectl):
    """The major version of the kustomize that `kubectl` embeds, 0 where it says none."""
    r = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True)
    m = re.search(r"Kustomize Version: v(\d+)", r.stdout)
    return int(m.group(1)) if m else 0


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
        elif key in OPERATOR:
            report.check(isinstance(d.get("spec"), dict) and name,
                         f"{source}: {d['kind']} {name} has a name and a spec")
        elif key == NAD:
            try:
                conf = json.loads(d["spec"]["config"])
                assert conf.get("type"), "no type"
                assert conf.get("name"), "no name"
                assert conf.get("cniVersion"), "no cniVersion"
                report.ok(f"{source}: NAD {name} config is JSON for type {conf['type']}")
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

    for kind, obj, template in workloads(by_kind):
        check_workload(report, f"{kind} {obj['metadata']['name']}", obj["metadata"].get("namespace", "default"),
                       template, resources, nads)
    for kind, obj, template in workloads(by_kind):
        if kind in ("Job", "CronJob"):
            check_acceptance(report, obj, template, by_kind.get("Service", []))
        else:
            check_trainer(report, obj, template, by_kind.get("Service", []))

    spec = ds["spec"]["template"]["spec"]
    init = spec["initContainers"][0]
    install = " ".join(init.get("command", []) + init.get("args", []))
    for conf_type in sorted({json.loads(n["spec"]["config"])["type"] for n in nads.values()}):
        report.check(f"rdma --install /host/opt/cni/bin/{conf_type} " in install,
                     f"DaemonSet installs /opt/cni/bin/{conf_type} with rdma --install (atomic, never over another plugin's file)")
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

    for pm in by_kind.get("PodMonitor", []):
        pod_labels = ds["spec"]["template"]["metadata"]["labels"]
        want = pm["spec"]["selector"]["matchLabels"]
        report.check(all(pod_labels.get(k) == v for k, v in want.items()),
                     f"PodMonitor {pm['metadata']['name']} selects the DaemonSet's pods ({want})")
        ports = {p.get("name") for p in plugin.get("ports", [])}
        report.check(all(e["port"] in ports for e in pm["spec"]["podMetricsEndpoints"]),
                     f"PodMonitor {pm['metadata']['name']} scrapes a port the device plugin declares ({sorted(ports)})")
        report.check(pm["metadata"].get("namespace") == ds["metadata"].get("namespace"),
                     "PodMonitor and DaemonSet share a namespace")

    if device_plugin:
        with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
            f.write(cm["data"][cm_key])
            f.flush()
            r = subprocess.run([device_plugin, "--check-config", "--config", f.name], capture_output=True, text=True)
            report.check(r.returncode == 0,
                         f"rdma-device-plugin --check-config accepts the ConfigMap: {(r.stdout + r.stderr).strip()}")


def workloads(by_kind):
    """(kind, object, pod template) of every object that runs pods asking for RDMA devices."""
    for sts in by_kind.get("StatefulSet", []):
        yield "StatefulSet", sts, sts["spec"]["template"]
    for job in by_kind.get("Job", []):
        yield "Job", job, job["spec"]["template"]
    for cj in by_kind.get("CronJob", []):
        yield "CronJob", cj, cj["spec"]["jobTemplate"]["spec"]["template"]


def check_workload(report, what, ns, template, resources, nads):
    pod = template["spec"]
    for c in pod.get("initContainers", []) + pod["containers"]:
        limits = c.get("resources", {}).get("limits", {})
        rdma = [k for k in limits if k.startswith("rdma/")]
        if c["name"] == "rdma-validate-copy":  # copies a file: no HCA, no GPU
            report.check(not limits, f"{what} container {c['name']} asks for no devices")
            continue
        report.check(rdma and all(k in resources for k in rdma),
                     f"{what} container {c['name']} requests {rdma}, served by the device plugin")
    nets = json.loads(template["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
    names = {n["name"] for n in nets}
    report.check(names and all(n in nads for n in names), f"{what} attaches {len(nets)} x {sorted(names)}, all defined")
    report.check(all(nads[n]["metadata"].get("namespace", "default") == ns for n in names if n in nads),
                 f"{what} and its networks share namespace {ns}")


# Set by rdma-device-plugin for the HCAs a container was allocated: a pod-spec value shadows it.
PLUGIN_ENV = ("NCCL_IB_HCA", "KUBERDMA_HCAS")


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def check_trainer(report, sts, template, services):
    """The validator init container proves what the trainer will get: the same NCCL settings,
    nothing shadowing the device plugin's, and names that resolve."""
    name = sts["metadata"]["name"]
    pod = template["spec"]
    for c in pod.get("initContainers", []) + pod["containers"]:
        shadow = [k for k in env_of(c) if k in PLUGIN_ENV]
        report.check(not shadow, f"StatefulSet {name} container {c['name']} leaves {', '.join(PLUGIN_ENV)} "
                     f"to the device plugin (sets: {shadow or 'none'})")
    validators = [c for c in pod.get("initContainers", []) if "rdma-validate" in " ".join(c.get("command", []))]
    svc = next((s for s in services if s["metadata"]["name"] == sts["spec"].get("serviceName")), None)
    report.check(svc is not None and svc["spec"].get("clusterIP") == "None" and svc["spec"].get("publishNotReadyAddresses"),
                 f"StatefulSet {name}: serviceName {sts['spec'].get('serviceName')} is a headless Service "
                 "publishing pods before they are ready (init containers bootstrap through it)")
    rank0 = f"{name}-0.{sts['spec'].get('serviceName')}"
    for v in validators:
        if v["command"][0].startswith("/kube-rdma/bin/"):
            report.check(v["image"] == pod["containers"][0]["image"],
                         f"StatefulSet {name}: the copied rdma-validate runs in the trainer's image "
                         f"({v['image']}), on the NCCL it trains with")
        venv = env_of(v)
        for c in pod["containers"]:
            nccl = {k: x for k, x in env_of(c).items() if k.startswith("NCCL_")}
            differ = sorted(k for k, x in nccl.items() if venv.get(k) != x)
            report.check(not differ, f"StatefulSet {name}: the validator sees {c['name']}'s NCCL environment "
                         f"({len(nccl)} variables; different or missing: {differ or 'none'})")
        report.check(venv.get("WORLD_SIZE") == str(sts["spec"].get("replicas", 1)),
                     f"StatefulSet {name}: the validator's WORLD_SIZE is the replicas ({sts['spec'].get('replicas', 1)})")
        report.check(str(venv.get("NCCL_COMM_ID", "")).startswith(rank0 + ":"),
                     f"StatefulSet {name}: NCCL_COMM_ID {venv.get('NCCL_COMM_ID')} is rank 0 through the Service")
    for c in pod["containers"]:
        line = " ".join(c.get("command", []) + c.get("args", []))
        if "torchrun" not in line:
            continue
        flags = dict(re.findall(r"--([a-z-]+)=(\S+)", line))
        report.check(flags.get("nnodes") == str(sts["spec"].get("replicas", 1)),
                     f"StatefulSet {name}: torchrun --nnodes={flags.get('nnodes')} is the replicas ({sts['spec'].get('replicas', 1)})")
        host, _, port = flags.get("rdzv-endpoint", "").partition(":")
        ports = {p["port"] for p in (svc or {}).get("spec", {}).get("ports", [])}
        report.check(host == rank0 and port.isdigit() and int(port) in ports,
                     f"StatefulSet {name}: --rdzv-endpoint {flags.get('rdzv-endpoint')} is pod 0 through the "
                     f"Service on a port it declares ({sorted(ports)})")


def check_acceptance(report, job, template, services):
    """An Indexed Job of one pod per node whose rank 0 the others reach by the headless Service."""
    name = job["metadata"]["name"]
    spec = job["spec"]["jobTemplate"]["spec"] if job["kind"] == "CronJob" else job["spec"]
    pod = template["spec"]
    c = pod["containers"][0]
    env = {e["name"]: e for e in c.get("env", [])}
    report.check(spec.get("completionMode") == "Indexed" and spec.get("completions") == spec.get("parallelism"),
                 f"{job['kind']} {name}: Indexed, every pod at once (completions = parallelism)")
    report.check(env.get("WORLD_SIZE", {}).get("value") == str(spec.get("completions")),
                 f"{job['kind']} {name}: WORLD_SIZE is the number of pods ({spec.get('completions')})")
    anti = pod.get("affinity", {}).get("podAntiAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
    report.check(any(t.get("topologyKey") == "kubernetes.io/hostname" for t in anti),
                 f"{job['kind']} {name}: one pod per node (required anti-affinity on the hostname)")
    svc = next((s for s in services if s["metadata"]["name"] == pod.get("subdomain")), None)
    report.check(svc is not None and svc["spec"].get("clusterIP") == "None" and svc["spec"].get("publishNotReadyAddresses"),
                 f"{job['kind']} {name}: subdomain {pod.get('subdomain')} is a headless Service publishing pods before they are ready")
    if svc is None:
        return
    report.check(all(template["metadata"]["labels"].get(k) == v for k, v in svc["spec"]["selector"].items()),
                 f"{job['kind']} {name}: the Service selects its pods")
    comm = env.get("NCCL_COMM_ID", {}).get("value", "")
    port = next((p["port"] for p in svc["spec"]["ports"] if p["name"] == "nccl-bootstrap"), None)
    report.check(comm == f"$(JOB_NAME)-0.{svc['metadata']['name']}:{port}" and
                 env.get("JOB_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.labels['job-name']",
                 f"{job['kind']} {name}: NCCL_COMM_ID {comm} is rank 0's pod through the Service, port {port}")
    coord = next((p["port"] for p in svc["spec"]["ports"] if p["name"] == "coordinator"), None)
    report.check(coord == port + 1 if port else False,
                 f"{job['kind']} {name}: the Service exposes the coordinator on the next port ({coord})")
    args = c.get("args", [])
    if "--baseline" in args:
        mount = os.path.dirname(args[args.index("--baseline") + 1])
        mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        vols = {v["name"]: v for v in pod.get("volumes", [])}
        vol = vols.get(mounts.get(mount), {})
        report.check(vol.get("configMap", {}).get("optional") is True,
                     f"{job['kind']} {name}: the baseline comes from an optional ConfigMap mounted at {mount}")


def main(argv):
    device_plugin = None
    if "--device-plugin" in argv:
        i = argv.index("--device-plugin")
        device_plugin = argv[i + 1]
        del argv[i:i + 2]
    here = os.path.dirname(os.path.abspath(__file__))
    roots = argv or [os.path.join(here, d) for d in ("manifests", "acceptance", "monitoring")]
    report = Report()
    validate([o for root in roots for o in load_dir(root, report)], report, device_plugin)
    return report.summary("manifest")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
