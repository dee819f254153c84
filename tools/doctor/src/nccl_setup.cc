// SPDX-License-Identifier: Apache-2.0
// The common mistakes in a pod's NCCL setup as checks, each with its fix.
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>

#include "internal.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/ncclfind/ncclfind.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::doctor::internal {

void CheckNcclTransport(const Inputs& in, const std::vector<sysfs::Hca>& visible, View& v) {
  if (Env(in, "NCCL_IB_DISABLE") == "1" && !visible.empty()) {
    Add(v, "nccl-uses-rdma", Status::kFail,
        "NCCL_IB_DISABLE=1 while " + std::to_string(visible.size()) + " HCA(s) are present",
        "set NCCL_IB_DISABLE=0 (RoCE needs it too)");
  } else if (visible.empty()) {
    Add(v, "nccl-uses-rdma", Status::kFail, "no RDMA device is visible: NCCL can only use TCP",
        "inject HCAs with rdma-device-plugin and attach them with the rdma CNI");
  } else {
    Add(v, "nccl-uses-rdma", Status::kOk, std::to_string(visible.size()) + " HCA(s) visible");
  }
}

namespace {

// `parsed` as NCCL_IB_HCA's exact-match value, ports kept: "=mlx5_0:1,mlx5_1:1".
std::string ExactForm(contract::IbHcaList parsed) {
  parsed.exact = true;
  return contract::FormatIbHca(parsed);
}

void CheckIbHcaEntry(const contract::IbHcaList& parsed, const std::string& name,
                     const std::vector<std::string>& present, View& v) {
  if (std::find(present.begin(), present.end(), name) == present.end()) {
    Add(v, "nccl-ib-hca-present", Status::kFail,
        "NCCL_IB_HCA names " + name + ", which this pod does not have",
        "use the device plugin's NCCL_IB_HCA (drop the pod spec's own value) or list the pod's "
        "HCAs");
  }
  if (parsed.exact || parsed.exclude) return;
  for (const auto& p : present) {
    if (p != name && p.rfind(name, 0) == 0) {
      Add(v, "nccl-ib-hca-exact", Status::kWarn,
          "NCCL_IB_HCA entry " + name + " also matches " + p + " by prefix",
          "use the exact-match form: set NCCL_IB_HCA to \"" + ExactForm(parsed) +
              "\" (the leading '=' is part of the value)");
    }
  }
}

}  // namespace

void CheckIbHca(const Inputs& in, const std::vector<std::string>& present,
                const std::vector<std::string>& ours, View& v) {
  std::string ib = Env(in, contract::kNcclIbHca);
  if (ib.empty()) return;
  contract::IbHcaList parsed = contract::ParseIbHca(ib);
  for (const auto& name : parsed.Names()) CheckIbHcaEntry(parsed, name, present, v);
  auto selected = parsed.Select(present);
  for (const auto& o : ours) {
    if (std::find(selected.begin(), selected.end(), o) == selected.end()) {
      Add(v, "nccl-ib-hca-every-hca", Status::kFail,
          o + " was allocated to this pod but NCCL_IB_HCA leaves it out",
          "NCCL will not use it: include it, or let the device plugin's NCCL_IB_HCA stand");
    }
  }
}

void CheckChannelsAndNics(const Inputs& in, const std::vector<std::string>& ours, size_t visible,
                          View& v) {
  if (auto mc = Env(in, "NCCL_MAX_NCHANNELS");
      !mc.empty() && std::atoi(mc.c_str()) < static_cast<int>(std::max(ours.size(), size_t{1}))) {
    Add(v, "nccl-channels-per-nic", Status::kWarn,
        "NCCL_MAX_NCHANNELS=" + mc + " is fewer than the pod's " + std::to_string(ours.size()) +
            " HCAs",
        "raise NCCL_MAX_NCHANNELS to at least the number of HCAs (e.g. 32)");
  }
  size_t ngpu = PodGpus(in).size();
  size_t nhca = ours.empty() ? visible : ours.size();
  if (ngpu > 0 && nhca < ngpu) {
    Add(v, "one-nic-per-gpu", Status::kWarn,
        std::to_string(nhca) + " HCA(s) for " + std::to_string(ngpu) + " GPU(s)",
        "attach one rdma-net per GPU (net1..netN) and request as many HCAs");
  }
}

void CheckSocketIfname(const Inputs& in, const std::vector<std::string>& ifnames, View& v) {
  std::string ifn = Env(in, "NCCL_SOCKET_IFNAME");
  if (ifn.empty()) {
    Add(v, "nccl-socket-ifname", Status::kWarn,
        "NCCL_SOCKET_IFNAME is not set: NCCL picks the bootstrap interface itself",
        "set NCCL_SOCKET_IFNAME=eth0 (the pod's primary interface) so renamed NICs cannot surprise "
        "it");
    return;
  }
  std::string l = ifn[0] == '=' || ifn[0] == '^' ? ifn.substr(1) : ifn;
  bool any = false;
  for (const auto& item : Split(l, ',')) {
    for (const auto& n : ifnames) any = any || (ifn[0] == '=' ? n == item : n.rfind(item, 0) == 0);
    any = any || item == "lo";
  }
  if (!any && ifn[0] != '^') {
    Add(v, "nccl-socket-ifname", Status::kFail,
        "NCCL_SOCKET_IFNAME=" + ifn + " names no interface of this pod (" + Join(ifnames) + ")",
        "name an interface that exists in the pod, e.g. eth0");
  }
}

void CheckMemlock(View& v) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < (64u << 20)) {
    Add(v, "memlock", Status::kWarn,
        "RLIMIT_MEMLOCK is " + std::to_string(rl.rlim_cur >> 10) +
            " KiB: RDMA registration pins memory",
        "raise the container runtime's memlock limit (e.g. LimitMEMLOCK=infinity for containerd)");
  }
}

namespace {

// The NCCL this pod's processes load, found as rdma-validate finds it (kuberdma::ncclfind).
ncclfind::Library PodNccl(const Inputs& in) {
  std::string path = Env(in, "KUBERDMA_NCCL_LIBRARY");
  return ncclfind::Open(path.c_str(), {"ncclGetVersion"});
}

}  // namespace

std::string NcclLibraryVersion(const Inputs& in) {
  auto nccl = PodNccl(in);
  return nccl.usable() ? nccl.version : "";
}

void CheckNcclVersion(const Inputs& in, View& v) {
  auto nccl = PodNccl(in);
  if (!nccl.usable() || nccl.version.empty()) {
    Add(v, "nccl-version", Status::kWarn,
        nccl.error.empty() ? nccl.path + " gives no version" : nccl.error,
        "use an NGC image, which ships a tuned NCCL");
    return;
  }
  auto parts = Split(nccl.version, '.');
  int minor = parts.size() > 1 ? std::atoi(parts[1].c_str()) : 0;
  Add(v, "nccl-version", minor >= 20 ? Status::kOk : Status::kWarn,
      "NCCL " + nccl.version + " (" + nccl.path + ")",
      "multi-HCA and symmetric-memory features need NCCL 2.20 or later: update the image");
}

}  // namespace kuberdma::doctor::internal
