#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The rdma-validate the chart copies into a job's pod, run in a plain Debian 12 root (debootstrap
# minbase: glibc, libstdc++, none of our libraries, no NCCL), the way it runs in the trainer's
# image:
#   - it starts, and needs no glibc newer than 2.34 (Ubuntu 22.04 NGC images have 2.35);
#   - with no NCCL it says so (exit 1 with --require-nccl, naming where it looked), and passes an
#     --inventory-only run;
#   - it finds NCCL where images keep it: LD_LIBRARY_PATH, the ldconfig cache (NGC's debs), pip's
#     wheel (nvidia/nccl/lib), KUBERDMA_NCCL_LIBRARY; the report names the file and its version.
# Usage: validator_plain_root.sh ROOT.tar RDMA-VALIDATE [LIBNCCL]   (root: chroot)
set -euo pipefail
tar=$1 validator=$2
# awk reads to the end: an early exit would kill ldconfig with SIGPIPE, and pipefail the script.
nccl=${3:-$(ldconfig -p | awk '/libnccl\.so\.2 / && !found {print $NF; found = 1}')}
here=$(cd "$(dirname "$0")/../.." && pwd)
fails=0
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}

max=$(objdump -T "$validator" | grep -oE 'GLIBC_2\.[0-9]+' | sort -t. -k2 -n -u | tail -1)
check "rdma-validate needs at most GLIBC_2.34 (has $max)" test "${max#GLIBC_2.}" -le 34

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
tar -C "$root" -xf "$tar"
check "the plain root has no NCCL and none of our libraries" \
  sh -c "! ls $root/usr/lib/x86_64-linux-gnu/ | grep -qE '^lib(nccl|grpc|prometheus-cpp|nl-3)'"
mkdir -p "$root/kube-rdma/bin" "$root/fixture"
cp "$validator" "$root/kube-rdma/bin/rdma-validate"
cp -a "$here/tests/fixtures/sysfs/ib8/." "$root/fixture/"

# rdma-validate in the root, a clean environment plus "$@" (NAME=VALUE ... -- ARGS).
run() {
  local envs=(PATH=/usr/bin:/bin KUBERDMA_SYSFS_ROOT=/fixture)
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  chroot "$root" /usr/bin/env -i "${envs[@]}" /kube-rdma/bin/rdma-validate --expect mlx5_0 "$@"
}
json() { /usr/bin/python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["nccl"][sys.argv[2]])' "$root/r.json" "$1"; }

check "--version runs" sh -c "chroot $root /kube-rdma/bin/rdma-validate --version >/dev/null"
out=$(run -- --require-nccl 2>&1) && rc=0 || rc=$?
check "no NCCL, --require-nccl: exit 1 (got $rc)" test "$rc" = 1
check "no NCCL: the message says so and where it looked" \
  grep -q "NCCL is not in this image: libnccl.so.2 was not found in LD_LIBRARY_PATH" <<<"$out"
out=$(run -- --inventory-only 2>&1) && rc=0 || rc=$?
check "no NCCL, --inventory-only: exit 0 (got $rc)" test "$rc" = 0

if [ -z "$nccl" ] || [ ! -f "$nccl" ]; then
  echo "SKIP finding NCCL: this machine has no libnccl.so.2 to put in the root (CUDA/NCCL not installed)"
else
  v=$(strings "$nccl" | grep -oE '^NCCL version [0-9.]+' | awk 'NR == 1 {print $3}')
  found() { # found WHERE ENV...: the report names WHERE and a version
    run "${@:2}" -- --require-nccl --json /r.json >/dev/null 2>&1 || true
    local got
    got=$(json library)
    # /usr-merged: the loader cache may name /lib/... for /usr/lib/...
    check "NCCL from $1: the report names it ($got)" test "$got" = "$1" -o "/usr$got" = "$1"
    check "NCCL from $1: its version ($(json version))" test -n "$(json version)"
  }
  mkdir -p "$root/opt/nccl/lib"
  cp "$nccl" "$root/opt/nccl/lib/libnccl.so.2"
  found /opt/nccl/lib/libnccl.so.2 LD_LIBRARY_PATH=/opt/nccl/lib
  run LD_LIBRARY_PATH=/opt/nccl/lib -- --require-nccl >"$root/out" 2>&1 || true
  check "NCCL found, no GPU: fails on the GPU, not on NCCL" grep -q "no CUDA device is visible" "$root/out"
  found /opt/nccl/lib/libnccl.so.2 KUBERDMA_NCCL_LIBRARY=/opt/nccl/lib/libnccl.so.2
  mv "$root/opt/nccl/lib/libnccl.so.2" "$root/usr/lib/x86_64-linux-gnu/libnccl.so.2"
  chroot "$root" /sbin/ldconfig
  found /usr/lib/x86_64-linux-gnu/libnccl.so.2
  wheel=/usr/local/lib/python3.10/dist-packages/nvidia/nccl/lib
  mkdir -p "$root$wheel"
  mv "$root/usr/lib/x86_64-linux-gnu/libnccl.so.2" "$root$wheel/"
  chroot "$root" /sbin/ldconfig
  found "$wheel/libnccl.so.2"
  [ -n "$v" ] && check "the version is the library's ($v)" test "$(json version)" = "$v"
fi
out=$(run KUBERDMA_NCCL_LIBRARY=/nowhere/libnccl.so.2 -- --require-nccl 2>&1) || true
check "KUBERDMA_NCCL_LIBRARY that does not load: named in the error" grep -q "KUBERDMA_NCCL_LIBRARY=/nowhere" <<<"$out"
[ "$fails" = 0 ] || { echo "validator_plain_root: $fails check(s) failed"; exit 1; }
echo "validator_plain_root: all checks passed"
