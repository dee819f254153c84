#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that the Helm chart and kustomize render what deploy/manifests says (run by CTest):
  - `helm lint --strict` passes, with the default values and with each ci/*-values.yaml;
  - the chart with ci/manifests-values.yaml renders exactly the objects in deploy/manifests
    (compared as parsed objects: key order, JSON formatting and Helm's own bookkeeping labels
    helm.sh/chart, app.kubernetes.io/{managed-by,instance,version} do not count);
  - the chart with its defaults renders the node part only (no Namespace, no example trainer);
  - with ci/acceptance-values.yaml its acceptance and monitoring parts render exactly
    deploy/acceptance and deploy/monitoring; a schedule renders a CronJob of the same Job;
  - every render passes check_manifests.py's checks (Kubernetes models, names agreeing);
  - bad values are refused with a message: a misspelt key, a network without cniVersion;
  - NOTES.txt renders (through `tpl`: Helm renders it only against a cluster);
  - `kubectl kustomize deploy/manifests` renders exactly the manifests, and the example overlay
    renders valid objects with its images and node label.
Usage: check_renders.py [--helm BIN] [--kubectl BIN] [--device-plugin BIN]
"""
import json
import os
import shutil
import contextlib
import io
import subprocess
import sys
import tempfile

import check_manifests as cm

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = os.path.join(HERE, "helm", "kube-rdma")
MANIFESTS = os.path.join(HERE, "manifests")
TRAINER = os.path.join(HERE, "kustomize", "example-trainer")
# The values files users start from, one per fabric.
EXAMPLES_DIR = os.path.join(os.path.dirname(HERE), "examples")
EXAMPLES = sorted(os.path.join(EXAMPLES_DIR, d, "values.yaml") for d in os.listdir(EXAMPLES_DIR)
                  if os.path.isfile(os.path.join(EXAMPLES_DIR, d, "values.yaml")))
OVERLAY = os.path.join(HERE, "kustomize", "private-registry")
EXTRA = [os.path.join(HERE, "acceptance"), os.path.join(HERE, "monitoring")]
HELM_LABELS = {"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
               "app.kubernetes.io/version"}


def normalize(v):
    """The object as the API server would see it, minus Helm's bookkeeping labels; JSON held in
    strings (NAD configs, the plugin config, the networks annotation) compared as JSON."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k == "labels" and isinstance(x, dict):
                x = {lk: lv for lk, lv in x.items() if lk not in HELM_LABELS}
            out[k] = normalize(x)
        return out
    if isinstance(v, list):
        return [normalize(x) for x in v]
    if isinstance(v, str) and v.lstrip()[:1] in ("{", "["):
        try:
            return {"<json>": normalize(json.loads(v))}
        except ValueError:
            return v
    return v


def identity(obj):
    md = obj.get("metadata", {})
    return (obj.get("apiVersion"), obj.get("kind"), md.get("namespace", ""), md.get("name"))


def first_difference(a, b, path=""):
    if type(a) is not type(b):
        return f"{path or '/'}: {a!r} vs {b!r}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{path}/{k}: {'missing' if k not in a else repr(a[k])} vs {'missing' if k not in b else repr(b[k])}"
            d = first_difference(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        return None
    return None if a == b else f"{path}: {a!r} vs {b!r}"


def compare(report, label, got, want):
    """got/want: lists of (source, obj). Same identities, same normalized content."""
    g = {identity(o): normalize(o) for _, o in got}
    w = {identity(o): normalize(o) for _, o in want}
    for key in sorted(set(g) | set(w), key=str):
        name = f"{key[1]} {key[2] + '/' if key[2] else ''}{key[3]}"
        if key not in g:
            report.fail(f"{label}: {name} is in deploy/manifests but not rendered")
        elif key not in w:
            report.fail(f"{label}: {name} is rendered but not in deploy/manifests")
        else:
            d = first_difference(g[key], w[key])
            report.check(d is None, f"{label}: {name} equals deploy/manifests" + (f" (differs at {d})" if d else ""))


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


# The image every rendering here uses (the chart refuses to render without one).
IMAGE_VALUES = os.path.join(HERE, "render-image.yaml")


def helm_template(helm, release, namespace, *values, image=True):
    cmd = [helm, "template", release, CHART, "--namespace", namespace]
    if image:
        cmd += ["--values", IMAGE_VALUES]
    for v in values:
        cmd += ["--values", v] if os.path.exists(v) else ["--set", v]
    return run(cmd)


def check_helm(report, helm, want, device_plugin):
    ci = os.path.join(CHART, "ci")
    for values in [None] + sorted(os.path.join(ci, f) for f in os.listdir(ci)) + EXAMPLES:
        r = run([helm, "lint", "--strict", CHART, "--values", IMAGE_VALUES] + (["--values", values] if values else []))
        report.check(r.returncode == 0, f"helm lint --strict with {os.path.basename(values) if values else 'default values'}"
                     + ("" if r.returncode == 0 else f":\n{r.stdout}{r.stderr}"))

    r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "manifests-values.yaml"))
    report.check(r.returncode == 0, "helm template with ci/manifests-values.yaml" + (f": {r.stderr}" if r.returncode else ""))
    got = cm.load_text(r.stdout, "helm(manifests-values)", report)
    compare(report, "helm", got, want)
    cm.validate(got, report, device_plugin)

    # No default image: the project publishes none, and a default would only be ImagePullBackOff.
    r = helm_template(helm, "kube-rdma", "kube-rdma", image=False)
    report.check(r.returncode != 0 and "image.repository is empty" in r.stderr
                 and "deploy/images/push.sh" in r.stderr,
                 f"without image.repository the chart refuses to render, saying how to build and push one: {r.stderr.strip()[:300]}")
    r = helm_template(helm, "kube-rdma", "kube-rdma", "acceptance.enabled=true", "acceptance.jobImage=",
                      "acceptance.image.repository=")
    jobs = [o for _, o in cm.load_text(r.stdout, "helm(acceptance)", report) if o["kind"] == "Job"] if r.returncode == 0 else []
    images = {c["image"] for j in jobs for c in j["spec"]["template"]["spec"]["containers"] + j["spec"]["template"]["spec"].get("initContainers", [])}
    report.check(images == {"registry.example.com/kube-rdma/kube-rdma:0.1.0", "nvcr.io/nvidia/pytorch:24.10-py3"},
                 f"the acceptance Job needs no validator image: rdma-validate copied from the node image into the trainer's image: {images} {r.stderr[:300]}")
    r = helm_template(helm, "kube-rdma", "kube-rdma", "trainer.enabled=true", "trainer.validator.runIn=image")
    report.check(r.returncode != 0 and "trainer.validator.image.repository is empty" in r.stderr,
                 f"a validator image asked for but not named is refused, naming the value: {r.stderr.strip()[:200]}")

    r = helm_template(helm, "kube-rdma", "kube-rdma")
    report.check(r.returncode == 0, "helm template with default values" + (f": {r.stderr}" if r.returncode else ""))
    got = cm.load_text(r.stdout, "helm(defaults)", report)
    kinds = sorted(o["kind"] for _, o in got)
    node_kinds = ["ConfigMap", "DaemonSet", "NetworkAttachmentDefinition", "ResourceQuota"]
    report.check(kinds == node_kinds,
                 f"defaults render the node part (its critical-pods quota included) and the InfiniBand network only: {kinds}")
    node_part = [(s, o) for s, o in want if o["kind"] in node_kinds]
    compare(report, "helm(defaults)", got, node_part)

    r = helm_template(helm, "rdma", "rdma-system", os.path.join(ci, "custom-values.yaml"))
    report.check(r.returncode == 0, "helm template with ci/custom-values.yaml" + (f": {r.stderr}" if r.returncode else ""))
    got = cm.load_text(r.stdout, "helm(custom-values)", report)
    cm.validate(got, report, device_plugin)
    objs = {(o["kind"], o["metadata"]["name"]): o for _, o in got}
    ds = objs.get(("DaemonSet", "rdma-kube-rdma-node"))
    report.check(ds is not None and ds["metadata"]["namespace"] == "rdma-system",
                 "release rdma in rdma-system names its DaemonSet rdma-kube-rdma-node there")
    if ds:
        vols = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
        report.check(vols["cni-bin"]["hostPath"]["path"] == "/home/kubernetes/bin", "cni.binDir is the host path the binary goes to")
    sts = objs.get(("StatefulSet", "llm-trainer"))
    if sts:
        nets = json.loads(sts["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
        validator = [c for c in sts["spec"]["template"]["spec"]["initContainers"] if c["name"] == "rdma-validate"][0]
        env = {e["name"]: e.get("value") for e in validator["env"]}
        report.check([n["interface"] for n in nets] == ["net1", "net2", "net3", "net4"] and env["WORLD_SIZE"] == "2",
                     "trainer: 4 attachments net1..net4, WORLD_SIZE follows replicas")
    else:
        report.fail("ci/custom-values.yaml renders no trainer StatefulSet")

    check_helm_acceptance(report, helm, want, device_plugin)

    # NOTES.txt is rendered only by an install against a cluster; render it here through `tpl`.
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "kube-rdma")
        shutil.copytree(CHART, copy)
        shutil.copy(os.path.join(CHART, "templates", "NOTES.txt"), os.path.join(copy, "notes.txt"))
        with open(os.path.join(copy, "templates", "notes-check.yaml"), "w") as f:
            f.write('notes: {{ tpl (.Files.Get "notes.txt") . | toJson }}\n')
        r = run([helm, "template", "kube-rdma", copy, "-n", "kube-rdma", "--values", IMAGE_VALUES,
                 "--show-only", "templates/notes-check.yaml"])
        notes = (cm.yaml.safe_load(r.stdout) or {}).get("notes", "") if r.returncode == 0 else ""
        report.check("RDMA_HCA:.status.allocatable.rdma/hca" in notes
                     and "rdma-doctor --host-root /host node" in notes and "default/kube-rdma-ib (rdma/hca)" in notes,
                     "NOTES.txt renders: allocatable columns per pool, the doctor command, the networks"
                     + ("" if r.returncode == 0 else f": {r.stderr}"))

    refused = [
        (["devicePlugin.metricPort=9200"], "metricPort", "a misspelt key"),
        (["networks[0].name=rdma-net", "networks[0].config.mtu=9000"], "cniVersion", "a network without cniVersion"),
        (["trainer.validator.transport=tcp"], "transport", "an unknown validator transport"),
        (["acceptance.pairs=sometimes"], "pairs", "an unknown acceptance pairs policy"),
        (["acceptance.nodes=1"], "nodes", "an acceptance of one node"),
        (["acceptance.pushGateway=pushgateway:9091"], "pushGateway", "a Pushgateway without http://"),
        (["trainer.enabled=true", "trainer.env[0].name=NCCL_IB_HCA", "trainer.env[0].value=mlx5_0"],
         "NCCL_IB_HCA", "a trainer env that would shadow the device plugin's NCCL_IB_HCA"),
    ]
    for sets, word, what in refused:
        r = helm_template(helm, "kube-rdma", "kube-rdma", *sets)
        report.check(r.returncode != 0 and word in r.stderr,
                     f"{what} is refused, naming {word}: {r.stderr.strip().splitlines()[-1] if r.stderr.strip() else 'no error'}")

    # A hand-written trainer as commonly written (--nnodes=8 with one replica, a rendezvous at trainer-0) and a
    # validator told other NCCL settings than the trainer: the offline checks must catch each.
    handwritten_args = "trainer.args[0]=torchrun --nnodes=8 --nproc-per-node=8 --rdzv-endpoint=trainer-0 train.py"
    r = helm_template(helm, "kube-rdma", "kube-rdma", "trainer.enabled=true", handwritten_args,
                      "trainer.validator.env[0].name=NCCL_IB_TIMEOUT",
                      "trainer.validator.env[0].value=14")
    handwritten = cm.Report()
    with contextlib.redirect_stdout(io.StringIO()):
        cm.validate(cm.load_text(r.stdout, "helm(hand-written trainer)", handwritten), handwritten, device_plugin)
    for word in ("--nnodes=8", "--rdzv-endpoint trainer-0", "NCCL environment"):
        report.check(any(word in f for f in handwritten.failures),
                     f"a hand-written trainer as commonly written fails the offline check naming {word!r}")


def pod_specs(objects):
    for _, o in objects:
        spec = o.get("spec", {})
        if o["kind"] == "CronJob":
            spec = spec.get("jobTemplate", {}).get("spec", {})
        if "template" in spec:
            yield o, spec["template"]["spec"]


def check_policy(report, helm):
    """What a cluster's policies need: no ServiceAccount token anywhere (with the DRA driver, only
    its pods', RBAC limited to its verbs), the CDI directory when a
    resource writes CDI specs, images pinned by digest, the critical-pods quota only where it helps."""
    ci = os.path.join(CHART, "ci")
    r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "manifests-values.yaml"),
                      os.path.join(ci, "acceptance-values.yaml"))
    got = cm.load_text(r.stdout, "helm(policy)", report)
    tokens = [f"{o['kind']}/{o['metadata']['name']}" for o, p in pod_specs(got)
              if p.get("automountServiceAccountToken") is not False]
    report.check(r.returncode == 0 and not tokens and any(True for _ in pod_specs(got)),
                 f"no pod mounts a ServiceAccount token (none needs the API): {tokens or r.stderr}")
    # With the DRA driver: only its pods hold a token: the DaemonSet the driver's ServiceAccount
    # (its ClusterRole exactly what the driver uses, its slice writes held to its own node by the
    # ValidatingAdmissionPolicy), the uninstall hook its own (list and delete slices, unrestricted).
    r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "dra-values.yaml"))
    got = cm.load_text(r.stdout, "helm(dra)", report)
    holders = sorted(f"{o['kind']}/{p.get('serviceAccountName')}" for o, p in pod_specs(got)
                     if p.get("automountServiceAccountToken") is not False)
    report.check(r.returncode == 0 and holders == ["DaemonSet/kube-rdma-dra", "Job/kube-rdma-dra-uninstall"],
                 f"with dra.enabled only the driver's pods hold a ServiceAccount token: {holders}")

    def rules_of(name):
        role = next((o for _, o in got if o["kind"] == "ClusterRole" and o["metadata"]["name"] == name), {})
        return sorted((tuple(x["apiGroups"]), tuple(x["resources"]), tuple(sorted(x["verbs"])))
                      for x in role.get("rules", []))
    rules = rules_of("kube-rdma-dra")
    report.check(rules == [(("",), ("nodes",), ("get",)),
                           (("resource.k8s.io",), ("resourceclaims",), ("get",)),
                           (("resource.k8s.io",), ("resourceslices",),
                            ("create", "delete", "list", "update", "watch"))],
                 f"the DRA driver's ClusterRole grants only what it uses: {rules}")
    rules = rules_of("kube-rdma-dra-uninstall")
    report.check(rules == [(("resource.k8s.io",), ("resourceslices",), ("delete", "list"))],
                 f"the uninstall hook's ClusterRole lists and deletes slices, nothing more: {rules}")
    vap = next((o for _, o in got if o["kind"] == "ValidatingAdmissionPolicy"), {})
    spec = vap.get("spec", {})
    cond = [c.get("expression", "") for c in spec.get("matchConditions", [])]
    checks = [v.get("expression", "") for v in spec.get("validations", [])]
    binding = next((o for _, o in got if o["kind"] == "ValidatingAdmissionPolicyBinding"), {})
    # The stand-in API server (tools/standins) enforces exactly these rules: keep both
    # in step.
    report.check(cond == ['request.userInfo.username == "system:serviceaccount:kube-rdma:kube-rdma-dra"']
                 and checks == ['variables.userNodeName != ""',
                                "variables.userNodeName == variables.objectNodeName"]
                 and spec.get("failurePolicy") == "Fail"
                 and binding.get("spec", {}).get("validationActions") == ["Deny"]
                 and binding.get("spec", {}).get("policyName") == vap.get("metadata", {}).get("name"),
                 f"a ValidatingAdmissionPolicy holds the driver's slice writes to its own node: {cond} {checks}")
    # dra.multus: released Multus (podResources, the default) files a pod's DRA devices under its
    # claim's name: every trainer Pod names its own ResourceClaim, and each of its networks is a
    # NAD whose resourceName is that claim. Multus' main branch (attributes): the template and
    # the StatefulSet, NADs matched against the devices' resourceName attribute.
    for mode in ("podResources", "attributes"):
        r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "dra-values.yaml"),
                          f"dra.multus={mode}")
        got = [o for _, o in cm.load_text(r.stdout, f"helm(dra.multus={mode})", report)]
        nads = {o["metadata"]["name"]: o for o in got if o["kind"] == "NetworkAttachmentDefinition"}
        claims = {o["metadata"]["name"] for o in got if o["kind"] == "ResourceClaim"}
        pods = [o for o in got if o["kind"] == "Pod"]
        sts = [o for o in got if o["kind"] == "StatefulSet"]
        ok = r.returncode == 0
        if mode == "podResources":
            ok = ok and len(pods) == 2 and not sts and len(claims) == 2
            for pod in pods:
                claim = pod["spec"]["resourceClaims"][0].get("resourceClaimName")
                nets = json.loads(pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
                ok = ok and claim in claims and len(nets) == 8 and all(
                    nads.get(n["name"], {}).get("metadata", {}).get("annotations", {})
                    .get("k8s.v1.cni.cncf.io/resourceName") == claim for n in nets)
        else:
            ok = ok and len(sts) == 1 and not pods and not claims
        report.check(ok, f"dra.multus={mode} renders what that Multus resolves: {len(pods)} pods, "
                         f"{len(sts)} StatefulSet, claims {sorted(claims)}")
    # acceptance.taintDevices: each acceptance pod writes its node's verdict where the node's DRA
    # driver reads it; without the DRA driver nothing would read it: refused.
    r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "dra-values.yaml"),
                      "acceptance.enabled=true", "acceptance.taintDevices=true")
    got = cm.load_text(r.stdout, "helm(acceptance taints)", report)
    job = next((p for o, p in pod_specs(got) if o["kind"] == "Job" and "acceptance" in o["metadata"]["name"]), {})
    c = (job.get("containers") or [{}])[0]
    report.check(r.returncode == 0 and "--taint-dir" in c.get("args", [])
                 and any(m["mountPath"] == "/run/kube-rdma/allocations" for m in c.get("volumeMounts", [])),
                 f"acceptance.taintDevices hands the node's DRA driver its verdict: {c.get('args')}")
    # cabling.lldp: each acceptance pod sends rank 0 its node's cabling record, and sees only that
    # file of the allocations directory, read-only.
    r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "cabling-values.yaml"),
                      "acceptance.enabled=true")
    got = cm.load_text(r.stdout, "helm(acceptance cabling)", report)
    job = next((p for o, p in pod_specs(got) if o["kind"] == "Job" and "acceptance" in o["metadata"]["name"]), {})
    c = (job.get("containers") or [{}])[0]
    args = c.get("args", [])
    mount = next((m for m in c.get("volumeMounts", []) if m.get("name") == "cabling"), {})
    vol = next((v for v in job.get("volumes", []) if v.get("name") == "cabling"), {})
    report.check(r.returncode == 0 and "--cabling" in args
                 and args[args.index("--cabling") + 1] + "/cabling.json" == mount.get("mountPath")
                 and mount.get("readOnly") is True
                 and vol.get("hostPath") == {"path": "/run/kube-rdma/allocations/cabling.json",
                                             "type": "FileOrCreate"},
                 f"cabling.lldp hands each acceptance pod its node's cabling record, read-only: {args}")
    # cabling.infiniband: the device plugin asks IB rails' neighbours with SMPs, through the umad
    # device nodes only a privileged container may open; without it, no privilege at all.
    for ib in (True, False):
        r = helm_template(helm, "kube-rdma", "kube-rdma", "fabric=ib", "cabling.lldp=true",
                          f"cabling.infiniband={str(ib).lower()}")
        got = cm.load_text(r.stdout, f"helm(cabling.infiniband={ib})", report)
        ds = next((o for _, o in got if o["kind"] == "DaemonSet"), {})
        spec = ds.get("spec", {}).get("template", {}).get("spec", {})
        dp = next((c for c in spec.get("containers", []) if "--lldp" in c.get("args", [])), {})
        sc = dp.get("securityContext", {})
        dev = any(m.get("mountPath") == "/dev/infiniband" for m in dp.get("volumeMounts", []))
        ok = r.returncode == 0 and bool(dp) and (
            (sc.get("privileged") is True and dev) if ib else
            (not sc.get("privileged") and not dev and sc.get("capabilities", {}).get("add") == ["NET_RAW"]))
        report.check(ok, f"cabling.infiniband={ib}: the device plugin is privileged with "
                         f"/dev/infiniband only when asked: {sc}")
    r = helm_template(helm, "kube-rdma", "kube-rdma", "acceptance.enabled=true", "acceptance.taintDevices=true")
    report.check(r.returncode != 0 and "dra.enabled" in r.stderr,
                 "acceptance.taintDevices without the DRA driver is refused, naming dra.enabled")
    digest = "sha256:" + "ab" * 32
    r = helm_template(helm, "kube-rdma", "kube-rdma", f"image.digest={digest}",
                      "devicePlugin.config.configList[0].resourceName=hca",
                      "devicePlugin.config.configList[0].cdi=true")
    got = cm.load_text(r.stdout, "helm(digest, cdi)", report)
    ds = next((o for _, o in got if o["kind"] == "DaemonSet"), None)
    pod = ds["spec"]["template"]["spec"] if ds else {}
    images = {c["image"] for c in pod.get("containers", []) + pod.get("initContainers", [])}
    report.check(images == {f"registry.example.com/kube-rdma/kube-rdma:0.1.0@{digest}"},
                 f"image.digest pins the node image as repository:tag@digest: {images}")
    mounts = [m["mountPath"] for m in pod.get("containers", [{}])[0].get("volumeMounts", [])]
    report.check("/var/run/cdi" in mounts and any(v.get("hostPath", {}).get("path") == "/var/run/cdi"
                                                 for v in pod.get("volumes", [])),
                 f"cdi: true mounts the host's CDI directory into the device plugin: {mounts}")
    r = helm_template(helm, "kube-rdma", "kube-rdma", "cni.binaryName=rdma")
    got = cm.load_text(r.stdout, "helm(binaryName)", report)
    types = {json.loads(o["spec"]["config"])["type"] for _, o in got if o["kind"] == "NetworkAttachmentDefinition"}
    ds = next((o for _, o in got if o["kind"] == "DaemonSet"), {})
    install = " ".join(ds.get("spec", {}).get("template", {}).get("spec", {}).get("initContainers", [{}])[0].get("args", []))
    report.check(types == {"rdma"} and "rdma --install /host/opt/cni/bin/rdma " in install,
                 f"cni.binaryName names the installed file and every NAD's type: {types}")
    r = helm_template(helm, "kube-rdma", "kube-rdma", "cni.binaryName=../rdma")
    report.check(r.returncode != 0 and "binaryName" in r.stderr, "a cni.binaryName that is not a file name is refused")
    r = helm_template(helm, "kube-rdma", "kube-rdma", "image.digest=sha256:1234")
    report.check(r.returncode != 0 and "digest" in r.stderr, "a digest that is not sha256:<64 hex> is refused")
    for ns, sets, want in (("kube-system", [], False), ("kube-rdma", ["devicePlugin.priorityClassName="], False),
                           ("kube-rdma", ["devicePlugin.criticalPodsQuota=0"], False), ("gpu-ops", [], True)):
        r = helm_template(helm, "kube-rdma", ns, *sets)
        quota = any(o["kind"] == "ResourceQuota" for _, o in cm.load_text(r.stdout, "helm(quota)", report))
        report.check(r.returncode == 0 and quota == want,
                     f"namespace {ns} {sets}: critical-pods ResourceQuota {'rendered' if want else 'not rendered'}")


def check_fabrics(report, helm, device_plugin):
    """fabric: ib is the InfiniBand rdma-net attached once per rail; fabric: roce one NAD per physical
    rail ("rail": i), with addresses unique across the cluster, that every pod attaches once each,
    in rail order; a rendering that would give two nodes the same addresses is refused."""
    ci = os.path.join(CHART, "ci")
    rails = "nodeConfig.rails={" + ",".join(f"ens{i}f0np0" for i in range(1, 9)) + "}"
    for ipam, extra in (("whereabouts", []), ("nv-ipam", []), ("node", [rails]),
                        ("host-local", ["roce.singleNode=true"])):
        r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "roce-values.yaml"), f"roce.ipam={ipam}", *extra)
        report.check(r.returncode == 0, f"fabric roce ({ipam}) renders" + (f": {r.stderr}" if r.returncode else ""))
        got = cm.load_text(r.stdout, f"helm(roce, {ipam})", report)
        cm.validate(got, report, device_plugin)
        nads = [o for _, o in got if o["kind"] == "NetworkAttachmentDefinition"]
        confs = [json.loads(n["spec"]["config"]) for n in nads]
        names = [n["metadata"]["name"] for n in nads]
        report.check(names == [f"rdma-rail{i}" for i in range(1, 9)], f"roce: one NAD per rail: {names}")
        report.check([c.get("rail") for c in confs] == list(range(1, 9)),
                     f"roce ({ipam}): NAD i is physical rail i (\"rail\": i): {[c.get('rail') for c in confs]}")
        if ipam == "node":
            report.check(all(c.get("addresses") == "node" and "ipam" not in c for c in confs),
                         "roce (node): each rail keeps the node's own rail addresses, no IPAM")
        elif ipam == "nv-ipam":
            pools = [c["ipam"].get("poolName") for c in confs]
            report.check(pools == [f"rail{i}" for i in range(1, 9)], f"roce (nv-ipam): a pool per rail: {pools}")
        else:
            subnets = [c["ipam"].get("range") or c["ipam"]["ranges"][0][0]["subnet"] for c in confs]
            report.check(all(c["ipam"]["type"] == ipam for c in confs) and len(set(subnets)) == 8,
                         f"roce: each rail its own {ipam} subnet: {subnets}")
        for _, o in got:
            if o["kind"] not in ("StatefulSet", "Job"):
                continue
            t = o["spec"]["template"]
            nets = json.loads(t["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"])
            limits = [c["resources"]["limits"].get("rdma/hca") for c in t["spec"].get("initContainers", []) + t["spec"]["containers"]
                      if "rdma/hca" in c.get("resources", {}).get("limits", {})]
            report.check([n["name"] for n in nets] == names and [n["interface"] for n in nets] == [f"net{i}" for i in range(1, 9)]
                         and limits and all(x == 8 for x in limits),
                         f"roce: {o['kind']} {o['metadata']['name']} attaches each rail once as net1..net8 and requests 8 rdma/hca")
    check_address_refusals(report, helm, ci, rails)
    check_shared_mode(report, helm, device_plugin)
    r = helm_template(helm, "kube-rdma", "kube-rdma", "trainer.enabled=true")
    got = cm.load_text(r.stdout, "helm(ib)", report)
    nads = [o for _, o in got if o["kind"] == "NetworkAttachmentDefinition"]
    conf = json.loads(nads[0]["spec"]["config"]) if nads else {}
    sts = next((o for _, o in got if o["kind"] == "StatefulSet"), None)
    nets = json.loads(sts["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]) if sts else []
    report.check(len(nads) == 1 and "ipam" not in conf and conf.get("cniVersion") == "0.3.1"
                 and [n["name"] for n in nets] == ["kube-rdma-ib"] * 8,
                 "fabric ib (the default): one InfiniBand network, kube-rdma-ib (beside a hand-written rdma-net), no IPAM, attached eight times")


def check_address_refusals(report, helm, ci, rails):
    """Renderings that would repeat addresses on two nodes, or cannot give any, fail helm template
    saying why; pods on a subset of the rails get ranges that follow the HCA's rail."""
    values = os.path.join(ci, "roce-values.yaml")
    for sets, says, what in (
            (["roce.ipam=host-local"], "the first pod on every node gets the same address",
             "host-local on more than one node"),
            (["roce.ipam=node"], "declare the rails in nodeConfig.rails", "routed rails without declared rails"),
            (["roce.ipam=node", "roce.mode=macvlan", "roce.resourceName=rdma/shared", rails], "leaves the netdev on the node",
             "routed rails in a child mode"),
            (["roce.ipam=dhcp"], "roce.ipam", "an unknown IPAM")):
        r = helm_template(helm, "kube-rdma", "kube-rdma", values, *sets)
        report.check(r.returncode != 0 and says in r.stderr, f"refused: {what} ({r.stderr.strip()[-160:]})")
    for ipam, key in (("whereabouts", "range"), ("nv-ipam", "poolName")):
        r = helm_template(helm, "kube-rdma", "kube-rdma", values, f"roce.ipam={ipam}", "roce.pinRails=false")
        confs = [json.loads(o["spec"]["config"]) for _, o in cm.load_text(r.stdout, "helm(pool)", report)
                 if o["kind"] == "NetworkAttachmentDefinition"]
        report.check(r.returncode == 0 and len(confs) == 8 and all("rail" not in c and "{rail}" in c["ipam"][key] for c in confs),
                     f"roce.pinRails=false ({ipam}): every network's {key} follows the rail of the HCA it gets ({{rail}})")


def check_shared_mode(report, helm, device_plugin):
    """roce.mode macvlan/ipvlan: each rail's NAD names its own HCA (mlx5_0 for rail 1), asks the
    pool, leaves the MTU to the parent; the per-HCA resource with a shared mode is refused."""
    ci = os.path.join(CHART, "ci")
    for mode in ("macvlan", "ipvlan"):
        r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(EXAMPLES_DIR, "roce-shared", "values.yaml"), f"roce.mode={mode}")
        report.check(r.returncode == 0, f"roce.mode {mode} renders" + (f": {r.stderr}" if r.returncode else ""))
        got = cm.load_text(r.stdout, f"helm(roce, {mode})", report)
        cm.validate(got, report, device_plugin)
        nads = [o for _, o in got if o["kind"] == "NetworkAttachmentDefinition"]
        confs = [json.loads(n["spec"]["config"]) for n in nads]
        report.check([c.get("mode") for c in confs] == [mode] * 8
                     and [c.get("rail") for c in confs] == list(range(1, 9)) and not any("hca" in c for c in confs)
                     and not any("mtu" in c for c in confs)
                     and all(n["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"] == "rdma/shared" for n in nads),
                     f"roce.mode {mode}: rail i's NAD a {mode} child of rail i's HCA, the parent's MTU, resource rdma/shared")
        sts = next((o for _, o in got if o["kind"] == "StatefulSet"), None)
        main = sts["spec"]["template"]["spec"]["containers"][0] if sts else {}
        report.check(sts is not None and main["args"][0].startswith('nccl_env="$(/kube-rdma/bin/rdma-validate --nccl-env)" ||')
                     and any(m["mountPath"] == "/kube-rdma/bin" for m in main.get("volumeMounts", [])),
                     f"roce.mode {mode}: the trainer sets NCCL's GID variables with rdma-validate --nccl-env before torchrun")
        if sts is not None:
            check_trainer_command(report, main["command"], main["args"][0], mode)
    r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "roce-values.yaml"), "roce.mode=macvlan")
    report.check(r.returncode != 0 and "rdma/shared" in r.stderr,
                 "roce.mode macvlan with the per-HCA rdma/hca resource is refused, naming the pool to use")


def check_trainer_command(report, command, script, label):
    """Runs the rendered trainer command with stand-ins for rdma-validate and torchrun: a failing
    --nccl-env must stop the pod (eval of nothing would succeed), and the variables it prints must
    reach torchrun as printed, whatever they hold."""
    with tempfile.TemporaryDirectory() as d:
        validate = os.path.join(d, "rdma-validate")
        marker = os.path.join(d, "torchrun-ran")
        with open(os.path.join(d, "torchrun"), "w") as f:
            f.write(f'#!/bin/sh\nprintf %s "$NCCL_IB_HCA" > {marker}\n')
        os.chmod(os.path.join(d, "torchrun"), 0o755)
        run_script = script.replace("/kube-rdma/bin/rdma-validate", validate)
        env = dict(os.environ, PATH=d + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
        results = {}
        hostile = "=mlx5_0:1,it's $(touch " + marker + ")"
        exports = os.path.join(d, "exports")
        with open(exports, "w") as f:  # as rdma-validate quotes it: ' written as '\''
            f.write("export NCCL_IB_HCA=" + "'" + hostile.replace("'", "'\\''") + "'\n")
        for case, body in (("fails", "echo 'no NCCL variable can pick this pod' >&2; exit 1"),
                           ("prints", "cat " + exports)):
            with open(validate, "w") as f:
                f.write("#!/bin/sh\n" + body + "\n")
            os.chmod(validate, 0o755)
            if os.path.exists(marker):
                os.remove(marker)
            r = subprocess.run(command + [run_script], env=env, capture_output=True, text=True)
            results[case] = (r.returncode, open(marker).read() if os.path.exists(marker) else None, r.stderr)
        report.check(results["fails"][0] != 0 and results["fails"][1] is None
                     and "not starting" in results["fails"][2],
                     f"roce.mode {label}: a failing rdma-validate --nccl-env stops the trainer before torchrun {results['fails']}")
        report.check(results["prints"][0] == 0 and results["prints"][1] == hostile,
                     f"roce.mode {label}: what --nccl-env prints reaches torchrun as printed {results['prints']}")


def check_self_contained(report, helm):
    """The chart is a directory of plain files: no symbolic links (a packaged or copied chart
    would lose what they point to), the alert rules the same bytes as deploy/monitoring's, and a
    `helm package`d chart and a copy outside the repo render exactly what the repo's does."""
    links = [os.path.relpath(os.path.join(d, f), CHART)
             for d, dirs, files in os.walk(CHART) for f in files + dirs
             if os.path.islink(os.path.join(d, f))]
    report.check(not links, f"the chart holds no symbolic links: {links or 'none'}")
    rule_chart = os.path.join(CHART, "files", "prometheusrule.yaml")
    rule_repo = os.path.join(os.path.dirname(CHART), "..", "monitoring", "20-prometheusrule.yaml")
    with open(rule_chart, "rb") as a, open(rule_repo, "rb") as b:
        report.check(a.read() == b.read(),
                     "the chart's files/prometheusrule.yaml is deploy/monitoring/20-prometheusrule.yaml, "
                     "byte for byte (edit both)")
    values = os.path.join(CHART, "ci", "manifests-values.yaml")
    want = run([helm, "template", "kube-rdma", CHART, "--namespace", "kube-rdma", "--values", IMAGE_VALUES,
                "--values", values]).stdout
    with tempfile.TemporaryDirectory() as tmp:
        pkg = run([helm, "package", CHART, "--destination", tmp])
        report.check(pkg.returncode == 0, "helm package" + (f": {pkg.stderr}" if pkg.returncode else ""))
        tgz = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.endswith(".tgz")]
        copy = os.path.join(tmp, "copy")
        shutil.copytree(CHART, copy, symlinks=True)
        for label, chart in [("the packaged chart", tgz[0] if tgz else ""), ("a copy of the chart", copy)]:
            got = run([helm, "template", "kube-rdma", chart, "--namespace", "kube-rdma", "--values", IMAGE_VALUES,
                       "--values", values])
            report.check(got.returncode == 0 and got.stdout == want,
                         f"{label} renders exactly what the repo's chart does"
                         + (f": {got.stderr}" if got.returncode else ""))


def check_acceptance_job_image(report, helm, ci):
    """acceptance.jobImage: rdma-validate copied from the node image into the job's image, as the
    trainer's validation does; refused with a Pushgateway (the push module is not copied)."""
    image = "nvcr.io/nvidia/pytorch:24.10-py3"
    r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "acceptance-values.yaml"),
                      f"acceptance.jobImage={image}")
    report.check(r.returncode == 0, "helm template with acceptance.jobImage" + (f": {r.stderr}" if r.returncode else ""))
    got = {(o["kind"], o["metadata"]["name"]): o for _, o in cm.load_text(r.stdout, "helm(jobImage)", report)}
    pod = got.get(("Job", "kuberdma-acceptance"), {}).get("spec", {}).get("template", {}).get("spec", {})
    inits, main = pod.get("initContainers", []), (pod.get("containers") or [{}])[0]
    report.check([c["name"] for c in inits] == ["rdma-validate-copy"]
                 and inits[0]["image"].startswith("registry.example.com/kube-rdma/kube-rdma:")
                 and main.get("image") == image and main.get("command") == ["/kube-rdma/bin/rdma-validate"]
                 and {"name": "kube-rdma-bin", "emptyDir": {"sizeLimit": "64Mi"}} in pod.get("volumes", []),
                 "acceptance.jobImage: the node image copies rdma-validate, the job's image runs it")
    r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "acceptance-values.yaml"),
                      f"acceptance.jobImage={image}", "acceptance.pushGateway=http://pg:9091")
    report.check(r.returncode != 0 and "push module" in r.stderr,
                 "acceptance.jobImage with a Pushgateway is refused, saying why")


def check_acceptance_sweep(report, helm, ci):
    """acceptance.transport verbs: the rail sweep needs no NCCL (no --require-nccl); the line-rate
    floor and --allow-no-gdr follow their values in the Job and the trainer's validator."""
    # --set reads 0.7 as a string: the numbers go in a values file.
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write("acceptance: {minLineRate: 0.7}\n")
        f.flush()
        r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "manifests-values.yaml"),
                          os.path.join(ci, "acceptance-values.yaml"), f.name, "acceptance.transport=verbs",
                          "acceptance.allowNoGdr=true", "acceptance.gpus=0", "trainer.validator.allowNoGdr=true")
    report.check(r.returncode == 0, "helm template with acceptance.transport=verbs" + (f": {r.stderr}" if r.returncode else ""))
    got = {(o["kind"], o["metadata"]["name"]): o for _, o in cm.load_text(r.stdout, "helm(sweep)", report)}
    job = got.get(("Job", "kuberdma-acceptance"), {}).get("spec", {}).get("template", {}).get("spec", {})
    args = (job.get("containers") or [{}])[0].get("args", [])
    report.check("--require-nccl" not in args and args[args.index("--transport") + 1] == "verbs"
                 and args[args.index("--min-line-rate") + 1] == "0.7" and "--allow-no-gdr" in args,
                 f"acceptance.transport=verbs: no --require-nccl, --min-line-rate 0.7, --allow-no-gdr ({args})")
    limits = ((job.get("containers") or [{}])[0].get("resources") or {}).get("limits", {})
    report.check("nvidia.com/gpu" not in limits and any(k.startswith("rdma/") for k in limits),
                 f"acceptance.gpus=0 with verbs: no GPU requested, the HCAs still are ({limits})")
    r0 = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "acceptance-values.yaml"), "acceptance.gpus=0")
    report.check(r0.returncode != 0 and "only the verbs rail sweep" in r0.stderr,
                 "acceptance.gpus=0 for an NCCL acceptance is refused, saying why")
    sts = got.get(("StatefulSet", "llm-trainer"), {}).get("spec", {}).get("template", {}).get("spec", {})
    inits = [c for c in sts.get("initContainers", []) if c["name"] == "rdma-validate"]
    report.check(bool(inits) and "--allow-no-gdr" in inits[0]["args"]
                 and inits[0]["args"][inits[0]["args"].index("--min-line-rate") + 1] == "0.5",
                 "trainer.validator.allowNoGdr passes --allow-no-gdr; its floor stays 0.5")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write("acceptance: {minLineRate: 1.5}\n")
        f.flush()
        r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "acceptance-values.yaml"), f.name)
    report.check(r.returncode != 0 and "minLineRate" in r.stderr,
                 "acceptance.minLineRate above 1 is refused by the schema, naming it")


def check_helm_acceptance(report, helm, want, device_plugin):
    ci = os.path.join(CHART, "ci")
    extra = [o for d in EXTRA for o in cm.load_dir(d, report)]
    r = helm_template(helm, "kube-rdma", "kube-rdma", os.path.join(ci, "manifests-values.yaml"),
                      os.path.join(ci, "acceptance-values.yaml"))
    report.check(r.returncode == 0, "helm template with ci/acceptance-values.yaml" + (f": {r.stderr}" if r.returncode else ""))
    got = cm.load_text(r.stdout, "helm(acceptance-values)", report)
    compare(report, "helm(acceptance)", got, want + extra)
    cm.validate(got, report, device_plugin)

    r = helm_template(helm, "rdma", "rdma-system", os.path.join(ci, "custom-values.yaml"))
    got = {(o["kind"], o["metadata"]["name"]): o for _, o in cm.load_text(r.stdout, "helm(custom-values)", report)}
    cron = got.get(("CronJob", "kuberdma-acceptance"))
    job = {(o["kind"]): o for _, o in extra}.get("Job")
    report.check(cron is not None and ("Job", "kuberdma-acceptance") not in got,
                 "a schedule renders a CronJob instead of the Job")
    if cron and job:
        spec = cron["spec"]["jobTemplate"]["spec"]
        args = spec["template"]["spec"]["containers"][0]["args"]
        report.check(cron["spec"]["schedule"] == "0 3 * * 0" and cron["spec"]["concurrencyPolicy"] == "Forbid",
                     "the CronJob runs on its schedule, never two at once")
        report.check(spec["completions"] == 16 and "--push-gateway" in args and "--baseline" not in args
                     and "volumes" not in spec["template"]["spec"],
                     "16 nodes, pushing to the Pushgateway, no baseline when its ConfigMap is \"\"")
        same = {k: v for k, v in spec.items() if k != "completions" and k != "parallelism"}
        base = {k: v for k, v in job["spec"].items() if k != "completions" and k != "parallelism"}
        report.check(set(same) == set(base), f"the CronJob's jobTemplate has the Job's fields ({sorted(same)})")
    check_acceptance_job_image(report, helm, ci)
    check_acceptance_sweep(report, helm, ci)
    rule = got.get(("PrometheusRule", "rdma-kube-rdma"))
    exprs = [x["expr"] for g in (rule or {}).get("spec", {}).get("groups", []) for x in g["rules"]]
    report.check("time() - kuberdma_acceptance_timestamp_seconds > 15 * 86400" in exprs,
                 "monitoring.prometheusRule.acceptanceStaleDays sets the stale alert's threshold")


def check_kustomize(report, kubectl, want, device_plugin):
    r = run([kubectl, "kustomize", MANIFESTS])
    report.check(r.returncode == 0, "kubectl kustomize deploy/manifests" + (f": {r.stderr}" if r.returncode else ""))
    base = cm.load_text(r.stdout, "kustomize(manifests)", report)
    report.check(all(o["kind"] not in ("StatefulSet", "Service") for _, o in base),
                 "kubectl apply -k deploy/manifests applies the node part, not the example trainer")
    compare(report, "kustomize", base, cm.load_dir(MANIFESTS, report))
    for d in EXTRA:
        r = run([kubectl, "kustomize", d])
        rel = os.path.basename(d)
        report.check(r.returncode == 0, f"kubectl kustomize deploy/{rel}" + (f": {r.stderr}" if r.returncode else ""))
        compare(report, f"kustomize({rel})", cm.load_text(r.stdout, f"kustomize({rel})", report), cm.load_dir(d, report))
    if cm.kustomize_version(kubectl) < cm.OVERLAY_MIN_KUSTOMIZE:
        print(f"SKIP the overlays: {kubectl} embeds kustomize older than v{cm.OVERLAY_MIN_KUSTOMIZE}")
        return
    # The overlays take deploy/manifests as a directory resource, which older kustomize refuses.
    r = run([kubectl, "kustomize", TRAINER])
    report.check(r.returncode == 0, "kubectl kustomize deploy/kustomize/example-trainer" + (f": {r.stderr}" if r.returncode else ""))
    compare(report, "kustomize(example-trainer)", cm.load_text(r.stdout, "kustomize(example-trainer)", report), want)
    r = run([kubectl, "kustomize", OVERLAY])
    report.check(r.returncode == 0, "kubectl kustomize deploy/kustomize/private-registry" + (f": {r.stderr}" if r.returncode else ""))
    got = cm.load_text(r.stdout, "kustomize(private-registry)", report)
    cm.validate(got, report, device_plugin)
    images = set()
    for _, o in got:
        spec = o.get("spec", {}).get("template", {}).get("spec", {})
        for c in spec.get("initContainers", []) + spec.get("containers", []):
            images.add(c["image"])
        if o["kind"] == "DaemonSet":
            report.check(spec.get("nodeSelector") == {"example.com/accelerator": "h200"}, "overlay replaces the GPU node label")
    ours = sorted(i for i in images if "kube-rdma" in i)
    report.check(ours and all(i.startswith("registry.example.org/gpu-infra/") for i in ours), f"overlay pulls our images from its registry: {ours}")


def main(argv):
    def opt(name, default):
        if name in argv:
            i = argv.index(name)
            v = argv[i + 1]
            del argv[i:i + 2]
            return v
        return default

    helm = opt("--helm", shutil.which("helm"))
    kubectl = opt("--kubectl", shutil.which("kubectl"))
    device_plugin = opt("--device-plugin", None)
    report = cm.Report()
    # The node part and the example trainer: what the chart renders with ci/manifests-values.yaml.
    want = cm.load_dir(MANIFESTS, report) + cm.load_dir(TRAINER, report)
    if not helm:
        report.fail("helm not found: `make helm` installs it (.ci/install-helm.sh)")
    else:
        check_helm(report, helm, want, device_plugin)
        check_self_contained(report, helm)
        check_fabrics(report, helm, device_plugin)
        check_policy(report, helm)
    if not kubectl:
        report.fail("kubectl not found: `make deps` installs it (Debian's kubernetes-client)")
    else:
        check_kustomize(report, kubectl, want, device_plugin)
    return report.summary("render")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
