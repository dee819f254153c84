// SPDX-License-Identifier: Apache-2.0
// The node-in-a-box demo: a simulated 8-GPU node whose eight ConnectX-7 netdevs are real veths;
// rdma-device-plugin registered with a kubelet stand-in that allocates HCAs for the pods; a RoCE
// NAD per rail (the seed's config plus host-local IPAM, one subnet per rail) delivered to `rdma`
// the way Multus calls it, with the allocated device IDs; the pods' interfaces and addresses;
// rdma-validate in each pod (inventory always; where there is a GPU, an NCCL AllReduce across the
// pods over their IPAM addresses, proven from every interface's counters); rdma-doctor on the
// node and in a pod (GID table, RoCE checks); CHECK; then DEL, the plugin stopped, and proof that
// every device and every address came home. Exits non-zero on any failure; leaves nothing behind.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "demo.h"
#include "kuberdma/base/files.h"
#include "kuberdma/deviceplugin/kubelet_standin.h"
#include "kuberdma/podenv/pod_env.h"
#include "kuberdma/sim/pod_view.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::demo {

namespace {

using nlohmann::json;
using sim::CniCall;
using sim::SimNode;
namespace fs = std::filesystem;

constexpr const char* kPluginConfig = R"({"configList":[
  {"resourceName":"shared","rdmaHcaMax":1000,"selectors":{"vendors":["15b3"]}},
  {"resourceName":"hca","rdmaHcaMax":8,"policy":"per-hca","selectors":{"vendors":["15b3"]}}]})";

struct Attachment {
  int rail = 0;  // net<rail>
  std::string hca, netdev, cidr;
  CniCall call;
};

struct Pod {
  std::string name, path;
  std::vector<std::string> ids;
  std::map<std::string, std::string> env;
  std::vector<Attachment> attachments;
};

class NodeDemo {
 public:
  explicit NodeDemo(const Options& o) : o_(o), root_(o.fixture) {}
  int Run();

 private:
  bool ShowNode();
  void StartDevicePlugin();
  void AllocatePods();
  void Allocate(Pod& pod, std::vector<std::string>& free_ids);
  void AttachRails();
  void Attach(Pod& pod, int rail);
  void ShowPods();
  void Validate();
  void RunNccl();
  // Cables net<i> of every pod to switch rail<i>; the interfaces as rdma-validate --expect takes
  // them.
  std::string CableRails();
  // rdma-validate's arguments for pod `rank` of the NCCL run.
  std::vector<std::string> RankArgs(int rank, const std::string& expect, const std::string& root_ip,
                                    const std::string& out) const;
  void ShowNcclReports(const std::string& out);
  void Doctor();
  void DoctorNode(const std::string& dpdir);
  void DoctorPod();
  void CheckAll();
  void DetachAll();
  void StopDevicePlugin();
  std::string RailConfig(int rail) const;
  std::string Dir(const std::string& name) const { return node_->state_dir() + "/" + name; }
  std::vector<std::string> FixtureEnv(const Pod* pod) const;

  const Options& o_;
  sysfs::SysfsRoot root_;
  Failures fail_;
  std::vector<sysfs::Hca> hcas_;
  std::vector<std::string> netdevs_;
  std::unique_ptr<SimNode> node_;
  std::map<std::string, link::LinkInfo> before_;
  std::unique_ptr<deviceplugin::KubeletStandIn> kubelet_;
  pid_t plugin_ = -1;
  std::vector<std::string> free_ids_;
  std::vector<Pod> pods_;
  int checked_ = 0;
  int restored_ = 0;
};

// The seed article's NAD spec.config, plus host-local IPAM with one subnet per rail: RoCE v2
// needs an address on every interface (its GIDs come from them).
std::string NodeDemo::RailConfig(int rail) const {
  json c = {{"cniVersion", "0.3.1"}, {"name", "rdma-rail" + std::to_string(rail)},
            {"type", "rdma"},        {"pkey", "0xffff"},
            {"linkState", "up"},     {"mtu", 9000}};
  c["ipam"] = {{"type", "host-local"},
               {"dataDir", Dir("ipam")},
               {"ranges", {{{{"subnet", "10.10." + std::to_string(rail) + ".0/24"}}}}}};
  c["stateDir"] = node_->state_dir();  // keeps the demo off this machine's /run/kube-rdma
  return c.dump();
}

