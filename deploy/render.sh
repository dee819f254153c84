#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Renders what a cluster is given, for the demo and the namespace tests to run: the chart with its
# default values and with each ci/*-values.yaml (`helm template kube-rdma -n kube-rdma`), and
# deploy/manifests with deploy/acceptance as `kubectl apply -f` takes them. One file per rendering
# in OUT_DIR: default.yaml, <name>-values.yaml, manifests.yaml.
#
# Usage: deploy/render.sh OUT_DIR [HELM]     (HELM: default `helm` on PATH; `make helm` installs it)
set -euo pipefail

out="${1:?usage: render.sh OUT_DIR [HELM]}"
helm="${2:-helm}"
here="$(cd "$(dirname "$0")" && pwd)"
chart="$here/helm/kube-rdma"

command -v "$helm" >/dev/null || { echo "render.sh: no $helm on PATH (run \`make helm\`)" >&2; exit 2; }
mkdir -p "$out"
render() {  # NAME [VALUES]
  local tmp="$out/.$1.tmp"
  "$helm" template kube-rdma "$chart" --namespace kube-rdma ${2:+--values "$2"} >"$tmp"
  mv "$tmp" "$out/$1.yaml"
}
render default
for values in "$chart"/ci/*-values.yaml; do
  render "$(basename "$values" .yaml)" "$values"
done
# deploy/manifests then deploy/acceptance as one stream, each in kubectl's (file name) order.
tmp="$out/.manifests.tmp"
: >"$tmp"
for dir in manifests acceptance; do
  for f in "$here/$dir"/*.yaml; do
    [ "$(basename "$f")" = kustomization.yaml ] && continue
    printf -- '---\n# Source: %s/%s\n' "$dir" "$(basename "$f")" >>"$tmp"
    cat "$f" >>"$tmp"
    printf '\n' >>"$tmp"
  done
done
mv "$tmp" "$out/manifests.yaml"
ls "$out"/*.yaml
