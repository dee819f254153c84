#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the Dockerfiles against the build and the manifests without a container engine (run by
CTest; `make images` builds and smoke-tests the node image itself):
  - the node image (Dockerfile): every binary its build stage hands deploy/images/mkroot.sh is a
    CMake target that stage builds, at the path the build tree really puts it (the build tree
    under test has the presets' layout); mkroot.sh puts each in /usr/local/bin with the Debian
    packages of the libraries it loads;
  - the validator image (Dockerfile.validator): what it copies is built there; rdma-validate needs
    only glibc and libgcc_s (NCCL is opened at run time, libstdc++ and CUDA are linked in); its
    push module's libraries are installed;
  - every binary the manifests (deploy/manifests, deploy/acceptance) run (/usr/local/bin/...) is
    in the image they name; one run from another image (/kube-rdma/bin/...) was copied there by an
    earlier init container of our image, through a volume both mount.
Usage: check_images.py <build-dir>
"""
import os
import re
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
DEPLOY = os.path.dirname(HERE)
CUDA_ALLOWED = {"libgcc_s.so.1", "libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2"}
# A module the CUDA image loads on demand: its libraries -> the Ubuntu package holding each
# (None: in the ubuntu:24.04 base).
CUDA_MODULE_LIBS = {"libprometheus-cpp-push.so.1.0": "libprometheus-cpp-push1.0",
                    "libprometheus-cpp-core.so.1.0": "libprometheus-cpp-core1.0",
                    "libstdc++.so.6": None, "libgcc_s.so.1": None, "libc.so.6": None, "libm.so.6": None}
failures = []


def check(cond, msg):
    print("ok  " if cond else "FAIL", msg)
    if not cond:
        failures.append(msg)


def parse(dockerfile):
    """Stages: name -> {base, packages, targets, copies[(src, dst)]}."""
    text = open(dockerfile).read().replace("\\\n", " ")
    stages, cur = {}, None
    for line in text.splitlines():
        line = line.strip()
        if m := re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.I):
            cur = {"base": m.group(1), "packages": set(), "targets": set(), "copies": [], "rootfs": []}
            stages[m.group(2) or f"stage{len(stages)}"] = cur
        elif line.startswith("RUN") and cur is not None:
            if m := re.search(r"apt-get install ([^&;]*)", line):
                cur["packages"] |= {w for w in m.group(1).split() if not w.startswith("-")}
            if m := re.search(r"--target ([^&;]*)", line):
                cur["targets"] |= set(m.group(1).split())
            if m := re.search(r"mkroot\.sh\s+\S+\s+\S+\s+([^&;]*)", line):
                cur["rootfs"] = m.group(1).split()
        elif m := re.match(r"COPY\s+--from=(\S+)\s+(\S+)\s+(\S+)", line):
            cur["copies"].append((m.group(1), m.group(2), m.group(3)))
    return stages


def needed(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)


def node_image(build_dir, images):
    stages = parse(os.path.join(HERE, "Dockerfile"))
    build = stages.get("build")
    check(build is not None and build["rootfs"], "Dockerfile: the build stage assembles the root with mkroot.sh")
    final = list(stages.values())[-1]
    check(final["base"] == "scratch" and ("build", "/rootfs/", "/") in final["copies"],
          "Dockerfile: the image is the assembled root, FROM scratch")
    images["registry.example.com/kube-rdma/kube-rdma"] = set()
    for path in (build or {}).get("rootfs", []):
        rel = path.removeprefix("build/release/")
        target = os.path.basename(rel).removesuffix(".so")
        check(target in build["targets"], f"Dockerfile: {target} is a target the build stage builds ({sorted(build['targets'])})")
        check(os.path.isfile(os.path.join(build_dir, rel)), f"Dockerfile: the build puts {target} at {rel}")
        images["registry.example.com/kube-rdma/kube-rdma"].add("/usr/local/bin/" + os.path.basename(rel))
    # What a binary loads rather than links (ldd cannot see it, so mkroot.sh is told).
    for fname in ("Dockerfile", "build.sh"):
        text = open(os.path.join(HERE, fname)).read()
        extra = re.search(r'EXTRA_PACKAGES="?([^"\n]*?)"? (?:deploy/images/)?(?:bash )?\S*mkroot\.sh', text)
        have = extra.group(1).split() if extra else []
        for pkg, why in (("ibverbs-providers", "libibverbs' providers"),
                         ("libcurl4", "rdma-device-plugin loads libcurl.so.4 for the API server")):
            check(pkg in have, f"{fname}: mkroot.sh is given {pkg} ({why})")


def validator_image(build_dir, images):
    name = "Dockerfile.validator"
    stages = parse(os.path.join(HERE, name))
    runtime = list(stages.values())[-1]
    images["registry.example.com/kube-rdma/rdma-validate"] = set()
    for frm, src, dst in runtime["copies"]:
        build = stages.get(frm)
        check(build is not None, f"{name}: COPY --from={frm} names a stage")
        if build is None:
            continue
        rel = src.removeprefix("/src/build/release/")
        target = os.path.basename(rel).removesuffix(".so")
        check(target in build["targets"], f"{name}: {target} is a target the {frm} stage builds ({sorted(build['targets'])})")
        binary = os.path.join(build_dir, rel)
        check(os.path.isfile(binary), f"{name}: the build puts {target} at {rel}")
        images["registry.example.com/kube-rdma/rdma-validate"].add(dst)
        if not os.path.isfile(binary):
            continue
        libs = needed(binary)
        if rel.endswith(".so"):
            for lib in libs:
                known = lib in CUDA_MODULE_LIBS
                pkg = CUDA_MODULE_LIBS.get(lib)
                check(known and (pkg is None or pkg in runtime["packages"]),
                      f"{name}: module {target} needs {lib}" + (f" from {pkg}, which the runtime stage installs" if pkg else ", from the base image"))
        else:
            extra = sorted(set(libs) - CUDA_ALLOWED)
            check(not extra, f"{name}: {target} needs only glibc and libgcc_s at run time ({libs})")


def copied_binaries(fname, spec, images, c, words):
    """A container of another image running /kube-rdma/bin/X: an earlier init container of ours
    copied X there through a volume both mount."""
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    for path in sorted(set(re.findall(r"/kube-rdma/bin/[\w.-]+", words))):
        vol = mounts.get(os.path.dirname(path))
        copier = None
        for i in spec.get("initContainers", []):
            if i is c:
                break
            imounts = {m["mountPath"]: m["name"] for m in i.get("volumeMounts", [])}
            iwords = " ".join(i.get("command", []) + i.get("args", []))
            src = "/usr/local/bin/" + os.path.basename(path)
            # cp SRC PATH, or cp SRC ... DIR/ (the binary with its probe modules)
            copies = f"cp {src} {path}" in iwords or re.search(
                rf"\bcp\b[^;&|]*\s{re.escape(src)}\s[^;&|]*\s{re.escape(os.path.dirname(path))}/?(\s|$)", iwords)
            if imounts.get(os.path.dirname(path)) == vol and copies \
                    and src in images.get(i["image"].rsplit(":", 1)[0], set()):
                copier = i["name"]
        check(vol is not None and copier is not None,
              f"{fname}: {c['name']} runs {path}, copied from our image by an earlier init container ({copier}) through volume {vol}")


def main(build_dir):
    images = {}  # image repository -> set of paths it holds
    node_image(build_dir, images)
    validator_image(build_dir, images)

    # The binaries the manifests run, in the images they name.
    for fname in [os.path.relpath(os.path.join(top, f), DEPLOY) for d in ("manifests", "acceptance", "kustomize/example-trainer")
                  for top, _, files in sorted(os.walk(os.path.join(DEPLOY, d))) for f in sorted(files)]:
        if not fname.endswith(".yaml") or fname.endswith("kustomization.yaml"):
            continue
        for doc in yaml.safe_load_all(open(os.path.join(DEPLOY, fname))):
            spec = (doc or {}).get("spec") or {}
            spec = spec.get("jobTemplate", {}).get("spec", spec)  # a CronJob's pods
            spec = spec.get("template", {}).get("spec", {})
            for c in spec.get("initContainers", []) + spec.get("containers", []):
                repo = c["image"].rsplit(":", 1)[0]
                words = " ".join(c.get("command", []) + c.get("args", []))
                if repo not in images:
                    copied_binaries(fname, spec, images, c, words)
                    continue
                # A glob (the probe modules) is checked by the smoke test in the image.
                for path in sorted({p for p in re.findall(r"/usr/local/bin/[\w.*-]+", words) if "*" not in p}):
                    check(path in images[repo], f"{fname}: {c['name']} runs {path}, which {repo} holds")
    print(f"{len(failures)} failed" if failures else "all image checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