std::vector<std::string> NodeDemo::FixtureEnv(const Pod* pod) const {
  std::vector<std::string> env = ToolEnv({"KUBERDMA_SYSFS_ROOT=" + o_.fixture});
  if (pod != nullptr) {
    for (const auto& [k, v] : pod->env) env.push_back(k + "=" + v);
  }
  return env;
}

bool NodeDemo::ShowNode() {
  Heading(1, "A simulated GPU node: HCAs from a sysfs fixture, their netdevs real veths");
  auto hcas = sysfs::DiscoverHcas(root_, sysfs::HcaDetail::kPorts);
  if (!hcas || hcas->empty()) {
    std::fprintf(stderr, "no HCAs in fixture %s\n", o_.fixture.c_str());
    return false;
  }
  hcas_ = *hcas;
  std::printf("  %-8s %-14s %-5s %-12s %-9s %s\n", "HCA", "PCI", "NUMA", "netdev", "link", "rate");
  for (const auto& h : hcas_) {
    netdevs_.push_back(h.netdevs.front());
    std::printf("  %-8s %-14s %-5d %-12s %-9s %s\n", h.name.c_str(), h.address.c_str(), h.numa_node,
                h.netdevs.front().c_str(),
                std::string(sysfs::LinkLayerName(h.link_layer())).c_str(),
                h.ports.front().rate.c_str());
  }
  node_ = std::make_unique<SimNode>(o_.fixture, netdevs_);
  for (const auto& n : netdevs_) before_[n] = *node_->links().GetByName(node_->node(), n);
  std::printf("  node namespace: %s (state in %s)\n", node_->node().path().c_str(),
              node_->state_dir().c_str());
  return true;
}

void NodeDemo::StartDevicePlugin() {
  Heading(2, "rdma-device-plugin registers rdma/shared and rdma/hca with a kubelet stand-in");
  std::string dpdir = Dir("kubelet");
  (void)MakeDirs(dpdir + "/plugins");
  (void)WriteFileAtomic(dpdir + "/device-plugin.json", kPluginConfig);
  kubelet_ = std::make_unique<deviceplugin::KubeletStandIn>(dpdir + "/plugins");
  plugin_ = ::fork();
  if (plugin_ == 0) {
    FILE* f = std::freopen((dpdir + "/device-plugin.log").c_str(), "w", stderr);
    (void)f;
    ::execl(o_.device_plugin_bin.c_str(), o_.device_plugin_bin.c_str(), "--config",
            (dpdir + "/device-plugin.json").c_str(), "--device-plugin-dir",
            (dpdir + "/plugins").c_str(), "--sysfs-root", o_.fixture.c_str(), "--metrics-port",
            "-1", nullptr);
    ::_exit(127);
  }
  bool up = kubelet_->WaitFor(
      [&] {
        return !kubelet_->Lists("rdma/shared").empty() && !kubelet_->Lists("rdma/hca").empty();
      },
      std::chrono::milliseconds(10000));
  if (!up)
    return fail_("the device plugin did not register (log: " + dpdir + "/device-plugin.log)");
  for (const auto& r : kubelet_->registrations()) {
    std::printf("  registered %-12s endpoint %s\n", r.resource_name().c_str(),
                r.endpoint().c_str());
  }
  const auto& list = kubelet_->Lists("rdma/hca").back();
  std::printf(
      "  rdma/shared: %d slots over all 8 HCAs; rdma/hca: %d slots, 8 per HCA, with NUMA "
      "topology\n",
      kubelet_->Lists("rdma/shared").back().devices_size(), list.devices_size());
  for (const auto& d : list.devices()) {
    if (d.health() == "Healthy") free_ids_.push_back(d.id());
  }
}

