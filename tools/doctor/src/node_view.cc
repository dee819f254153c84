// SPDX-License-Identifier: Apache-2.0
// The node view: every HCA and where it is, the netns mode, the device plugin, allocations, CNI
// records and stranded devices.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <tuple>

#include "internal.h"
#include "kuberdma/cni/install.h"
#include "kuberdma/cni/state.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/deviceplugin/podresources.h"
#include "kuberdma/rails/rails.h"
#include "kuberdma/sriov/vfs.h"

namespace kuberdma::doctor {

using internal::Add;
using internal::Join;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Every record that reads; each one that does not is a finding of its own.
std::vector<cni::AttachmentRecord> Records(const Inputs& in, View& v) {
  std::vector<cni::AttachmentRecord> records;
  std::vector<Error> unreadable;
  auto listed = cni::StateStore(in.state_dir).List("", &unreadable);
  if (listed) records = std::move(*listed);
  for (const auto& e : unreadable) {
    Add(v, "cni-records", Status::kFail, e.message(),
        "a record rdma could not read cannot be undone by DEL or GC: compare it with `kubectl "
        "get pods -o wide` on this node, restore its device by hand, then delete the file");
  }
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
    return std::tie(a.container_id, a.ifname) < std::tie(b.container_id, b.ifname);
  });
  return records;
}

// Where `h`'s netdev is: on the host, in a pod (from the records), or not visible here.
std::string WhereIs(const Inputs& in, const Result<netns::NetNs>& host, const sysfs::Hca& h,
                    const std::vector<cni::AttachmentRecord>& records) {
  std::string where = "not in this namespace";
  std::string nd = h.netdevs.empty() ? "" : h.netdevs.front();
  if (!nd.empty() && host && in.links != nullptr && in.links->GetByName(*host, nd)) where = "host";
  std::vector<std::string> children;
  for (const auto& r : records) {
    if (cni::HcaIdentity(r.hca_address, r.hca) != cni::HcaIdentity(h.address, h.name)) continue;
    if (cni::IsChildMode(r.mode)) {
      children.push_back(r.container_id + "/" + r.ifname);
    } else {
      where = "pod " + r.container_id + "/" + r.ifname + " (" + r.netns + ")";
    }
  }
  if (!children.empty()) {
    where += ", shared by " + std::to_string(children.size()) +
             " child attachment(s): " + Join(children, ", ");
  }
  return where;
}

void ListHcas(const Inputs& in, const Result<netns::NetNs>& host,
              const std::vector<sysfs::Hca>& hcas,
              const std::vector<cni::AttachmentRecord>& records, View& v) {
  json list = json::array();
  for (const auto& h : hcas) {
    bool soft = h.bus == sysfs::BusKind::kVirtual;
    // A software RDMA device (Soft-RoCE) is named as such: no PCI address is not an error.
    list.push_back(
        {{"name", h.name},
         {"address", soft ? "virtual" : h.address},
         {"bus", soft ? "virtual" : (h.bus == sysfs::BusKind::kAuxiliary ? "auxiliary" : "pci")},
         {"numaNode", h.numa_node},
         {"linkLayer", std::string(sysfs::LinkLayerName(h.link_layer()))},
         {"portState", h.ports.empty() ? "" : h.ports.front().state_name},
         {"netdev", h.netdevs.empty() ? "" : h.netdevs.front()},
         {"where", WhereIs(in, host, h, records)}});
    // An SR-IOV VF names its PF, so a resource mixing PFs and their VFs shows at a glance.
    if (!h.pf_address.empty()) list.back()["pf"] = h.pf_address;
    if (!h.ports.empty() && h.ports.front().state != sysfs::kPortActive) {
      Add(v, "port-state", Status::kWarn, h.name + " port 1 is " + h.ports.front().state_name,
          "check the cable and switch port; the device plugin marks it Unhealthy");
    }
  }
  v.doc["hcas"] = list;
  if (list.empty()) {
    Add(v, "hcas-present", Status::kFail,
        "no RDMA devices under " + in.root.Sys("class/infiniband"),
        "load the driver (mlx5_ib) and check ibv_devinfo");
  }
}

std::string NetnsMode(const Inputs& in, const Result<netns::NetNs>& host) {
  if (host && in.rdma != nullptr) {
    if (auto m = in.rdma->GetNetnsMode(*host)) return std::string(rdma::NetnsModeName(*m));
  }
  if (auto boot = sysfs::BootNetnsMode(in.root)) {
    return std::string(rdma::NetnsModeName(*boot)) + " (boot parameter)";
  }
  return "unknown";
}

