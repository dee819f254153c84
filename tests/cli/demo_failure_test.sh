#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The node demo when its device plugin starts but never registers (with --dra: its DRA driver):
# the demo says what did not register and exits 1, it goes no further than the step that failed
# (nothing is allocated from a plugin that is not there), and it stops the plugin it started.
#
# Usage: demo_failure_test.sh DEMO DRA_MANIFESTS   (root, as the demo; exit 77 otherwise)
set -euo pipefail
[ "$(id -u)" -eq 0 ] || exit 77
demo=$1
dra_manifests=$2
tmp=$(mktemp -d)
cleanup() {
  for f in "$tmp"/pid.*; do [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# A device plugin that runs, answers nothing and never exits by itself.
cat >"$tmp/plugin" <<PLUGIN
#!/bin/sh
echo \$\$ >"$tmp/pid.\$\$"
exec sleep 600
PLUGIN
chmod +x "$tmp/plugin"
fails=0
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
run() { # run NAME ARGS...: the demo's exit status and output in $tmp/NAME.{rc,out}
  local name=$1
  shift
  set +e
  timeout 120 "$demo" --nccl off --device-plugin "$tmp/plugin" "$@" >"$tmp/$name.out" 2>&1
  echo $? >"$tmp/$name.rc"
  set -e
}
for name in plain dra; do
  case $name in
    plain) run plain ;;
    dra) run dra --dra --manifests "$dra_manifests" ;;
  esac
  rc=$(cat "$tmp/$name.rc")
  check "$name: the demo exits 1 (exit $rc)" test "$rc" = 1
  case $name in
    plain) said="the device plugin did not register" ;;
    dra) said="the DRA driver did not register" ;;
  esac
  check "$name: it says '$said'" grep -q "FAIL  $said" "$tmp/$name.out"
  check "$name: it allocates nothing and attaches nothing" \
    sh -c "! grep -q '^\[4\]' '$tmp/$name.out' && grep -q '^Summary: 0 attachments' '$tmp/$name.out'"
  pids=$(cat "$tmp"/pid.* 2>/dev/null | tr '\n' ' ' || true)
  check "$name: the plugin it started ran ($pids)" test -n "$pids"
  alive=""
  for p in $pids; do kill -0 "$p" 2>/dev/null && alive+="$p "; done
  check "$name: and is stopped when the demo ends (still running: ${alive:-none})" test -z "$alive"
  for p in $alive; do kill "$p" 2>/dev/null || true; done
  rm -f "$tmp"/pid.*
done
[ "$fails" = 0 ] && echo "demo_failure_test: all passed" || echo "demo_failure_test: $fails failed"
exit "$fails"