void NodeDemo::Allocate(Pod& pod, std::vector<std::string>& free_ids) {
  int per_pod = static_cast<int>(netdevs_.size()) / o_.pods;
  auto pref = kubelet_->Preferred("rdma/hca", free_ids, per_pod);
  if (!pref) return fail_(pref.error().message());
  pod.ids = *pref;
  // Each slot's HCA is taken: later pods get other HCAs.
  for (const auto& id : *pref) {
    std::string hca = id.substr(0, id.find('-'));
    free_ids.erase(
        std::remove_if(free_ids.begin(), free_ids.end(),
                       [&](const std::string& f) { return f.substr(0, f.find('-')) == hca; }),
        free_ids.end());
  }
  auto alloc = kubelet_->Allocate("rdma/hca", *pref);
  if (!alloc) return fail_(alloc.error().message());
  pod.env = alloc->envs;
  std::printf(
      "  %s  %s\n             devices: %zu nodes under /dev/infiniband (uverbs, umad, "
      "rdma_cm)\n",
      pod.name.c_str(), pod.path.c_str(), alloc->devices.size());
  std::printf("             %s=%s\n", podenv::kNcclIbHca, pod.env[podenv::kNcclIbHca].c_str());
  auto described = podenv::DecodeHcas(pod.env[podenv::kHcas]);
  std::string desc;
  for (const auto& h : described ? *described : std::vector<podenv::HcaInfo>{}) {
    desc += (desc.empty() ? "" : ", ") + h.name + " numa" + std::to_string(h.numa_node);
  }
  std::printf("             %s: [%s]\n", podenv::kHcas, desc.c_str());
}

void NodeDemo::AllocatePods() {
  Heading(3, "Pods ask for rdma/hca; the kubelet allocates NUMA-local HCAs");
  for (int p = 0; p < o_.pods; ++p) {
    Pod pod{.name = "trainer-" + std::to_string(p)};
    pod.path = node_->AddPod(pod.name);
    Allocate(pod, free_ids_);
    pods_.push_back(std::move(pod));
  }
}

void NodeDemo::Attach(Pod& pod, int rail) {
  auto i = static_cast<size_t>(rail - 1);
  std::string id = i < pod.ids.size() ? pod.ids[i] : "";
  json conf = json::parse(RailConfig(rail));
  if (!id.empty()) conf["runtimeConfig"] = {{"deviceID", id}};
  CniCall call{"ADD",       pod.name + "-sandbox", pod.path, "net" + std::to_string(rail),
               conf.dump(), o_.cni_plugins};
  auto t0 = std::chrono::steady_clock::now();
  auto r = node_->Run(o_.rdma_bin, call);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (r.exit_code != 0) return fail_("ADD " + pod.name + "/" + call.ifname + ": " + r.out + r.err);
  auto res = json::parse(r.out, nullptr, false);
  std::string mac = res.is_discarded() ? "" : res["interfaces"][0].value("mac", "");
  Attachment a{.rail = rail, .call = call};
  a.cidr = res.is_discarded() || res["ips"].empty() ? "" : res["ips"][0].value("address", "");
  for (size_t h = 0; h < netdevs_.size(); ++h) {
    if (before_[netdevs_[h]].mac == mac) {
      a.hca = hcas_[h].name;
      a.netdev = netdevs_[h];
    }
  }
  std::printf("  %s %-5s deviceID %-9s <- %-6s (%s)  %-13s %.1f ms\n", pod.name.c_str(),
              call.ifname.c_str(), id.c_str(), a.hca.c_str(), a.netdev.c_str(), a.cidr.c_str(), ms);
  if (!id.empty() && a.hca != id.substr(0, id.find('-'))) {
    fail_(pod.name + "/" + call.ifname + " got " + a.hca + ", not the allocated " + id);
  }
  if (a.cidr.empty()) fail_(pod.name + "/" + call.ifname + ": the result lists no IPAM address");
  pod.attachments.push_back(a);
}