void DevicePlugin(const Inputs& in, View& v) {
  json dp = {{"dir", in.plugin_dir},
             {"kubeletSocket", fs::exists(in.plugin_dir + "/kubelet.sock")},
             {"sockets", json::array()}};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(in.plugin_dir, ec)) {
    std::string n = e.path().filename();
    if (n.rfind("kuberdma-", 0) == 0) dp["sockets"].push_back(n);
  }
  v.doc["devicePlugin"] = dp;
  if (dp["sockets"].empty()) {
    Add(v, "device-plugin-serving", Status::kFail, "no kuberdma-*.sock in " + in.plugin_dir,
        "the rdma-device-plugin DaemonSet is not running on this node: kubectl -n kube-rdma get "
        "pods -o wide");
  } else {
    Add(v, "device-plugin-serving", Status::kOk,
        Join(dp["sockets"].get<std::vector<std::string>>()));
  }
}

json FromPodResources(const Inputs& in) {
  if (!fs::exists(in.pod_resources)) return nullptr;
  auto pr = deviceplugin::ListPodResources(in.pod_resources, std::chrono::seconds(2));
  if (!pr) return nullptr;
  json allocs = json::array();
  for (const auto& x : *pr) {
    if (x.resource.rfind("rdma/", 0) != 0) continue;
    allocs.push_back({{"pod", x.pod},
                      {"container", x.container},
                      {"resource", x.resource},
                      {"deviceIDs", x.device_ids}});
  }
  return allocs;
}

json FromCheckpoint(const std::string& path, View& v) {
  std::vector<std::string> problems;
  auto a = ReadCheckpoint(path, &problems);
  for (const auto& p : problems) {
    Add(v, "kubelet-checkpoint", Status::kWarn, "skipped: " + p,
        "the kubelet writes this file; other entries are shown as read");
  }
  if (!a) {
    if (a.error().code() != ErrorCode::kNotFound) {
      Add(v, "kubelet-checkpoint", Status::kWarn, a.error().message(),
          "allocations are unknown; the pod-resources API (kubelet socket) gives them too");
    }
    return nullptr;
  }
  json allocs = json::array();
  for (const auto& x : *a) {
    allocs.push_back({{"podUID", x.pod_uid},
                      {"container", x.container},
                      {"resource", x.resource},
                      {"deviceIDs", x.device_ids}});
  }
  return allocs;
}

// The DRA driver's tainted devices: what the scheduler keeps new claims off, and why.
void ShowTaints(const Inputs& in, View& v) {
  auto taints = contract::ListTaints(in.allocations_dir);
  if (!taints) {
    if (taints.error().code() != ErrorCode::kNotFound) {
      Add(v, "dra-taints", Status::kWarn, taints.error().message(),
          "the DRA driver rewrites it on its next scan");
    }
    return;
  }
  json shown = json::array();
  for (const auto& t : *taints) {
    shown.push_back(t.device + " (" + t.hca + "): " + t.key + "=" + t.value + ":" + t.effect);
    bool acted_on = t.effect == "NoSchedule" || t.effect == "NoExecute";
    Add(v, "dra-taints", acted_on ? Status::kWarn : Status::kOk,
        t.hca + " is tainted " + t.key + "=" + t.value + ":" + t.effect +
            (t.effect == "NoExecute"    ? ": no new claim gets it, and pods holding it are evicted"
             : t.effect == "NoSchedule" ? ": no new claim gets it"
                                        : ": shown to the scheduler, not acted on"),
        "docs/dra.md#health: fix the cause (" + t.value +
            "); the driver removes the taint by itself once the device is healthy");
  }
  v.doc["draTaints"] = shown;
}

// rdma/* allocations: the pod-resources API when it answers, the checkpoint file otherwise.
void Allocations(const Inputs& in, View& v) {
  std::string cp =
      in.checkpoint.empty() ? in.plugin_dir + "/kubelet_internal_checkpoint" : in.checkpoint;
  json allocs = FromPodResources(in);
  std::string source = "pod-resources API";
  if (allocs.is_null()) {
    allocs = FromCheckpoint(cp, v);
    source = "checkpoint " + cp;
  }
  if (allocs.is_null()) {
    allocs = json::array();
    source = "none";
  }
  v.doc["allocations"] = allocs;
  v.doc["allocationsSource"] = source;
  // The DRA driver's prepared claims: which claim gave which pods which HCAs.
  std::vector<std::string> skipped;
  json claims = json::array();
  for (const auto& c : contract::ListClaims(in.allocations_dir, &skipped)) {
    claims.push_back({{"claim", c.claim}, {"pods", c.pods}, {"hcas", c.hcas}});
  }
  if (!claims.empty()) v.doc["draClaims"] = claims;
  ShowTaints(in, v);
  for (const auto& s : skipped) {
    Add(v, "dra-claims", Status::kWarn, "unreadable DRA claim record " + s,
        "the DRA driver rewrites it when the kubelet prepares the claim again");
  }
}

