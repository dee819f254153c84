// SPDX-License-Identifier: Apache-2.0
// The pod view: what was injected (netdevs, RDMA devices, /dev/infiniband, env) and whether the
// pod's NCCL setup will use it.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "internal.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/contract/pod_env.h"

namespace kuberdma::doctor {

using internal::Add;
using internal::Env;
using internal::Names;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// The pod's interfaces (but lo) and the HCA behind each; their names go to `ifnames`.
json Netdevs(const Inputs& in, std::vector<std::string>* ifnames) {
  json netdevs = json::array();
  auto here = netns::NetNs::Current();
  if (!here || in.links == nullptr) return netdevs;
  auto links = in.links->List(*here);
  if (!links) return netdevs;
  for (const auto& l : *links) {
    if (l.name == "lo") continue;
    ifnames->push_back(l.name);
    auto h = sysfs::HcaForNetdev(in.root, l.name, sysfs::HcaDetail::kIdentity);
    json addresses = json::array();
    if (in.addrs != nullptr) {
      if (auto list = in.addrs->ListAddresses(*here, l.ifindex)) {
        for (const auto& a : *list) addresses.push_back(a.Cidr());
      }
    }
    netdevs.push_back({{"name", l.name},
                       {"mtu", l.mtu},
                       {"up", l.admin_up && l.oper_up},
                       {"addresses", addresses},
                       {"hca", h ? h->name : ""}});
  }
  return netdevs;
}

json DeviceNodes(const Inputs& in) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(in.root.Dev("infiniband"), ec)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end(),
            [](const auto& a, const auto& b) { return sysfs::NaturalLess(a, b); });
  return names;
}

// Whether `h`'s uverbs node is there, openable and really its own; false when absent.
bool CheckUverbs(const Inputs& in, const sysfs::Hca& h, View& v) {
  std::string path = in.root.Dev("infiniband/" + h.uverbs);
  struct stat st {};
  if (h.uverbs.empty() || ::stat(path.c_str(), &st) != 0) return false;
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd.valid()) {
    Add(v, "device-permissions", Status::kFail, path + " (" + h.name + ") cannot be opened",
        "the container needs the device plugin's injection of /dev/infiniband (request "
        "rdma/shared), not a bind mount");
  }
  if (!S_ISCHR(st.st_mode)) return true;
  std::string want = in.root.ReadAttrOr("class/infiniband_verbs/" + h.uverbs + "/dev", "");
  std::string got = std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
  if (!want.empty() && want != got) {
    Add(v, "uverbs-ownership", Status::kFail,
        path + " is " + got + " but " + h.name + "'s uverbs is " + want,
        "the container's /dev/infiniband was populated for other HCAs; let the device plugin "
        "inject it");
  }
  return true;
}

void CheckInjected(const Inputs& in, const std::vector<sysfs::Hca>& visible, View& v) {
  v.doc["devices"] = DeviceNodes(in);
  int uverbs = 0;
  for (const auto& h : visible) uverbs += CheckUverbs(in, h, v) ? 1 : 0;
  if (uverbs == 0) {
    Add(v, "devices-injected", Status::kFail, "no uverbs device in " + in.root.Dev("infiniband"),
        "request rdma/shared (or rdma/hca) in the container's resources; check `kubectl describe "
        "node | grep rdma`");
  } else {
    Add(v, "devices-injected", Status::kOk, std::to_string(uverbs) + " uverbs device(s)");
  }
}

json NcclEnv(const Inputs& in) {
  json env = json::object();
  for (const char* k :
       {contract::kNcclIbHca, "NCCL_IB_DISABLE", "NCCL_SOCKET_IFNAME", "NCCL_NET",
        "NCCL_MAX_NCHANNELS", contract::kHcas, contract::kClaim, contract::kClaimPcieRoots}) {
    if (!Env(in, k).empty()) env[k] = Env(in, k);
  }
  return env;
}

// The HCAs the pod should use: its allocation where the device plugin said, else all it sees.
std::vector<sysfs::Hca> ExpectedHcas(const std::vector<sysfs::Hca>& visible,
                                     const std::vector<std::string>& ours) {
  if (ours.empty()) return visible;
  std::vector<sysfs::Hca> out;
  for (const auto& h : visible) {
    if (std::find(ours.begin(), ours.end(), h.name) != ours.end()) out.push_back(h);
  }
  return out;
}

// A KUBERDMA_HCAS that does not decode is a finding: the rest of the view then knows no
// allocated HCAs, and saying nothing would read as "none allocated".
void CheckPodEnv(const Inputs& in, View& v) {
  auto pod = contract::Read([&in](const char* k) { return in.getenv ? in.getenv(k) : nullptr; });
  if (pod) return;
  Add(v, "pod-environment", Status::kFail,
      std::string(contract::kHcas) + " is set but malformed: " + pod.error().message(),
      "rdma-device-plugin sets it at Allocate; remove any pod-spec env of that name");
}

}  // namespace

View PodView(const Inputs& in) {
  View v{"pod", json::object(), {}};
  auto hcas = sysfs::DiscoverHcas(in.root, sysfs::HcaDetail::kPorts);
  std::vector<sysfs::Hca> visible = hcas ? *hcas : std::vector<sysfs::Hca>{};
  std::vector<std::string> ifnames;
  v.doc["netdevs"] = Netdevs(in, &ifnames);
  v.doc["rdmaDevices"] = Names(visible);
  CheckInjected(in, visible, v);
  v.doc["env"] = NcclEnv(in);
  CheckPodEnv(in, v);
  std::vector<std::string> ours = internal::Ours(in);
  internal::CheckNcclTransport(in, visible, v);
  internal::CheckIbHca(in, Names(visible), ours, v);
  internal::CheckChannelsAndNics(in, ours, visible.size(), v);
  internal::CheckSocketIfname(in, ifnames, v);
  internal::CheckMemlock(v);
  internal::CheckClaimAlignment(in, visible, v);
  internal::CheckNcclVersion(in, v);
  std::vector<sysfs::Hca> expected = ExpectedHcas(visible, ours);
  internal::GidTables(in, expected, v);
  internal::CheckRoceRetries(in, expected, v);
  internal::CheckCommLibraries(in, expected, v);
  internal::CheckGlooInterfaces(in, ifnames, v);
  return v;
}

}  // namespace kuberdma::doctor