void NodeDemo::AttachRails() {
  Heading(4, "Multus delivers one RoCE NAD per rail to `rdma` for every attachment (CNI ADD)");
  std::printf("  spec.config of rail 1: %s\n", RailConfig(1).c_str());
  std::printf(
      "  (the seed's NAD plus host-local IPAM, a subnet per rail; annotated\n"
      "   k8s.v1.cni.cncf.io/resourceName: rdma/hca, so each attachment carries one\n"
      "   allocated device ID in runtimeConfig.deviceID)\n");
  int per_pod = static_cast<int>(netdevs_.size()) / o_.pods;
  for (auto& pod : pods_) {
    for (int rail = 1; rail <= per_pod; ++rail) Attach(pod, rail);
  }
}

void NodeDemo::ShowPods() {
  Heading(5, "Inside the pods (read over rtnetlink from each pod's namespace)");
  for (const auto& pod : pods_) {
    auto ns = node_->Pod(pod.path);
    auto links = node_->links().List(ns);
    if (!links) {
      fail_("list links in " + pod.name);
      continue;
    }
    for (const auto& l : *links) {
      if (l.name == "lo") continue;
      std::string addrs;
      auto list = node_->addrs().ListAddresses(ns, l.ifindex);
      for (const auto& a : list ? *list : std::vector<link::IpPrefix>{}) {
        if (a.family == 4) addrs += (addrs.empty() ? "" : ",") + a.Cidr();
      }
      std::printf("  %s  %-5s mtu %-5u %-4s %-14s mac %s\n", pod.name.c_str(), l.name.c_str(),
                  l.mtu, l.admin_up ? "UP" : "DOWN", addrs.c_str(), l.mac.c_str());
      if (l.mtu != 9000 || !l.admin_up)
        fail_(l.name + " in " + pod.name + " is not mtu 9000 and up");
      if (addrs.empty()) fail_(l.name + " in " + pod.name + " has no IPv4 address");
    }
  }
  size_t home = 0;
  for (const auto& nd : netdevs_) home += node_->links().GetByName(node_->node(), nd) ? 1u : 0u;
  std::printf("  node namespace now holds %zu of its %zu HCA netdevs\n", home, netdevs_.size());
}

void NodeDemo::Validate() {
  Heading(6, "rdma-validate in each pod: inventory, then NCCL across the pods where a GPU is");
  for (const auto& pod : pods_) {
    std::printf("  %s:\n", pod.name.c_str());
    int rc = RunShown(node_->Pod(pod.path),
                      {o_.validate_bin, "--inventory-only", "--termination-log", "/nonexistent"},
                      FixtureEnv(&pod), Dir("validate-" + pod.name + ".txt"));
    if (rc != 0) fail_("rdma-validate in " + pod.name + " exited " + std::to_string(rc));
  }
  int gpus = CountGpus();
  if (o_.nccl == "off" || (o_.nccl == "auto" && gpus == 0)) {
    std::printf(
        "  NCCL AllReduce: skipped (%s; it needs a GPU and rdma-validate built with NCCL)\n",
        o_.nccl == "off" ? "--nccl off" : "no GPU here");
    return;
  }
  RunNccl();
}

std::string NodeDemo::CableRails() {
  // One switch per rail: net<i> of every pod on bridge rail<i>, in rail i's subnet. NCCL's Socket
  // transport uses each interface as its own network device, and each interface's counters show
  // what it carried: the stand-in for IB HCAs on a GPU machine.
  std::map<int, std::vector<std::string>> rails;
  for (const auto& pod : pods_) {
    for (const auto& a : pod.attachments) rails[a.rail].push_back(a.netdev);
    auto ns = node_->Pod(pod.path);
    if (auto lo = node_->links().GetByName(ns, "lo"))
      (void)node_->links().Change(ns, lo->ifindex, {.up = true});
  }
  std::string expect;
  for (const auto& [rail, devs] : rails) {
    expect += (expect.empty() ? "net" : ",net") + std::to_string(rail);
    if (auto c = node_->Connect("rail" + std::to_string(rail), devs); !c) {
      fail_("cable rail " + std::to_string(rail) + ": " + c.error().message());
    }
  }
  return expect;
}

