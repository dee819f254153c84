#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages kube-rdma builds and tests with (and, with `lint`, lints with); installs nothing that is already
# there, so it is cheap to run before every make target. Needs root (or sudo) when something is missing.
set -euo pipefail

# What builds the binaries and the demo (`install-deps.sh demo` installs only these).
packages=(
  g++ cmake ninja-build pkg-config make python3
  libnl-3-dev libnl-route-3-dev        # rtnetlink and NETLINK_RDMA (netlink/)
  libexpected-dev nlohmann-json3-dev libspdlog-dev libfmt-dev libcli11-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc   # deviceplugin/, proto/
  prometheus-cpp-dev                   # metrics (device plugin) and the Pushgateway client (validator)
  libcurl4-openssl-dev                 # the DRA driver's API server client
  libibverbs-dev ibverbs-providers     # the validator's verbs probe module (and Soft-RoCE's provider)
  catch2                               # the tests (CMake configures them with everything else)
  libyaml-cpp-dev                      # tools/sim reads rendered manifests (demo, namespace tests)
  iproute2                             # the demo's and the namespace tests' namespaces, and cleanup
  containernetworking-plugins          # host-local and bridge in the demo; host-device, the benchmark's peer
)
# What only the tests need.
test_packages=(
  python3-yaml python3-kubernetes      # offline validation of deploy/ manifests
  buildah skopeo debootstrap busybox-static   # make images: build, archive, plain root, image shell
  chromium                             # the fleet report page test (headless)
  qemu-system-x86 kmod cpio            # the VM tier: Debian's kernel under QEMU, its initramfs
)
# npm (Helm and the Kubernetes API schemas come from its registry) is whatever Node.js the machine
# has; .ci/install-helm.sh installs Debian's where there is none.

# `install-deps.sh format`: also clang-format (`make format`, run by `make test`); `lint`: also
# clang-tidy (`make lint`).
case "${1:-}" in
  demo) ;;
  format) packages+=(clang-format) ;;
  lint) packages+=(clang-format clang-tidy) ;;
  *) packages+=("${test_packages[@]}") ;;
esac

# kubectl renders kustomize (deploy/check_renders.py); any kubectl on PATH will do, else Debian's.
[ "${1:-}" = demo ] || command -v kubectl >/dev/null || packages+=(kubernetes-client)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