void CheckRecord(const Inputs& in, const cni::AttachmentRecord& r, View& v) {
  if (r.netns.empty()) return;
  auto ns = netns::NetNs::Open(HostPath(in, r.netns));
  if (!ns && ns.error().code() == ErrorCode::kNotFound) {
    bool child = cni::IsChildMode(r.mode);
    Add(v, "stranded-devices", Status::kFail,
        r.hca + " is recorded for " + r.container_id + "/" + r.ifname + " in " + r.netns +
            ", which no longer exists",
        child ? "the kernel deleted the pod's " + std::string(cni::AttachModeName(r.mode)) +
                    " child with its namespace; CNI GC (or DEL of that container) releases its "
                    "address and the record"
              : "CNI GC (or DEL of that container) restores it; the kernel has already returned "
                "the netdev to the host");
  } else if (!ns) {
    // Not seeing a namespace is not proof that it is gone: never call a live pod stranded.
    Add(v, "stranded-devices", Status::kWarn,
        "cannot tell whether " + r.netns + " (" + r.container_id + "/" + r.ifname +
            ") exists: " + ns.error().message(),
        "run on the host as root, or in `kubectl debug node/<node> --profile=sysadmin` with "
        "--host-root /host");
  }
}

void CniRecords(const Inputs& in, const std::vector<cni::AttachmentRecord>& records, View& v) {
  json recs = json::array();
  for (const auto& r : records) {
    recs.push_back({{"network", r.network},
                    {"containerID", r.container_id},
                    {"ifname", r.ifname},
                    {"hca", r.hca},
                    {"mode", cni::AttachModeName(r.mode)},
                    {"netns", r.netns}});
    CheckRecord(in, r, v);
  }
  v.doc["cniRecords"] = recs;
}

// HCA netdevs the kernel renamed devN when the namespace they were in died.
void CheckRenamed(const Inputs& in, const Result<netns::NetNs>& host, View& v) {
  if (!host || in.links == nullptr) return;
  auto links = in.links->List(*host);
  if (!links) return;
  for (const auto& l : *links) {
    bool devn = l.name.size() > 3 && l.name.rfind("dev", 0) == 0 &&
                l.name.find_first_not_of("0123456789", 3) == std::string::npos;
    if (devn && sysfs::HcaForNetdev(in.root, l.name, sysfs::HcaDetail::kIdentity)) {
      Add(v, "stranded-devices", Status::kWarn,
          l.name + " is an HCA netdev the kernel renamed when a pod's namespace died",
          "CNI DEL or GC for that pod restores its name; `rdma-doctor node --json` lists the "
          "records");
    }
  }
}

}  // namespace