std::vector<std::string> NodeDemo::RankArgs(int rank, const std::string& expect,
                                            const std::string& root_ip,
                                            const std::string& out) const {
  std::string r = std::to_string(rank);
  // clang-format off
  return {o_.validate_bin, "--mode", "multi-pod", "--transport", "socket", "--expect", expect,
          "--rank", r, "--world-size", std::to_string(o_.pods), "--comm-id", root_ip + ":29500",
          "--size", "64M", "--iters", "20", "--timeout", "60",
          "--json", out + "/rank" + r + ".json", "--log-dir", out + "/logs" + r,
          "--termination-log", "/nonexistent"};
  // clang-format on
}

void NodeDemo::RunNccl() {
  std::string expect = CableRails();
  int gpus = std::max(1, CountGpus());
  std::string root_ip = pods_[0].attachments.empty() ? "" : pods_[0].attachments[0].cidr;
  root_ip = root_ip.substr(0, root_ip.find('/'));
  std::printf("  cabling: net<i> of every pod on switch rail<i>; rank 0 bootstraps at %s:29500\n",
              root_ip.c_str());
  if (gpus < o_.pods) {
    std::printf(
        "  GPUs shared: %d pods on %d GPU(s) (pod p uses GPU p mod %d); each rank's own "
        "NCCL_HOSTID keeps their traffic on the network\n",
        o_.pods, gpus, gpus);
  }
  std::string out = Dir("nccl");
  (void)MakeDirs(out);
  std::vector<pid_t> ranks;
  for (int p = 0; p < o_.pods; ++p) {
    std::string r = std::to_string(p);
    (void)MakeDirs(out + "/logs" + r);
    std::vector<std::string> args = RankArgs(p, expect, root_ip, out);
    auto env = ToolEnv({"CUDA_VISIBLE_DEVICES=" + std::to_string(p % gpus)});
    ranks.push_back(Start(node_->Pod(pods_[static_cast<size_t>(p)].path), args, env,
                          out + "/rank" + r + ".txt"));
  }
  for (int p = 0; p < o_.pods; ++p) {
    int rc = Wait(ranks[static_cast<size_t>(p)]);
    if (rc != 0)
      fail_("NCCL validation in trainer-" + std::to_string(p) + ": exit " + std::to_string(rc));
  }
  ShowNcclReports(out);
}

void NodeDemo::ShowNcclReports(const std::string& out) {
  for (int p = 0; p < o_.pods; ++p) {
    std::string r = std::to_string(p);
    auto text = ReadFile(out + "/rank" + r + ".json");
    json rep = text ? json::parse(*text, nullptr, false) : json();
    bool ok = rep.is_object() && rep.value("verdict", "") == "pass";
    std::printf("  trainer-%d rank %d: %s", p, p,
                rep.is_object() ? rep.value("verdict", "?").c_str() : "no report");
    if (rep.is_object() && rep.contains("collective")) {
      std::printf(", AllReduce busbw %.2f GB/s\n", rep["collective"].value("busbwGBps", 0.0));
      for (const auto& d : rep["devices"]) {
        std::printf("    %-5s %s by NCCL, %s, share %.1f%%\n", d.value("name", "?").c_str(),
                    d.value("chosenByNccl", false) ? "chosen" : "NOT chosen",
                    d.value("carriedTraffic", false) ? "carried traffic" : "CARRIED NOTHING",
                    100.0 * d.value("share", 0.0));
      }
    } else {
      std::printf("\n");
    }
    if (ok) continue;
    // What went wrong: the validator's own report and the end of NCCL's log.
    auto txt = ReadFile(out + "/rank" + r + ".txt");
    std::printf("%s", txt ? txt->c_str() : "");
    if (auto log = ReadFile(out + "/logs" + r + "/nccl.rank" + r + ".log")) {
      std::printf("    ... NCCL log:\n%s\n",
                  log->substr(log->size() > 3000 ? log->size() - 3000 : 0).c_str());
    }
    fail_("NCCL validation in trainer-" + r + " did not pass");
  }
}

