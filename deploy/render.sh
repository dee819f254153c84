#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Renders what a cluster is given, for the demo and the namespace tests to run: the chart with its
# default values, with each ci/*-values.yaml and each examples/*/values.yaml (`helm template
# kube-rdma -n kube-rdma`, the placeholder image of render-image.yaml), and
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
  "$helm" template kube-rdma "$chart" --namespace kube-rdma --values "$here/render-image.yaml" ${2:+--values "$2"} >"$tmp"
  mv "$tmp" "$out/$1.yaml"
}
render default
for values in "$chart"/ci/*-values.yaml; do
  render "$(basename "$values" .yaml)" "$values"
done
# The values files users start from (examples/<fabric>/values.yaml), each as example-<fabric>.yaml.
for values in "$here"/../examples/*/values.yaml; do
  render "example-$(basename "$(dirname "$values")")" "$values"
done
# deploy/manifests, the example trainer and deploy/acceptance as one stream, each in kubectl's (file
# name) order.
tmp="$out/.manifests.tmp"
: >"$tmp"
for dir in manifests kustomize/example-trainer acceptance; do
  for f in "$here/$dir"/*.yaml; do
    [ "$(basename "$f")" = kustomization.yaml ] && continue
    printf -- '---\n# Source: %s\n' "${f#"$here"/}" >>"$tmp"
    cat "$f" >>"$tmp"
    printf '\n' >>"$tmp"
  done
done
mv "$tmp" "$out/manifests.yaml"
ls "$out"/*.yaml
