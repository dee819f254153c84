#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# deploy/kubectl-rdma against a kubectl that records what it is asked and answers as a cluster with
# kube-rdma installed would (no cluster here): the doctor runs in an attached debug pod in
# kube-rdma's namespace with the DaemonSet's image, and that pod is deleted afterwards, even when the
# doctor fails; cabling collects each node's report; usage errors exit 2.
# Usage: kubectl_rdma_test.sh REPO
set -uo pipefail
repo=$1
plugin="$repo/deploy/kubectl-rdma"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}

mkdir "$tmp/bin"
cat >"$tmp/bin/kubectl" <<'KUBECTL'
#!/usr/bin/env bash
# Records each call; answers like a cluster where kube-rdma runs on gpu-1 and gpu-2.
echo "$*" >>"$KUBECTL_LOG"
case "$*" in
  "get daemonset -n kube-rdma -l app.kubernetes.io/name=kube-rdma-node -o jsonpath="*)
    [ -n "${NO_DAEMONSET:-}" ] || echo -n "reg.example/kube-rdma/kube-rdma:0.1.0@sha256:abc" ;;
  "get pods -n kube-rdma -o name")
    [ -f "$KUBECTL_STATE/debugged" ] && echo "pod/node-debugger-gpu-1-x7k2p"
    echo "pod/kube-rdma-node-abcde" ;;
  "get pods -n kube-rdma -l app.kubernetes.io/name=kube-rdma-node -o jsonpath="*)
    printf 'gpu-1\ngpu-2\n' ;;
  debug\ node/*)
    touch "$KUBECTL_STATE/debugged"
    echo '{"node": "report"}'
    exit "${DOCTOR_RC:-0}" ;;
  run\ kube-rdma-cabling-*)
    cat >"$KUBECTL_STATE/cabling.tar"
    echo "cabling: ok" ;;
  delete\ *) rm -f "$KUBECTL_STATE/debugged" ;;
esac
exit 0
KUBECTL
chmod +x "$tmp/bin/kubectl"
export PATH="$tmp/bin:$PATH" KUBECTL_LOG="$tmp/log" KUBECTL_STATE="$tmp"

: >"$tmp/log"
out=$("$plugin" doctor gpu-1 2>&1)
rc=$?
check "doctor NODE: exit 0, the doctor's output back ($rc: $out)" test "$rc" = 0 -a "$out" = '{"node": "report"}'
check "doctor NODE: an attached sysadmin debug pod in kube-rdma's namespace, the DaemonSet's image" \
  grep -qx 'debug node/gpu-1 -n kube-rdma -q -i --attach=true --profile=sysadmin --image=reg.example/kube-rdma/kube-rdma:0.1.0@sha256:abc -- rdma-doctor --host-root /host node' "$tmp/log"
check "doctor NODE: the debug pod it made is deleted, the DaemonSet's pod is not" \
  sh -c "grep -qx 'delete -n kube-rdma pod/node-debugger-gpu-1-x7k2p --wait=false' $tmp/log && ! grep -q 'delete.*kube-rdma-node-abcde' $tmp/log"

: >"$tmp/log"
DOCTOR_RC=1 "$plugin" doctor gpu-1 -o json -- --lldp-wait 35 >/dev/null 2>&1
rc=$?
check "doctor -o json -- ARGS: the doctor's exit (1) passed on" test "$rc" = 1
check "doctor -o json -- ARGS: --json before the view, the extra arguments after it" \
  grep -q -- '-- rdma-doctor --host-root /host --json node --lldp-wait 35$' "$tmp/log"
check "a failing doctor's debug pod is deleted too" grep -q '^delete -n kube-rdma pod/node-debugger-gpu-1-x7k2p' "$tmp/log"

: >"$tmp/log"
out=$("$plugin" cabling 2>&1)
rc=$?
check "cabling with no NODE: every node of the DaemonSet, each with --lldp-wait 35 --node NAME (exit $rc)" \
  sh -c "[ $rc = 0 ] && grep -q -- '--json node --lldp-wait 35 --node gpu-1$' $tmp/log && grep -q -- '--json node --lldp-wait 35 --node gpu-2$' $tmp/log"
check "cabling: both reports handed to rdma-doctor cabling" \
  sh -c "tar -tf $tmp/cabling.tar | grep -q gpu-1.json && tar -tf $tmp/cabling.tar | grep -q gpu-2.json && echo '$out' | grep -q 'cabling: ok'"

check "cabling: the DaemonSet's image looked up once for both nodes" \
  test "$(grep -c '^get daemonset' "$tmp/log")" = 1

: >"$tmp/log"
out=$(NO_DAEMONSET=1 "$plugin" cabling 2>&1)
rc=$?
check "cabling without the DaemonSet: exit 1, said once, no debug pod ($rc: $out)" \
  sh -c "[ $rc = 1 ] && [ \"\$(echo '$out' | grep -c 'no kube-rdma DaemonSet in namespace kube-rdma')\" = 1 ] && ! grep -q '^debug ' $tmp/log"

for bad in "" "frobnicate" "doctor" "doctor a b" "doctor gpu-1 -o yaml" "validate" "--bogus status"; do
  # shellcheck disable=SC2086
  "$plugin" $bad >/dev/null 2>"$tmp/err"
  rc=$?
  check "usage error '$bad': exit 2 with a message ($rc)" sh -c "[ $rc = 2 ] && [ -s $tmp/err ]"
done
"$plugin" --help >"$tmp/help"
check "--help: exit 0, every command" sh -c "grep -q 'kubectl rdma doctor' $tmp/help && grep -q 'kubectl rdma cabling' $tmp/help && grep -q 'kubectl rdma validate' $tmp/help && grep -q 'kubectl rdma status' $tmp/help"

[ "$fails" = 0 ] && echo "kubectl_rdma_test: all passed" || echo "kubectl_rdma_test: $fails failed"
exit "$fails"
