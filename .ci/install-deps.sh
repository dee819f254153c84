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
  libibumad-dev                        # InfiniBand rails' neighbours: an SMP one hop out (smp/)
  libucx-dev libopenmpi-dev            # the validator's UCX and Open MPI modules (loaded at run time)
  catch2                               # the tests (CMake configures them with everything else)
  libyaml-cpp-dev                      # tools/sim reads rendered manifests (demo, namespace tests)
  iproute2                             # the demo's and the namespace tests' namespaces, and cleanup
  containernetworking-plugins          # host-local and bridge in the demo; host-device, the benchmark's peer
)
# What only the tests need.
test_packages=(
  python3-yaml python3-kubernetes      # offline validation of deploy/ manifests
  buildah skopeo debootstrap busybox-static   # make images: build, archive, plain root, image shell
  docker-registry curl                 # make test: the image pushed to a real registry (distribution 2.8)
  chromium                             # the fleet report page test (headless)
  lldpd                                # the switches of the cabling test (their LLDP agent)
  qemu-system-x86 kmod cpio            # the VM tier: Debian's kernel under QEMU, its initramfs
  strace                               # the VM tier's crash sweep: SIGKILL at each write or send
  ucx-utils openmpi-bin                # the VM tier's communication libraries: UCX 1.13, Open MPI 4.1
  python3-torch                        # rdma-validate --transport gloo between two pods (PyTorch's Gloo)
)
# npm (Helm and the Kubernetes API schemas come from its registry) is whatever Node.js the machine
# has; .ci/install-helm.sh installs Debian's where there is none.

# `install-deps.sh format`: also clang-format (`make format`, run by `make test`); `lint`: also
# clang-tidy (`make lint`).
case "${1:-}" in
  demo) ;;
  # `make demo SRIOV=1`: the VM tier's SR-IOV guest (QEMU with igb, its initramfs, host-local).
  demo-sriov) packages+=(qemu-system-x86 kmod cpio busybox-static)
    want_igb=1 ;;
  format) packages+=(clang-format) ;;
  lint) packages+=(clang-format clang-tidy) ;;
  *) packages+=("${test_packages[@]}")
    want_igb=1 ;;
esac

# kubectl renders kustomize (deploy/check_renders.py); any kubectl on PATH will do, else Debian's.
[[ "${1:-}" = demo* ]] || command -v kubectl >/dev/null || packages+=(kubernetes-client)

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

# The VM tier's SR-IOV guest needs QEMU 8+ (`-device igb`, an SR-IOV NIC); bookworm has 7.2 and its
# backports 10, which the rest of the tier runs on unchanged. Without it that guest is skipped.
if [ "${want_igb:-0}" = 1 ] && grep -qs 'VERSION_CODENAME=bookworm' /etc/os-release &&
  ! qemu-system-x86_64 -device help 2>/dev/null | grep -q '"igb"'; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  echo "install-deps: installing qemu-system-x86 from bookworm-backports (QEMU with igb)" >&2
  if ! grep -rqs '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "deb http://deb.debian.org/debian bookworm-backports main" |
      $SUDO tee /etc/apt/sources.list.d/kube-rdma-backports.list >/dev/null
  fi
  { $SUDO apt-get update -qq &&
    $SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86 >/dev/null; } ||
    echo "install-deps: no QEMU with igb from bookworm-backports: the VM tier's SR-IOV guest is skipped" >&2
fi
