#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the Dockerfiles against the build and the manifests without a container engine (none runs
on the CI machines; run by CTest):
  - every file a runtime stage copies from the build stage is a CMake target that stage builds,
    at the path the build tree really puts it (the build tree under test has the presets' layout);
  - every shared library a copied binary needs is in the runtime stage: for the Debian 12 image,
    the library's Debian package is one the stage installs, one of their dependencies, or in the
    base image; for the CUDA image, only NCCL and glibc may be needed (libstdc++ and CUDA are
    linked statically);
  - every binary the manifests (deploy/manifests, deploy/acceptance) run (/usr/local/bin/...) is
    in the image they name.
Usage: check_images.py <build-dir>
"""
import os
import re
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
DEPLOY = os.path.dirname(HERE)
# What debian:12-slim has before any apt-get install (apt itself needs libstdc++6).
DEBIAN_BASE = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g"}
CUDA_ALLOWED = {"libnccl.so.2", "libc.so.6", "libm.so.6", "ld-linux-x86-64.so.2"}
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
            cur = {"base": m.group(1), "packages": set(), "targets": set(), "copies": []}
            stages[m.group(2) or f"stage{len(stages)}"] = cur
        elif line.startswith("RUN") and cur is not None:
            if m := re.search(r"apt-get install ([^&;]*)", line):
                cur["packages"] |= {w for w in m.group(1).split() if not w.startswith("-")}
            if m := re.search(r"--target ([^&;]*)", line):
                cur["targets"] |= set(m.group(1).split())
        elif m := re.match(r"COPY\s+--from=(\S+)\s+(\S+)\s+(\S+)", line):
            cur["copies"].append((m.group(1), m.group(2), m.group(3)))
    return stages


def needed(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)


def debian_package_of(lib, binary):
    """The Debian package that provides the library the binary resolves here."""
    out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
    # "libfoo.so.1 => /lib/.../libfoo.so.1 (0x...)", or the loader's "/lib64/ld-linux-x86-64.so.2 (0x...)"
    m = re.search(rf"^\s*{re.escape(lib)} => (\S+)", out, re.M) or \
        re.search(rf"^\s*(/\S*/{re.escape(lib)})\s", out, re.M)
    path = m.group(1) if m else None
    if path is None:
        return None
    for p in (path, os.path.realpath(path)):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0]
    return None


def depends_closure(packages):
    seen, todo = set(), list(packages)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        r = subprocess.run(["dpkg-query", "-W", "-f=${Depends},${Pre-Depends}", p], capture_output=True, text=True)
        for dep in r.stdout.split(","):
            name = dep.strip().split("|")[0].split()[0].split(":")[0] if dep.strip() else ""
            if name:
                todo.append(name)
    return seen


def main(build_dir):
    images = {}  # image repository -> set of paths it holds
    for name, image in (("Dockerfile", "ghcr.io/kube-rdma/kube-rdma"),
                        ("Dockerfile.validator", "ghcr.io/kube-rdma/rdma-validate")):
        stages = parse(os.path.join(HERE, name))
        runtime = list(stages.values())[-1]
        debian = runtime["base"].startswith("debian:12")
        # What the runtime stage holds: its packages, their dependencies, and the base image's.
        have = depends_closure(runtime["packages"]) | DEBIAN_BASE if debian else set()
        images[image] = set()
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
            images[image].add(dst)
            if not os.path.isfile(binary):
                continue
            libs = needed(binary)
            if debian:
                for lib in libs:
                    pkg = debian_package_of(lib, binary)
                    check(pkg in have, f"{name}: {target} needs {lib} from {pkg}, which the runtime stage has")
            elif rel.endswith(".so"):
                for lib in libs:
                    known = lib in CUDA_MODULE_LIBS
                    pkg = CUDA_MODULE_LIBS.get(lib)
                    check(known and (pkg is None or pkg in runtime["packages"]),
                          f"{name}: module {target} needs {lib}" + (f" from {pkg}, which the runtime stage installs" if pkg else ", from the base image"))
            else:
                extra = sorted(set(libs) - CUDA_ALLOWED)
                check(not extra, f"{name}: {target} needs only NCCL and glibc at run time ({libs})")

    # The binaries the manifests run, in the images they name.
    for fname in [os.path.join(d, f) for d in ("manifests", "acceptance")
                  for f in sorted(os.listdir(os.path.join(DEPLOY, d)))]:
        if not fname.endswith(".yaml") or fname.endswith("kustomization.yaml"):
            continue
        for doc in yaml.safe_load_all(open(os.path.join(DEPLOY, fname))):
            spec = (doc or {}).get("spec") or {}
            spec = spec.get("jobTemplate", {}).get("spec", spec)  # a CronJob's pods
            spec = spec.get("template", {}).get("spec", {})
            for c in spec.get("initContainers", []) + spec.get("containers", []):
                repo = c["image"].rsplit(":", 1)[0]
                if repo not in images:
                    continue
                words = " ".join(c.get("command", []) + c.get("args", []))
                for path in sorted(set(re.findall(r"/usr/local/bin/[\w.-]+", words))):
                    check(path in images[repo], f"{fname}: {c['name']} runs {path}, which {repo} holds")
    print(f"{len(failures)} failed" if failures else "all image checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
