#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Validates every object kube-rdma ships against the Kubernetes OpenAPI schemas of the versions
it supports (run by CTest): the chart rendered with its defaults and every ci/*-values.yaml (both
fabrics), deploy/manifests with deploy/acceptance, deploy/monitoring, and the kustomize overlay.
The validators are npm's kubernetes-models (deploy/schema/package.json pins one per Kubernetes
version, package-lock.json their integrity), installed with `npm ci` into BUILD/schema.
Usage: check_schemas.py RENDERED_DIR BUILD_DIR [--kubectl BIN] [--dra DEVICE_PLUGIN FIXTURES_DIR]
  --dra: also the ResourceSlices the DRA driver publishes (`rdma-device-plugin --dra-slices`
  with deploy/manifests' config) for the RoCE and InfiniBand 8-GPU fixtures.
"""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import sys

import yaml

import check_manifests as cm

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "schema")


def install(build):
    """npm ci into BUILD/schema, again only when package-lock.json changed."""
    dest = os.path.join(build, "schema")
    os.makedirs(dest, exist_ok=True)
    lock = open(os.path.join(SCHEMA, "package-lock.json"), "rb").read()
    stamp = os.path.join(dest, ".installed")
    want = hashlib.sha256(lock).hexdigest()
    for name in ("package.json", "package-lock.json", "validate.mjs"):
        shutil.copyfile(os.path.join(SCHEMA, name), os.path.join(dest, name))
    if not (os.path.exists(stamp) and open(stamp).read() == want):
        if not shutil.which("npm"):
            sys.exit("check_schemas: npm is not installed (make helm installs it)")
        subprocess.run(["npm", "ci", "--silent", "--no-audit", "--no-fund"], cwd=dest, check=True)
        open(stamp, "w").write(want)
    return dest


def documents(label, text):
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and doc.get("kind") == "List":
            yield from ({"source": label, "object": o} for o in doc.get("items", []))
        elif isinstance(doc, dict):
            yield {"source": label, "object": doc}


def collect(rendered, kubectl):
    items = []
    for name in sorted(os.listdir(rendered)):
        if name.endswith(".yaml"):
            items += documents(name, open(os.path.join(rendered, name)).read())
    monitoring = os.path.join(HERE, "monitoring")
    for name in sorted(os.listdir(monitoring)):
        if name.endswith(".yaml") and name != "kustomization.yaml":
            items += documents("monitoring/" + name, open(os.path.join(monitoring, name)).read())
    if not kubectl:
        print("SKIP kustomize's renderings: no kubectl here (`make deps` installs Debian's)")
        return items
    rels = ["manifests"]
    if cm.kustomize_version(kubectl) >= cm.OVERLAY_MIN_KUSTOMIZE:
        rels.append("kustomize/private-registry")
    else:
        print(f"SKIP the overlay: {kubectl} embeds kustomize older than v{cm.OVERLAY_MIN_KUSTOMIZE}")
    for rel in rels:
        out = subprocess.run([kubectl, "kustomize", os.path.join(HERE, rel)], check=True,
                             capture_output=True, text=True).stdout
        items += documents("kustomize " + rel, out)
    return items


# A wrongly typed field the validators must name: proves they run, not only that they load.
BAD = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "bad"},
       "spec": {"selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [
                    {"name": "c", "image": "i", "ports": [{"containerPort": "metrics"}]}]}}}}


def dra_slices(plugin, fixtures):
    """`rdma-device-plugin --dra-slices` on the 8-GPU fixtures, with the shipped config."""
    cm = yaml.safe_load(open(os.path.join(HERE, "manifests", "10-configmap.yaml")))
    items = []
    with tempfile.NamedTemporaryFile("w", suffix=".json") as cfg:
        cfg.write(cm["data"]["device-plugin.json"])
        cfg.flush()
        for fx in ("roce8", "ib8"):
            out = subprocess.run([plugin, "--config", cfg.name, "--sysfs-root", os.path.join(fixtures, fx),
                                  "--node-name", "gpu-node-1", "--node-config", "/nonexistent",
                                  "--dra-slices"], check=True, capture_output=True, text=True).stdout
            slices = list(documents("dra " + fx, out))
            if not slices or any(len(s["object"]["spec"]["devices"]) != 8 for s in slices):
                sys.exit(f"check_schemas: --dra-slices on {fx} did not publish its 8 HCAs:\n{out}")
            items += slices
        # A port down: the slice as the driver writes it then, with the device's taint.
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "roce8")
            shutil.copytree(os.path.join(fixtures, "roce8"), root, symlinks=True)
            for d, _, files in os.walk(root):
                if d.endswith("infiniband/mlx5_3/ports/1") and "state" in files:
                    open(os.path.join(d, "state"), "w").write("1: DOWN\n")
            out = subprocess.run([plugin, "--config", cfg.name, "--sysfs-root", root,
                                  "--node-name", "gpu-node-1", "--node-config", "/nonexistent",
                                  "--dra-slices", "--dra-taint-effect", "NoExecute"],
                                 check=True, capture_output=True, text=True).stdout
            slices = list(documents("dra roce8 port down", out))
            taints = [t for s in slices for d in s["object"]["spec"]["devices"] for t in d.get("taints", [])]
            if [t.get("key") for t in taints] != ["rdma.kube-rdma.io/link-down"]:
                sys.exit(f"check_schemas: --dra-slices with mlx5_3 down did not taint it link-down:\n{out}")
            items += slices
    return items


def validate(dest, items):
    return subprocess.run(["node", os.path.join(dest, "validate.mjs")], input=json.dumps(items),
                          text=True, capture_output=True)


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    rendered, build = argv[0], argv[1]
    opts = dict(zip(argv[2::2], argv[3::2]))
    kubectl = opts.get("--kubectl") or shutil.which("kubectl")
    dest = install(build)
    items = collect(rendered, kubectl)
    if "--dra" in opts:
        items += dra_slices(opts["--dra"], argv[argv.index("--dra") + 2])
    if not items:
        sys.exit(f"check_schemas: nothing rendered in {rendered}")
    bad = validate(dest, [{"source": "self-test", "object": BAD}])
    if bad.returncode != 1 or "containerPort must be integer" not in bad.stdout:
        sys.exit("check_schemas: the validators passed a DaemonSet with containerPort \"metrics\":\n"
                 + bad.stdout + bad.stderr)
    r = validate(dest, items)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
