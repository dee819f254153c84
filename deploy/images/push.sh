#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Pushes the node image to a registry you own and writes the chart values that pull it by digest.
#
#   deploy/images/push.sh REGISTRY/PATH [SKOPEO_FLAG...]
#   make push REGISTRY=registry.example.com/kube-rdma
#
# The image is the one deploy/images/build.sh (`make images`) built from this checkout; it is
# built first when there is none, or when it was built from another commit. It is pushed as
# REGISTRY/PATH/kube-rdma:<version> (the chart's appVersion at a release tag, else
# <appVersion>-<commit>), read back from the registry, and its digest written with the repository
# and tag to build/images/image-values.yaml:
#
#   helm install kube-rdma deploy/helm/kube-rdma -n kube-rdma -f build/images/image-values.yaml ...
#
# Credentials are skopeo's (`skopeo login REGISTRY` first, or ~/.docker/config.json). Extra
# arguments go to `skopeo copy`, e.g. --dest-tls-verify=false for a registry without TLS.
# Environment: BUILD (build/ci), OUT (build/images).
set -euo pipefail
cd "$(dirname "$0")/../.."
registry=${1:-}
if [ -z "$registry" ] || [ "${registry#-}" != "$registry" ]; then
  echo "usage: deploy/images/push.sh REGISTRY/PATH [SKOPEO_FLAG...]   (e.g. registry.example.com/kube-rdma)" >&2
  exit 2
fi
shift
registry=${registry%/}
case "$registry" in
  *://*) echo "push.sh: give the registry without a scheme (registry.example.com/kube-rdma, not $registry)" >&2; exit 2 ;;
esac
OUT=${OUT:-build/images}
BUILD=${BUILD:-build/ci}
command -v skopeo >/dev/null || { echo "push.sh: skopeo is not installed (apt-get install skopeo)" >&2; exit 1; }

# shellcheck disable=SC1091
built() { [ -s "$OUT/node-image.env" ] && . "$OUT/node-image.env" && [ -s "$archive" ] && [ "$revision" = "$(git rev-parse HEAD)" ]; }
if ! built; then
  echo "push.sh: no node image of this commit in $OUT: building it (deploy/images/build.sh)" >&2
  BUILD=$BUILD OUT=$OUT bash deploy/images/build.sh
  built || { echo "push.sh: deploy/images/build.sh wrote no image to push" >&2; exit 1; }
fi

tls=()
for a in "$@"; do
  case "$a" in --dest-tls-verify=*) tls=(--tls-verify="${a#*=}") ;; esac
done
ref="$registry/kube-rdma:$version"
echo "push.sh: pushing $archive to $ref" >&2
skopeo copy -q "$@" "oci-archive:$archive" "docker://$ref" ||
  { echo "push.sh: skopeo could not push to $ref (logged in? skopeo login ${registry%%/*})" >&2; exit 1; }
pushed=$(skopeo inspect "${tls[@]}" --format '{{.Digest}}' "docker://$ref") ||
  { echo "push.sh: $ref cannot be read back from the registry" >&2; exit 1; }
case "$pushed" in
  sha256:????????????????????????????????????????????????????????????????) ;;
  *) echo "push.sh: the registry answered no digest for $ref ($pushed)" >&2; exit 1 ;;
esac
values="$OUT/image-values.yaml"
cat >"$values" <<VALUES
# The node image pushed by deploy/images/push.sh from commit $revision.
image:
  repository: $registry/kube-rdma
  tag: "$version"
  digest: $pushed
VALUES
echo "push.sh: $ref is $pushed"
echo "push.sh: chart values in $values; install with"
echo "  helm install kube-rdma deploy/helm/kube-rdma -n kube-rdma -f $values -f <your values>"