void NodeDemo::DoctorNode(const std::string& dpdir) {
  std::printf(
      "  rdma-doctor node (the fixture's ens4f0np0 has ECN off on purpose; veths have no "
      "DCB, so PFC is unknown):\n");
  std::vector<std::string> args = {o_.doctor_bin,         "--state-dir",      node_->state_dir(),
                                   "--device-plugin-dir", dpdir + "/plugins", "node"};
  (void)RunShown(node_->node(), args, FixtureEnv(nullptr), Dir("doctor-node.txt"));
  args.insert(args.begin() + 1, "--json");
  (void)Wait(Start(node_->node(), args, FixtureEnv(nullptr), Dir("doctor-node.json")));
  auto text = ReadFile(Dir("doctor-node.json"));
  json doc = text ? json::parse(*text, nullptr, false) : json();
  if (!doc.is_object()) return fail_("rdma-doctor node --json gave no report");
  bool named = false;
  for (const auto& f : doc["findings"]) {
    bool expected = f.value("check", "") == "lossless: ECN" &&
                    f.value("message", "").rfind("ens4f0np0:", 0) == 0;
    named = named || (expected && f.value("status", "") == "FAIL");
    if (f.value("status", "") == "FAIL" && !expected) {
      fail_("rdma-doctor node: " + f.value("check", "") + ": " + f.value("message", ""));
    }
  }
  if (!named) fail_("rdma-doctor node did not name ens4f0np0's missing ECN");
}

void NodeDemo::DoctorPod() {
  // The kernel derives each RoCE port's GIDs from its netdev's addresses; the fixture cannot, so
  // the demo writes trainer-0's view of sysfs with the GIDs its IPAM addresses give.
  const Pod& pod = pods_.front();
  std::vector<sim::PodAttachment> view;
  for (const auto& a : pod.attachments) {
    view.push_back(
        {.hca = a.hca, .ifname = a.call.ifname, .ipv4 = a.cidr.substr(0, a.cidr.find('/'))});
  }
  std::string sysfs = Dir("sysfs-" + pod.name);
  if (auto w = sim::WritePodView(o_.fixture, sysfs, view); !w) return fail_(w.error().message());
  std::printf("  rdma-doctor pod (%s: its addresses, and the GID table they give):\n",
              pod.name.c_str());
  std::vector<std::string> env = ToolEnv({"KUBERDMA_SYSFS_ROOT=" + sysfs, "NCCL_SOCKET_IFNAME=net1",
                                          "NCCL_IB_TIMEOUT=22", "NCCL_IB_RETRY_CNT=7"});
  for (const auto& [k, v] : pod.env) env.push_back(k + "=" + v);
  if (RunShown(node_->Pod(pod.path), {o_.doctor_bin, "pod"}, env, Dir("doctor-pod.txt")) != 0) {
    fail_("rdma-doctor pod found a failure");
  }
}

void NodeDemo::Doctor() {
  Heading(7, "rdma-doctor on the node, in trainer-0, and the GPU-HCA topology seen from it");
  DoctorNode(Dir("kubelet"));
  DoctorPod();
  std::printf("  rdma-doctor topo (trainer-0):\n");
  // trainer-0 holds the node's first GPUs (NUMA 0), as its allocation of HCAs does.
  auto gpus = sysfs::DiscoverGpus(root_);
  std::string mine;
  for (size_t i = 0; gpus && i < gpus->size() / static_cast<size_t>(o_.pods); ++i) {
    mine += (mine.empty() ? "" : ",") + (*gpus)[i].address;
  }
  if (RunShown(node_->Pod(pods_[0].path), {o_.doctor_bin, "topo", "--gpus", mine},
               FixtureEnv(&pods_.front()), Dir("doctor-topo.txt")) != 0) {
    fail_("rdma-doctor topo found a failure");
  }
}

