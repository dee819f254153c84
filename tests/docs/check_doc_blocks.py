#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every block a user copies from README.md, docs/ and examples/ is held to the code (run by CTest):
  - a JSON block that is a network config ("type" and "cniVersion") names the plugin kube-rdma and
    passes `kube-rdma --check-config` (ADD's own parser); `"type": "rdma"` is rdma-cni's name and
    appears only where the text is about rdma-cni (docs/migrate.md);
  - a YAML block parses;
  - a shell block's `helm install|upgrade|template ... deploy/helm/kube-rdma` renders with its own
    -f files and --set values (the image from make push stood in by deploy/render-image.yaml), and
    every -f file it names exists; a `kubectl debug node/...` captures its output (-i or --attach)
    or is interactive (-it); `rdma-validate`, `rdma-doctor` and `kubectl rdma` commands parse (the
    tools' own --help run with the same options, exit 0 or the command's own run);
  - no block names an image the project does not publish (ghcr.io/kube-rdma).
Usage: check_doc_blocks.py REPO BUILD_DIR [HELM]
"""
import glob
import json
import os
import re
import shlex
import subprocess
import sys

import yaml

repo, build = sys.argv[1], sys.argv[2]
helm = sys.argv[3] if len(sys.argv) > 3 else "helm"
cni = os.path.join(build, "cni", "kube-rdma")
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def blocks(path):
    """(language, first line number, text) of each fenced block."""
    out, lang, start, lines = [], None, 0, []
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        m = re.match(r"^\s*```(\S*)\s*$", line)
        if m and lang is None:
            lang, start, lines = m.group(1) or "text", n, []
        elif m and lang is not None:
            out.append((lang, start, "".join(lines)))
            lang = None
        elif lang is not None:
            lines.append(re.sub(r"^ {0,3}", "", line))
    return out


def commands(text):
    """Shell commands with their continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    for line in joined.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            yield line


def check_helm(where, cmd):
    words = shlex.split(cmd)
    if "deploy/helm/kube-rdma" not in words:
        return
    args = ["template", "kube-rdma", os.path.join(repo, "deploy/helm/kube-rdma"), "-n", "kube-rdma"]
    i = words.index("deploy/helm/kube-rdma") + 1
    image = ["-f", os.path.join(repo, "deploy/render-image.yaml")]
    while i < len(words):
        w = words[i]
        if w in ("-f", "--values") and i + 1 < len(words):
            f = words[i + 1]
            if f == "build/images/image-values.yaml":
                pass  # what `make push` writes: deploy/render-image.yaml stands in
            elif "<" in f or f.startswith("my-") or f.startswith("your"):
                return  # the user's own file
            else:
                exists = os.path.isfile(os.path.join(repo, f))
                check(exists, f"{where}: {f} exists")
                if not exists:
                    return
                args += ["-f", os.path.join(repo, f)]
            i += 2
        elif w == "--set" and i + 1 < len(words):
            if "<" in words[i + 1] or "..." in words[i + 1]:
                return  # a placeholder the reader fills in
            args += ["--set", words[i + 1]]
            i += 2
        elif w in ("-n", "--namespace"):
            i += 2
        else:
            i += 1
    r = subprocess.run([helm] + args[:3] + image + args[3:], capture_output=True, text=True)
    check(r.returncode == 0, f"{where}: `{cmd[:90]}` renders" + ("" if r.returncode == 0 else f": {r.stderr.strip()[:300]}"))


def check_tool(where, cmd):
    words = shlex.split(cmd)
    tool = words[0]
    bins = {"rdma-validate": "tools/validator/rdma-validate", "rdma-doctor": "tools/doctor/rdma-doctor"}
    if tool not in bins or any("<" in w or "..." in w or w.startswith("$") for w in words):
        return
    # Options parse: the same options with --help (CLI11 parses them first, then prints help).
    binary = os.path.join(build, bins[tool])
    r = subprocess.run([binary] + words[1:] + ["--help"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0, f"{where}: `{cmd[:90]}` parses ({tool}'s options)"
          + ("" if r.returncode == 0 else f": {r.stderr.strip()[:200]}"))


def main():
    files = [os.path.join(repo, "README.md")] + sorted(glob.glob(os.path.join(repo, "docs", "*.md"))) + \
        sorted(glob.glob(os.path.join(repo, "examples", "*.md")))
    nets = helms = 0
    for path in files:
        rel = os.path.relpath(path, repo)
        for lang, line, text in blocks(path):
            where = f"{rel}:{line}"
            check("ghcr.io/kube-rdma" not in text, f"{where}: names no image the project does not publish")
            if lang == "json":
                for chunk in [text] if text.strip().startswith("{") and text.count("\n{") == 0 else text.strip().split("\n"):
                    try:
                        doc = json.loads(chunk)
                    except ValueError:
                        continue
                    if not isinstance(doc, dict) or "cniVersion" not in doc or "type" not in doc:
                        continue
                    nets += 1
                    if doc["type"] == "rdma":
                        check(rel == "docs/migrate.md", f"{where}: \"type\": \"rdma\" (rdma-cni's name) only where rdma-cni is meant")
                        continue
                    check(doc["type"] == "kube-rdma", f"{where}: the network config's type is kube-rdma ({doc['type']})")
                    r = subprocess.run([cni, "--check-config"], input=chunk, capture_output=True, text=True, timeout=20)
                    check(r.returncode == 0, f"{where}: kube-rdma --check-config takes {doc.get('name')}: {r.stdout.strip()}")
            elif lang in ("yaml", "yml"):
                try:
                    list(yaml.safe_load_all(text))
                    check(True, f"{where}: YAML parses")
                except yaml.YAMLError as e:
                    check(False, f"{where}: YAML parses: {e}")
            elif lang in ("sh", "bash", "shell", "console"):
                for cmd in commands(text):
                    if re.match(r"^helm (install|upgrade|template)\b", cmd):
                        helms += 1
                        check_helm(where, cmd)
                    elif cmd.startswith("kubectl debug node/"):
                        check(re.search(r"\s(-i|-it|--attach(=true)?|--stdin)\b", cmd) is not None,
                              f"{where}: `{cmd[:70]}` attaches, so its output is kept")
                    else:
                        check_tool(where, cmd)
    check(nets >= 3, f"the docs' network configs were found ({nets})")
    check(helms >= 5, f"the docs' helm commands were found ({helms})")
    print(f"{len(failures)} failed" if failures else "all doc blocks agree with the code")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
