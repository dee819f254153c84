#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Every binary answers --version with the release and the commit; rdma run by hand prints its
usage (--help, or no CNI_COMMAND on a terminal) instead of only an error document; rdma-doctor
reads a fixture tree through --sysfs-root.

Usage: version_test.py BUILD_DIR SOURCE_DIR NCCL_STANDIN
"""
import json
import os
import pty
import re
import subprocess
import sys

build, source, nccl_standin = sys.argv[1], sys.argv[2], sys.argv[3]
binaries = {
    "kube-rdma": f"{build}/cni/kube-rdma",
    "rdma-device-plugin": f"{build}/deviceplugin/rdma-device-plugin",
    "rdma-validate": f"{build}/tools/validator/rdma-validate",
    "rdma-doctor": f"{build}/tools/doctor/rdma-doctor",
    "kuberdma-demo": f"{build}/tools/demo/kuberdma-demo",
}
failed = 0


def check(ok, what):
    global failed
    print(("ok   " if ok else "FAIL ") + what)
    failed += 0 if ok else 1


commit = subprocess.run(["git", "-C", source, "rev-parse", "--short=12", "HEAD"],
                        capture_output=True, text=True).stdout.strip() or "unknown"
for name, path in binaries.items():
    r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20,
                       stdin=subprocess.DEVNULL)
    line = r.stdout.strip().split("\n")[0]
    check(r.returncode == 0 and re.fullmatch(r"kube-rdma \d+\.\d+\.\d+ \(commit ([0-9a-f]{12}|unknown)\)", line)
          is not None, f"{name} --version: {line!r} (exit {r.returncode})")

r = subprocess.run([binaries["kube-rdma"], "--version"], capture_output=True, text=True)
check("kube-rdma CNI plugin (github.com/kube-rdma)" in r.stdout,
      "kube-rdma --version prints the marker its installer and rdma-doctor recognise it by")

# A library that is not NCCL (NCCL's stand-in, tools/standins: ncclGetVersion and nothing else):
# exit 2 naming what is missing, never an abort.
fake = nccl_standin
check(os.path.exists(fake), f"NCCL's stand-in is built at {fake}")
r = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0"], capture_output=True, text=True,
                   env={**os.environ, "KUBERDMA_NCCL_LIBRARY": fake,
                        "KUBERDMA_SYSFS_ROOT": f"{source}/tests/fixtures/sysfs/roce8"}, timeout=60)
out = r.stdout + r.stderr
if "built without CUDA and NCCL" in out:
    print("skip rdma-validate's NCCL symbol check: this build has no NCCL runner")
else:
    check(r.returncode == 2 and "does not define" in out and "ncclAllReduce" in out and fake in out,
          f"rdma-validate with a library lacking NCCL's entry points exits 2 naming them (exit {r.returncode})")

env = {k: v for k, v in os.environ.items() if not k.startswith("CNI_")}
r = subprocess.run([binaries["kube-rdma"], "--help"], capture_output=True, text=True, env=env,
                   stdin=subprocess.DEVNULL)
check(r.returncode == 0 and "CNI_COMMAND" in r.stdout and "docs/cni.md" in r.stdout,
      "rdma --help prints a usage text")

# A person at a terminal with no CNI_COMMAND: usage on stderr, exit 2, nothing on stdout.
master, slave = pty.openpty()
r = subprocess.run([binaries["kube-rdma"]], capture_output=True, text=True, env=env, stdin=slave)
os.close(slave)
os.close(master)
check(r.returncode == 2 and "CNI_COMMAND" in r.stderr and r.stdout == "",
      f"rdma on a terminal without CNI_COMMAND prints its usage (exit {r.returncode})")

# A runtime's call without CNI_COMMAND (stdin not a terminal) still gets the error document.
r = subprocess.run([binaries["kube-rdma"]], capture_output=True, text=True, env=env,
                   stdin=subprocess.DEVNULL)
doc = json.loads(r.stdout) if r.stdout.strip() else {}
check(r.returncode == 1 and doc.get("code") == 4, "rdma from a runtime without CNI_COMMAND is error 4")

fixture = f"{source}/tests/fixtures/sysfs/roce8"
r = subprocess.run([binaries["rdma-doctor"], "--sysfs-root", fixture, "--json", "topo"],
                   capture_output=True, text=True, timeout=30, env={"PATH": os.environ["PATH"]})
try:
    topo = json.loads(r.stdout)
    hcas = len(topo["result"].get("hcas", topo["result"].get("matrix", [])))
except (ValueError, KeyError):
    topo, hcas = None, 0
check(topo is not None and hcas > 0, f"rdma-doctor --sysfs-root {fixture} topo reads the fixture")

# One version: the chart's version and appVersion, the newest CHANGELOG entry, and what every
# binary prints (a release is the tag v<version> of all of them).
chart = open(f"{source}/deploy/helm/kube-rdma/Chart.yaml").read()
chart_version = re.search(r'^version: (\S+)$', chart, re.M).group(1)
app_version = re.search(r'^appVersion: "(\S+)"$', chart, re.M).group(1)
changelog = re.search(r'^## (\S+) ', open(f"{source}/CHANGELOG.md").read(), re.M)
binary = subprocess.run([binaries["kube-rdma"], "--version"], capture_output=True, text=True).stdout.split()[1]
check(chart_version == app_version == (changelog.group(1) if changelog else None) == binary,
      f"one version: chart {chart_version}, appVersion {app_version}, CHANGELOG "
      f"{changelog.group(1) if changelog else None}, binaries {binary}")

# A run that proves no traffic fails: where NCCL cannot run (no GPU here), a run by hand exits 1
# naming what is missing; only --inventory-only passes on the inventory alone.
checks = len(binaries) + 5
venv = {"PATH": os.environ["PATH"], "KUBERDMA_SYSFS_ROOT": fixture}
inv = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0", "--inventory-only", "--json", "-"],
                     capture_output=True, text=True, timeout=60, env=venv)
checks += 1
check(inv.returncode == 0 and json.loads(inv.stdout).get("verdict") == "inventory-only",
      f"rdma-validate --inventory-only passes on the inventory (exit {inv.returncode})")
plain = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0", "--json", "-"],
                       capture_output=True, text=True, timeout=60, env=venv)
report = json.loads(plain.stdout) if plain.stdout.strip().startswith("{") else {}
if any("cannot run here" in p for p in report.get("problems", [])):  # no GPU or NCCL here
    checks += 2
    check(plain.returncode == 1 and report.get("verdict") == "fail",
          f"rdma-validate by hand where NCCL cannot run fails, not inventory-only (exit {plain.returncode})")
    req = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0", "--require-nccl",
                          "--json", "-"], capture_output=True, text=True, timeout=60, env=venv)
    check(req.returncode == 1, f"--require-nccl is still accepted, and the default (exit {req.returncode})")
else:
    print(f"skip the run without NCCL: NCCL can run here (verdict {report.get('verdict')!r})")

# Sizes are strict, in nccl-tests' binary units: 8GB is 8G, not 8 bytes; an unknown unit is exit 2.
for size, want in [("8GB", 8 << 30), ("8GiB", 8 << 30), ("8g", 8 << 30), ("1.5M", 3 << 19),
                   ("4096KB", 4 << 20), ("65536", 65536)]:
    r = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0", "--inventory-only",
                        "--size", size, "--json", "-"], capture_output=True, text=True, timeout=60, env=venv)
    got = json.loads(r.stdout).get("collective", {}).get("sizeBytes") if r.stdout.startswith("{") else None
    checks += 1
    check(r.returncode == 0 and got == want, f"--size {size} is {want} bytes (got {got}, exit {r.returncode})")
for size in ["8GBs", "8 G", "-1G", "G", "1e9", "8XB", ""]:
    r = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0", "--inventory-only", "--size", size],
                       capture_output=True, text=True, timeout=60, env=venv)
    checks += 1
    check(r.returncode == 2 and "is not a size" in r.stderr,
          f"--size {size!r}: exit 2 naming the units (exit {r.returncode}: {r.stderr.strip()[:80]})")
r = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0", "--inventory-only", "-e", "8GB", "-b", "1GB"],
                   capture_output=True, text=True, timeout=60, env=venv)
checks += 1
check(r.returncode == 0, f"-b 1GB -e 8GB is a sweep, not 1 to 8 bytes (exit {r.returncode}: {r.stderr.strip()[:80]})")
# nccl-tests' -g, -n and -w mean what they mean there; its options with no equivalent say so.
r = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0", "--inventory-only", "-g", "8", "-n", "5",
                    "-w", "1", "--json", "-"], capture_output=True, text=True, timeout=60, env=venv)
checks += 1
check(r.returncode == 0, f"rdma-validate -g 8 -n 5 -w 1 (all_reduce_perf's) parses (exit {r.returncode}: {r.stderr[:120]})")
for flag in ["-t", "-a", "-G"]:
    r = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0", "--inventory-only", flag, "1"],
                       capture_output=True, text=True, timeout=60, env=venv)
    checks += 1
    check(r.returncode == 2 and f"nccl-tests' {flag} has no equivalent" in r.stderr,
          f"nccl-tests' {flag}: exit 2 saying why (exit {r.returncode})")

# A library's transport is proven pod by pod, not by the fleet acceptance: exit 2 saying how,
# rather than NCCL's acceptance run in its place.
for transport, how in [("ucx", "--mode multi-pod"), ("gloo", "--mode multi-pod"), ("mpi", "mpirun")]:
    r = subprocess.run([binaries["rdma-validate"], "--mode", "acceptance", "--transport", transport,
                        "--expect", "mlx5_0", "--rank", "0", "--world-size", "1", "--comm-id", "127.0.0.1:29511"],
                       capture_output=True, text=True, timeout=60, env=venv)
    checks += 1
    check(r.returncode == 2 and "--mode acceptance runs NCCL" in r.stderr and how in r.stderr,
          f"--mode acceptance --transport {transport}: exit 2 pointing to {how} (exit {r.returncode}: {r.stderr.strip()[:100]})")

# rdma-doctor: --json and -o json after the view's name; a bad --pkey is a usage error (2).
for args in (["topo", "--json"], ["topo", "-o", "json"], ["--json", "topo"]):
    r = subprocess.run([binaries["rdma-doctor"], "--sysfs-root", fixture] + args,
                       capture_output=True, text=True, timeout=30, env={"PATH": os.environ["PATH"]})
    checks += 1
    check(r.returncode == 0 and r.stdout.startswith("{"), f"rdma-doctor {' '.join(args)}: JSON (exit {r.returncode})")
r = subprocess.run([binaries["rdma-doctor"], "--sysfs-root", fixture, "partitions", "--pkey", "zz"],
                   capture_output=True, text=True, timeout=30, env={"PATH": os.environ["PATH"]})
checks += 1
check(r.returncode == 2 and "not a 16-bit number" in r.stderr, f"rdma-doctor partitions --pkey zz: exit 2 (exit {r.returncode})")

# nccl-tests' options parse (the chart's acceptance arguments among them); bad ones are exit 2
# with the reason, before anything runs.
good = ["--collective", "all_gather", "-b", "128M", "-e", "1G", "-f", "2", "-d", "bfloat16",
        "-o", "max", "-c", "1", "--inventory-only"]
r = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0", "--json", "-"] + good,
                   capture_output=True, text=True, timeout=60, env=venv)
checks += 1
check(r.returncode == 0 and json.loads(r.stdout).get("verdict") == "inventory-only",
      f"rdma-validate takes nccl-tests' options (exit {r.returncode})")
for bad, why in [(["--collective", "allreduce"], "unknown collective"),
                 (["-b", "1M", "-e", "64K"], "a sweep needs"),
                 (["-b", "1M", "-e", "64M", "-f", "1"], "step factor"),
                 (["-d", "float8"], "unknown datatype"),
                 (["-o", "xor"], "unknown reduction")]:
    r = subprocess.run([binaries["rdma-validate"], "--expect", "mlx5_0", "--inventory-only"] + bad,
                       capture_output=True, text=True, timeout=60, env=venv)
    checks += 1
    check(r.returncode == 2 and why in r.stderr, f"rdma-validate {' '.join(bad)}: exit 2, {why!r}")

# The probe modules load whole (every symbol bound, as rdma-validate's dlopen asks) on this machine's
# libraries, as a job image's would provide them: a symbol from a library the image may lack (the
# MPI C++ bindings' libmpi_cxx once) is caught here, not in a pod.
import ctypes
import glob
for module in sorted(glob.glob(f"{build}/tools/validator/rdma-validate-*.so")):
    checks += 1
    try:
        ctypes.CDLL(module, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        check(True, f"{os.path.basename(module)} loads with every symbol bound")
    except OSError as e:
        check(False, f"{os.path.basename(module)} loads with every symbol bound: {e}")

print(f"{checks - failed} passed, {failed} failed")
sys.exit(1 if failed else 0)
