#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The install path's first step against a real registry (run by `make test` after the node image is
# built): Debian's docker-registry (distribution 2.8) on loopback; deploy/images/push.sh pushes the
# image deploy/images/build.sh made; skopeo reads it back by tag, with the same layers; the chart
# rendered with the values push.sh wrote pulls exactly that image by digest, and passes
# `helm lint --strict`; the README's install command with it renders valid objects. Also: push.sh
# without a registry is a usage error (2), and a registry that does not answer is an error (1)
# saying so. Everything it starts is stopped and removed on exit.
#
# Usage: tests/images/registry_test.sh [HELM]   (root; after deploy/images/build.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
helm=${1:-helm}
OUT=${OUT:-build/images}
fails=0
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fails=$((fails + 1)); fi
}
command -v docker-registry >/dev/null || { echo "registry_test: docker-registry is not installed (apt-get install docker-registry)" >&2; exit 1; }
[ -s "$OUT/node-image.env" ] || { echo "registry_test: no node image in $OUT (deploy/images/build.sh first)" >&2; exit 1; }

tmp=$(mktemp -d)
registry_pid=""
# The registry ends by SIGTERM, so its wait status is 143: under set -e that would become the
# script's exit status, so the cleanup never fails.
cleanup() {
  if [ -n "$registry_pid" ]; then
    kill "$registry_pid" 2>/dev/null || true
    wait "$registry_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
port=$((20000 + RANDOM % 20000))
cat >"$tmp/config.yml" <<CONFIG
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $tmp/storage
http:
  addr: 127.0.0.1:$port
CONFIG
docker-registry serve "$tmp/config.yml" >"$tmp/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 50); do
  curl -fsS "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break
  sleep 0.2
done
check "docker-registry answers on 127.0.0.1:$port" curl -fsS "http://127.0.0.1:$port/v2/" -o /dev/null

# Usage and an unreachable registry.
set +e
deploy/images/push.sh >/dev/null 2>"$tmp/usage.err"
rc=$?
check "push.sh without a registry: exit 2, its usage (exit $rc)" \
  sh -c "[ $rc = 2 ] && grep -q 'usage: deploy/images/push.sh REGISTRY/PATH' $tmp/usage.err"
OUT=$OUT deploy/images/push.sh "127.0.0.1:1/kube-rdma" --dest-tls-verify=false >/dev/null 2>"$tmp/down.err"
rc=$?
check "push.sh to a registry that does not answer: exit 1, saying it could not push (exit $rc)" \
  sh -c "[ $rc = 1 ] && grep -q 'could not push to 127.0.0.1:1/kube-rdma' $tmp/down.err"

# The push, and the image read back.
OUT=$OUT deploy/images/push.sh "127.0.0.1:$port/kube-rdma" --dest-tls-verify=false >"$tmp/push.out" 2>&1
rc=$?
set -e
sed 's/^/  /' "$tmp/push.out"
check "push.sh to the registry (exit $rc)" test "$rc" = 0
# shellcheck disable=SC1091
. "$OUT/node-image.env"
ref="127.0.0.1:$port/kube-rdma/kube-rdma:$version"
digest=$(awk '/digest:/ {print $2}' "$OUT/image-values.yaml")
check "the registry holds $ref at the digest written to image-values.yaml ($digest)" \
  test "$(skopeo inspect --tls-verify=false --format '{{.Digest}}' "docker://$ref")" = "$digest"
check "what the registry serves has the built archive's layers" \
  test "$(skopeo inspect --tls-verify=false --format '{{.Layers}}' "docker://$ref")" = \
  "$(skopeo inspect --format '{{.Layers}}' "oci-archive:$archive")"
check "the tag is the chart's appVersion (and the commit, off a release tag): $version" \
  sh -c "echo '$version' | grep -Eq \"^$(awk -F'"' '/^appVersion:/ {print $2}' deploy/helm/kube-rdma/Chart.yaml | sed 's/\./\\\\./g')(-[0-9a-f]{12}(-dirty)?)?\$\""

# The chart with push.sh's values pulls exactly that image.
"$helm" template kube-rdma deploy/helm/kube-rdma -n kube-rdma -f "$OUT/image-values.yaml" \
  --set trainer.enabled=true --set acceptance.enabled=true >"$tmp/rendered.yaml"
ours=$(grep -Eo 'image: [^ ]*kube-rdma[^ ]*' "$tmp/rendered.yaml" | sort -u | awk '{print $2}')
check "every kube-rdma image the chart renders is $ref@$digest: $(echo "$ours" | tr '\n' ' ')" \
  test "$ours" = "$ref@$digest"
lint() { "$helm" lint --strict deploy/helm/kube-rdma -f "$OUT/image-values.yaml" -n kube-rdma >"$tmp/lint.out" 2>&1; }
check "helm lint --strict with image-values.yaml" lint

# The README's install command as a newcomer runs it: the pushed image's values and a fabric's
# example, its objects held to the Kubernetes API models and the device plugin's own parser.
mkdir -p "$tmp/readme"
"$helm" template kube-rdma deploy/helm/kube-rdma -n kube-rdma -f "$OUT/image-values.yaml" \
  -f examples/roce/values.yaml >"$tmp/readme/objects.yaml"
readme() { /usr/bin/python3 deploy/check_manifests.py "$tmp/readme" \
  --device-plugin "${BUILD:-build/ci}/deviceplugin/rdma-device-plugin" >"$tmp/readme.out" 2>&1; }
check "the README's install command renders valid objects with the pushed image (examples/roce)" readme

[ "$fails" = 0 ] && echo "registry_test: all passed" || echo "registry_test: $fails failed"
exit "$fails"
