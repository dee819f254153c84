#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Packages the Helm chart as a versioned artifact: OUT_DIR/kube-rdma-<chart version>.tgz and its
# SHA-256 in kube-rdma-<version>.tgz.sha256 (`sha256sum --check` format), then proves the package
# is the chart: `helm template` of the .tgz renders exactly what the directory renders, with the
# defaults and with ci/manifests-values.yaml. `make chart`, and CTest.
#
# Usage: deploy/package_chart.sh OUT_DIR [HELM]
set -euo pipefail
out="${1:?usage: package_chart.sh OUT_DIR [HELM]}"
helm="${2:-helm}"
chart="$(cd "$(dirname "$0")" && pwd)/helm/kube-rdma"
command -v "$helm" >/dev/null || { echo "package_chart.sh: no $helm on PATH (run \`make helm\`)" >&2; exit 2; }
mkdir -p "$out"
version=$(sed -n 's/^version: *//p' "$chart/Chart.yaml")
pkg="$out/kube-rdma-$version.tgz"
rm -f "$pkg" "$pkg.sha256"
"$helm" package "$chart" --destination "$out" >/dev/null
[ -f "$pkg" ] || { echo "package_chart.sh: helm package made no $pkg" >&2; exit 1; }
(cd "$out" && sha256sum "$(basename "$pkg")" >"$(basename "$pkg").sha256")
for values in "" "$chart/ci/manifests-values.yaml"; do
  if ! diff <("$helm" template kube-rdma "$chart" -n kube-rdma ${values:+-f "$values"}) \
            <("$helm" template kube-rdma "$pkg" -n kube-rdma ${values:+-f "$values"}) >/dev/null; then
    echo "package_chart.sh: $pkg renders differently from $chart${values:+ with $values}" >&2
    exit 1
  fi
done
(cd "$out" && sha256sum --check --quiet "$(basename "$pkg").sha256")
echo "$pkg"
cat "$pkg.sha256"