void NodeDemo::CheckAll() {
  Heading(8, "CNI CHECK of every attachment (IPAM's addresses on the interface, host-local asked)");
  size_t total = 0;
  for (const auto& pod : pods_) {
    for (auto c : pod.attachments) {
      ++total;
      c.call.command = "CHECK";
      json conf = json::parse(c.call.config);
      conf["cniVersion"] = "1.0.0";  // CHECK exists from 0.4.0 on
      c.call.config = conf.dump();
      auto r = node_->Run(o_.rdma_bin, c.call);
      if (r.exit_code == 0) {
        ++checked_;
      } else {
        fail_("CHECK " + pod.name + "/" + c.call.ifname + ": " + r.out);
      }
    }
  }
  std::printf("  %d of %zu attachments verified\n", checked_, total);
}

// Addresses host-local still holds for the demo's rails (one file per address in its store).
size_t HeldAddresses(const std::string& dir) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& net : fs::directory_iterator(dir, ec)) {
    for (const auto& e : fs::directory_iterator(net.path(), ec)) {
      n += link::ParseAddress(e.path().filename().string()) ? 1u : 0u;
    }
  }
  return n;
}

void NodeDemo::DetachAll() {
  Heading(9, "Pods deleted: CNI DEL gives every device and address back; the plugin stops");
  for (auto pod = pods_.rbegin(); pod != pods_.rend(); ++pod) {
    for (auto a = pod->attachments.rbegin(); a != pod->attachments.rend(); ++a) {
      CniCall c = a->call;
      c.command = "DEL";
      auto r = node_->Run(o_.rdma_bin, c);
      if (r.exit_code != 0) fail_("DEL " + pod->name + "/" + c.ifname + ": " + r.out);
    }
  }
  for (const auto& [name, was] : before_) {
    auto now = node_->links().GetByName(node_->node(), name);
    bool same = now && now->mac == was.mac && now->mtu == was.mtu && now->admin_up == was.admin_up;
    std::printf("  %-12s %s\n", name.c_str(),
                same ? "home: name, MAC, MTU and admin state as before" : "NOT RESTORED");
    if (same) {
      ++restored_;
    } else {
      fail_(name + " not restored");
    }
  }
  size_t held = HeldAddresses(Dir("ipam"));
  std::printf("  host-local holds %zu address(es) after DEL\n", held);
  if (held != 0) fail_("host-local still holds " + std::to_string(held) + " address(es)");
}

void NodeDemo::StopDevicePlugin() {
  ::kill(plugin_, SIGTERM);
  int rc = Wait(plugin_);
  bool clean = rc == 0 && !fs::exists(Dir("kubelet/plugins/kuberdma-rdma-hca.sock"));
  std::printf("  rdma-device-plugin: SIGTERM -> %s\n",
              clean ? "exit 0, sockets removed" : "DID NOT STOP CLEANLY");
  if (!clean) fail_("device plugin did not stop cleanly");
  kubelet_->Stop();
}

int NodeDemo::Run() {
  std::printf("kube-rdma node-in-a-box demo\n");
  if (!ShowNode()) return 2;
  StartDevicePlugin();
  AllocatePods();
  AttachRails();
  ShowPods();
  Validate();
  Doctor();
  CheckAll();
  DetachAll();
  StopDevicePlugin();
  size_t attached = 0;
  for (const auto& p : pods_) attached += p.attachments.size();
  std::printf(
      "\nSummary: %zu attachments across %d pods, %d checked, %d of %zu devices restored, "
      "every address released.\n",
      attached, o_.pods, checked_, restored_, before_.size());
  std::printf("Verdict: %s\n", fail_.count() == 0 ? "PASS" : "FAIL");
  return fail_.count() == 0 ? 0 : 1;
}

}  // namespace

int RunNodeDemo(const Options& o) { return NodeDemo(o).Run(); }

}  // namespace kuberdma::demo
