#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The library boundaries of docs/development.md, enforced rather than hoped for:
#   - libnl headers, setns(2) and /sys paths only in netlink/ (the node library);
#   - gRPC only in deviceplugin/, proto/ and the kubelet stand-ins (tools/standins) (and the device
#     plugin's own tests and benchmark);
#   - nothing but the result document on the CNI's stdout: no stdout printing in cni/ apart from
#     main.cc's one Print(), and no spdlog stdout sinks there;
#   - test-only links (veths, bridges, qdiscs) are created only in netlink/testing/, which no
#     production binary links (the target graph itself: .ci/check-targets.py);
#   - the pod-env variables are spelled only by their codec (contract/); everyone else
#     uses its constants;
#   - stream sockets are opened, bound, connected and accepted only in netlink/ (kuberdma::sock
#     and the kernel's own sockets); tests may open their own.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
src() { git ls-files -- '*.cc' '*.h' | grep -v '^tests/fixtures/'; }

violations() {  # $1: description, rest: grep output
  local what="$1"; shift
  if [ -n "$*" ]; then
    echo "boundary: $what:"; echo "$*" | sed 's/^/  /'; status=1
  fi
}

violations "libnl is included outside netlink/" \
  "$(src | grep -v '^netlink/' | xargs grep -n '#include <netlink/' 2>/dev/null)"
violations "setns() is called outside netlink/src/netns/" \
  "$(src | grep -v '^netlink/src/netns/' | xargs grep -nE '(^|[^_a-zA-Z])setns\(' 2>/dev/null | grep -v ':\s*//')"
violations "a /sys path is spelled outside netlink/ (go through sysfs::SysfsRoot)" \
  "$(src | grep -v '^netlink/' | xargs grep -nE '"/sys(/|")' 2>/dev/null)"
violations "gRPC is used outside deviceplugin/, proto/, tools/standins/ and the device plugin's tests and benchmark" \
  "$(src | grep -vE '^(deviceplugin|proto|tools/standins|tests/deviceplugin)/|^bench/deviceplugin_' | xargs grep -nE '#include <grpc(pp)?/|api\.grpc\.pb\.h' 2>/dev/null)"
violations "cni/ writes to stdout outside main.cc's Print()" \
  "$(git ls-files -- 'cni/*.cc' 'cni/*.h' | xargs grep -nE 'std::cout|(^|[^a-z_])printf\(|[^a-z_]puts\(|stdout_sink_(mt|st)|stdout_color|f(write|printf|puts)\(.*stdout' 2>/dev/null)"
violations "cni/main.cc writes to fd 1 other than in Print()" \
  "$(grep -n 'write(1' cni/main.cc | grep -v 'out.data(), out.size()')"

violations "test-only links (veth, bridge, qdisc) are created outside netlink/testing/" \
  "$(src | grep -v '^netlink/testing/' | xargs grep -nE 'rtnl_link_veth_alloc|rtnl_link_add\(|rtnl_link_enslave|RTM_NEWQDISC' 2>/dev/null)"
violations "the pod-env variable names are spelled outside contract/ (use contract::kNcclIbHca, contract::kHcas)" \
  "$(src | grep -vE '^(contract|tests)/' | xargs grep -nE '"(NCCL_IB_HCA|KUBERDMA_HCAS)"' 2>/dev/null)"

violations "a communication library's variable is spelled outside contract/ (plan it with contract/comm_env.h)" \
  "$(src | grep -vE '^(contract|tests)/' | xargs grep -nE '"(UCX_NET_DEVICES|UCX_IB_GID_INDEX|UCX_IB_ROCE_SUBNETS|UCX_MAX_RNDV_RAILS|OMPI_MCA_pml|NVSHMEM_HCA_LIST|NVSHMEM_IB_GID_INDEX|MC_TE_FILTERS|MC_GID_INDEX|GLOO_SOCKET_IFNAME|VLLM_NIXL_SIDE_CHANNEL_HOST)"' 2>/dev/null)"

violations "a stream socket is opened, connected or accepted outside netlink/ (use kuberdma::sock)" \
  "$(src | grep -vE '^(netlink|tests)/' | xargs grep -nE 'SOCK_STREAM|::(connect|listen|accept4?)\(|getaddrinfo\(' 2>/dev/null)"

[ $status -eq 0 ] && echo "boundaries: ok (libnl, setns, /sys in netlink/; gRPC in deviceplugin/; CNI stdout clean; test links in netlink/testing/; pod-env and library variable names in contract/; stream sockets in netlink/)"
exit $status