namespace {

// The node config's VF counts against the node: what each PF has, what its firmware allows, and
// for each that the install step could not apply, why and the admin's fix (the firmware's
// mlxconfig command and its reset, which kube-rdma never does).
void Sriov(const Inputs& in, const rails::NodeConfig& config, const rails::NodeRoles& roles,
           const std::vector<sysfs::Hca>& hcas, View& v) {
  if (config.sriov.empty()) return;
  json list = json::array();
  std::vector<std::string> done;
  for (const auto& p : sriov::PlanVfCounts(in.root, config, roles, hcas)) {
    list.push_back({{"target", p.want.Target()},
                    {"pf", p.pf_address},
                    {"hca", p.hca},
                    {"netdev", p.netdev},
                    {"wantVfs", p.want.num_vfs},
                    {"numVfs", p.num_vfs},
                    {"totalVfs", p.total_vfs},
                    {"blocked", p.why}});
    std::string who = p.want.Target() + (p.hca.empty() ? "" : " (" + p.hca + ")");
    if (p.Done()) {
      done.push_back(who + ": " + std::to_string(p.num_vfs) + " VFs");
    } else if (p.blocked == sriov::Blocked::kNone) {
      Add(v, "sriov-vfs", Status::kWarn,
          who + " has " + std::to_string(p.num_vfs) + " VFs, the node config asks for " +
              std::to_string(p.want.num_vfs),
          "the DaemonSet's configure-vfs step applies it when its pod starts on this node "
          "(kubectl -n <namespace> logs <the node's kube-rdma pod> -c configure-vfs)");
    } else {
      Add(v, "sriov-vfs", Status::kFail, who + ": " + p.why,
          p.fix.empty()
              ? "name a PF of this node (rdma-doctor node lists them) in " + in.node_config
              : p.fix);
    }
  }
  v.doc["sriov"] = list;
  if (!done.empty()) Add(v, "sriov-vfs", Status::kOk, Join(done, "; "), "");
}

// Each HCA's rail and whether it is the node's own NIC, as the CNI and the device plugin judge
// them: the same node config, the same host namespace.
void NodeNics(const Inputs& in, const Result<netns::NetNs>& host,
              const std::vector<sysfs::Hca>& hcas, View& v) {
  auto config = rails::LoadNodeConfig(in.node_config, "");
  if (!config) {
    Add(v, "node-config", Status::kFail, config.error().message(),
        "the CNI refuses every ADD until it parses: fix node.json in the chart's values "
        "(nodeConfig) and let the DaemonSet rewrite it (docs/install.md)");
    return;
  }
  if (!host || in.links == nullptr || in.addrs == nullptr) return;
  auto net = rails::ReadHostNet(*in.links, *in.addrs, *host);
  if (!net) {
    Add(v, "node-own-nics", Status::kWarn, net.error().message(), "run on the host as root");
    return;
  }
  rails::NodeRoles roles = rails::JudgeHcas(hcas, *net, *config);
  std::vector<std::string> own;
  for (auto& h : v.doc["hcas"]) {
    const rails::HcaRole* r = roles.Find(h["name"].get<std::string>());
    if (r == nullptr) continue;
    h["rail"] = r->rail;
    if (!r->node_own.empty()) {
      h["nodeNic"] = r->node_own;
      own.push_back(h["name"].get<std::string>() + " (" + r->node_own + ")");
    }
  }
  Add(v, "node-own-nics", Status::kOk,
      own.empty() ? "none: every HCA may go to pods" : "never offered or moved: " + Join(own, "; "),
      "");
  for (const auto& u : roles.unmatched) {
    Add(v, "declared-rails", Status::kWarn, u,
        "name each rail's netdev, PCI address or HCA as this node shows them (rdma-doctor node "
        "lists them), in " +
            in.node_config);
  }
  v.doc["railsDeclared"] = config->Declared();
  Sriov(in, *config, roles, hcas, v);
  internal::CheckCabling(in, *host, hcas, roles, *config, v);
}

// Which CNI binaries are kube-rdma's: the DaemonSet installs ours as kube-rdma (cni.binaryName)
// and never over another plugin's file, such as rdma-cni's `rdma`.
void CniBinaries(const Inputs& in, View& v) {
  json bins = json::object();
  std::vector<std::string> ours;
  std::string foreign_rdma;
  for (const std::string name : {"kube-rdma", "rdma"}) {
    std::string path = in.cni_bin_dir + "/" + name;
    auto owner = cni::CniBinaryOwner(path);
    if (!owner) {
      bins[name] = owner.error().message();
      continue;
    }
    bins[name] = *owner == cni::BinaryOwner::kOurs      ? "kube-rdma"
                 : *owner == cni::BinaryOwner::kForeign ? "another plugin"
                                                        : "absent";
    if (*owner == cni::BinaryOwner::kOurs) ours.push_back(path);
    if (*owner == cni::BinaryOwner::kForeign && name == "rdma") foreign_rdma = path;
  }
  v.doc["cniBinaries"] = bins;
  std::string other = foreign_rdma.empty() ? ""
                                           : "; " + foreign_rdma +
                                                 " is another plugin's (network-operator "
                                                 "installs rdma-cni under this name): NADs of "
                                                 "\"type\": \"rdma\" run it, not kube-rdma";
  if (ours.empty()) {
    Add(v, "cni-binary-installed", Status::kWarn,
        "no kube-rdma CNI binary in " + in.cni_bin_dir + other,
        "the DaemonSet's install-cni init container did not run or refused (its log says why: "
        "kubectl -n <namespace> logs <the node's kube-rdma pod> -c install-cni); a cni.binaryName "
        "other than kube-rdma or rdma is not checked here");
    return;
  }
  Add(v, "cni-binary-installed", Status::kOk, Join(ours, ", ") + " (kube-rdma's)" + other, "");
}

}  // namespace

View NodeView(const Inputs& in) {
  View v{"node", json::object(), {}};
  if (!in.node_name.empty()) v.doc["node"] = in.node_name;
  auto host = netns::NetNs::Current();
  auto hcas = sysfs::DiscoverHcas(in.root, sysfs::HcaDetail::kPorts);
  std::vector<cni::AttachmentRecord> records = Records(in, v);
  std::vector<sysfs::Hca> all = hcas ? *hcas : std::vector<sysfs::Hca>{};
  ListHcas(in, host, all, records, v);
  NodeNics(in, host, all, v);
  v.doc["netnsMode"] = NetnsMode(in, host);
  CniBinaries(in, v);
  DevicePlugin(in, v);
  Allocations(in, v);
  CniRecords(in, records, v);
  CheckRenamed(in, host, v);
  internal::CheckLossless(in, all, records, v);
  internal::CheckGpuDirect(in, all, v);
  return v;
}

}  // namespace kuberdma::doctor
