// SPDX-License-Identifier: Apache-2.0
// The two-node demo (`kuberdma-demo --cluster 2`, run by `make demo`): the rendered chart as a
// cluster runs it on two simulated nodes whose rail netdevs are cabled to one leaf bridge per
// rail. Each node gets the node config the DaemonSet writes, its own rdma-device-plugin and
// kubelet stand-in; the trainer's pods are spread one per node, allocated by the kubelet, attached
// through the Multus stand-in in the kubelet's own order. Every rail interface must be on the HCA
// of its physical rail with the node's own rail address (routed rails), no address or GID may
// repeat in the cluster, each pod must reach its peer over every rail, and DEL must give every
// node its rails back with their addresses.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "demo.h"
#include "kuberdma/base/files.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/cni/state.h"
#include "kuberdma/sim/manifests.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/standins/kubelet.h"
#include "kuberdma/standins/multus.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/testing/test_net.h"

namespace kuberdma::demo {
namespace {

using nlohmann::json;
using sim::CniCall;
using sim::SimNode;

struct Node {
  int index = 0;     // 1-based
  std::string name;  // "node-1"
  std::unique_ptr<SimNode> sim;
  std::unique_ptr<standins::KubeletStandIn> kubelet;
  pid_t plugin = -1;
  std::string dpdir;
  standins::MultusPod pod;
  std::string netns;
  std::vector<CniCall> adds;
};

// The address node `n` has on rail `r`, as the fabric's provisioning gives it.
std::string RailAddress(int rail, int node) {
  return "10.10." + std::to_string(rail) + "." + std::to_string(node);
}

// The RoCE v2 GID the kernel derives from an IPv4 address (IPv4-mapped).
std::string GidOf(const std::string& ip) {
  in_addr a{};
  if (::inet_pton(AF_INET, ip.c_str(), &a) != 1) return "";
  uint32_t v = ntohl(a.s_addr);
  char buf[64];
  std::snprintf(buf, sizeof buf, "0000:0000:0000:0000:0000:ffff:%04x:%04x", v >> 16, v & 0xffff);
  return buf;
}

// A UDP socket bound to `ip`:`port` in `ns`.
Result<UniqueFd> BoundSocket(const netns::NetNs& ns, const std::string& ip, uint16_t port) {
  int fd = -1;
  KUBERDMA_TRY(ns.RunIn([&] { fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0); }));
  UniqueFd sock(fd);
  sockaddr_in sa{.sin_family = AF_INET, .sin_port = htons(port)};
  ::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    return Fail(ErrorCode::kIo, "bind " + ip + " in " + ns.path(), errno);
  }
  return sock;
}

// One datagram from `from` to `to`'s port; true when it arrives within a second.
bool Deliver(int from, int to, const std::string& to_ip, uint16_t port, const std::string& text) {
  sockaddr_in sa{.sin_family = AF_INET, .sin_port = htons(port)};
  ::inet_pton(AF_INET, to_ip.c_str(), &sa.sin_addr);
  if (::sendto(from, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa) <
      0) {
    return false;
  }
  pollfd p{.fd = to, .events = POLLIN};
  if (::poll(&p, 1, 1000) != 1) return false;
  char buf[64];
  ssize_t n = ::recv(to, buf, sizeof buf, 0);
  return n == static_cast<ssize_t>(text.size()) && std::string(buf, static_cast<size_t>(n)) == text;
}

// Pod A reaches pod B over the rail's own addresses, and B answers.
bool Echo(const netns::NetNs& a, const std::string& ip_a, const netns::NetNs& b,
          const std::string& ip_b) {
  constexpr uint16_t kPort = 7471;
  auto sa = BoundSocket(a, ip_a, kPort);
  auto sb = BoundSocket(b, ip_b, kPort);
  if (!sa || !sb) return false;
  return Deliver(sa->get(), sb->get(), ip_b, kPort, "ping " + ip_a) &&
         Deliver(sb->get(), sa->get(), ip_a, kPort, "pong " + ip_b);
}

class ClusterDemo {
 public:
  explicit ClusterDemo(const Options& o) : o_(o) {}
  ~ClusterDemo();
  int Run();

 private:
  bool LoadObjects();
  bool BuildLeaves();
  bool BuildNode(Node& n);
  bool Cable(Node& n);
  void StartDevicePlugin(Node& n);
  void Schedule(Node& n, int replica);
  void Attach(Node& n);
  void CheckRails();
  void CheckUnique();
  void CheckReach();
  void Detach(Node& n);

  const Options& o_;
  Failures fail_;
  sim::Rendered rendered_;
  sim::Workload workload_;
  std::vector<sim::Nad> nads_;
  std::string resource_;
  int per_pod_ = 0;
  std::vector<std::string> rails_;  // the declared rails: rail r is rails_[r-1]
  std::string leaf_name_;
  std::optional<netns::NetNs> leaf_;
  link::NetlinkLinkOps links_;
  testing::TestNet net_{links_};
  std::vector<Node> nodes_;
  // rail -> node -> (address, HCA) each pod's rail interface got.
  std::map<int, std::map<int, std::pair<std::string, std::string>>> got_;
};

ClusterDemo::~ClusterDemo() {
  for (auto& n : nodes_) {
    if (n.plugin > 0) {
      ::kill(n.plugin, SIGTERM);
      (void)Wait(n.plugin);
    }
    n.kubelet.reset();
    n.sim.reset();
  }
  if (!leaf_name_.empty()) (void)testing::DeleteNamed(leaf_name_);
}

bool ClusterDemo::LoadObjects() {
  Heading(2, "The objects a cluster is given, from " + o_.manifests);
  auto r = sim::LoadRendered(o_.manifests);
  if (!r) return fail_(r.error().message()), false;
  rendered_ = std::move(*r);
  std::printf("  objects: %s\n", rendered_.Summary().c_str());
  for (const auto& w : rendered_.Workloads()) {
    if (!w.networks.empty()) workload_ = w;
  }
  nads_ = rendered_.Nads();
  for (const auto& n : nads_) {
    if (!n.resource.empty()) resource_ = n.resource;
  }
  auto node_json = rendered_.ConfigMapData("node.json");
  auto limit = workload_.main.limits.find(resource_);
  if (!node_json || workload_.name.empty() || limit == workload_.main.limits.end()) {
    return fail_(o_.manifests +
                 " has no node config, or no pod template asking for its NADs' "
                 "resource (render ci/demo-cluster-values.yaml)"),
           false;
  }
  per_pod_ = static_cast<int>(limit->second);
  auto doc = json::parse(*node_json, nullptr, false);
  if (doc.is_object() && doc["rails"].is_array())
    rails_ = doc["rails"].get<std::vector<std::string>>();
  if (rails_.empty()) return fail_("the rendered node config declares no rails"), false;
  std::printf("  runs: %s, %d replicas, one per node, %d %s each\n", workload_.Describe().c_str(),
              workload_.replicas, per_pod_, resource_.c_str());
  std::printf("  declared rails (nodeConfig.rails): ");
  for (size_t i = 0; i < rails_.size(); ++i) {
    std::printf("%s%zu=%s", i > 0 ? " " : "", i + 1, rails_[i].c_str());
  }
  std::printf("\n");
  return true;
}

bool ClusterDemo::BuildLeaves() {
  leaf_name_ = "krt-" + std::to_string(::getpid()) + "-leaves";
  auto ns = testing::CreateNamed(leaf_name_);
  if (!ns) return fail_(ns.error().message()), false;
  leaf_ = std::move(*ns);
  for (size_t r = 1; r <= rails_.size(); ++r) {
    std::string bridge = "rail" + std::to_string(r);
    auto made = net_.CreateLink(*leaf_, bridge, "bridge");
    auto l = made ? links_.GetByName(*leaf_, bridge) : Result<link::LinkInfo>(Fail(made.error()));
    if (!l || !links_.Change(*leaf_, l->ifindex, {.mtu = 9216, .up = true})) {
      return fail_("leaf " + bridge + ": " + (l ? "cannot bring it up" : l.error().message())),
             false;
    }
  }
  std::printf("  one leaf switch per rail: bridges rail1..rail%zu in %s\n", rails_.size(),
              leaf_name_.c_str());
  return true;
}

// Cables node `n`'s rail r netdev to leaf r, and gives it the node's rail address, as the
// fabric's provisioning does on a routed rail-optimised cluster.
bool ClusterDemo::Cable(Node& n) {
  for (size_t r = 1; r <= rails_.size(); ++r) {
    const std::string& netdev = rails_[r - 1];
    auto it = std::find(n.sim->netdevs().begin(), n.sim->netdevs().end(), netdev);
    if (it == n.sim->netdevs().end()) return fail_(netdev + " is no netdev of the fixture"), false;
    std::string port = "sw" + std::to_string(it - n.sim->netdevs().begin());
    std::string leaf_port = "n" + std::to_string(n.index) + "r" + std::to_string(r);
    auto p = links_.GetByName(n.sim->fabric(), port);
    auto moved = p ? links_.MoveTo(n.sim->fabric(), p->ifindex, *leaf_,
                                   {.name = leaf_port, .mtu = 9216, .up = true})
                   : Result<void>(Fail(p.error()));
    if (moved) moved = net_.SetMaster(*leaf_, leaf_port, "rail" + std::to_string(r));
    auto dev = links_.GetByName(n.sim->node(), netdev);
    if (moved && dev) {
      moved = n.sim->addrs().AddAddress(
          n.sim->node(), dev->ifindex,
          {.family = 4, .address = RailAddress(static_cast<int>(r), n.index), .prefix_len = 24});
    }
    if (!moved || !dev) return fail_("cable " + n.name + " " + netdev), false;
  }
  return true;
}

bool ClusterDemo::BuildNode(Node& n) {
  n.name = "node-" + std::to_string(n.index);
  std::vector<std::string> netdevs;
  auto hcas = sysfs::DiscoverHcas(sysfs::SysfsRoot(o_.fixture), sysfs::HcaDetail::kIdentity);
  for (const auto& h : hcas ? *hcas : std::vector<sysfs::Hca>{}) {
    if (!h.netdevs.empty()) netdevs.push_back(h.netdevs.front());
  }
  n.sim = std::make_unique<SimNode>(o_.fixture, netdevs);
  if (!Cable(n)) return false;
  // What the DaemonSet's install step writes on the host: the node config resolved for the node.
  std::string cfg_dir = n.sim->state_dir() + "/configmap";
  (void)MakeDirs(cfg_dir);
  (void)WriteFileAtomic(cfg_dir + "/node.json", *rendered_.ConfigMapData("node.json"));
  (void)WriteFileAtomic(cfg_dir + "/device-plugin.json",
                        *rendered_.ConfigMapData("device-plugin.json"));
  std::printf("  %s: %s; rail addresses 10.10.<rail>.%d/24 on its rail netdevs\n", n.name.c_str(),
              n.sim->node().path().c_str(), n.index);
  int rc = RunShown(
      n.sim->node(),
      {o_.device_plugin_bin, "--config", cfg_dir + "/device-plugin.json", "--node-config",
       cfg_dir + "/node.json", "--node-name", n.name, "--node-ip",
       "192.0.2." + std::to_string(n.index), "--write-node-config", n.sim->node_config_path()},
      ToolEnv({}), n.sim->state_dir() + "/write-node-config.log");
  if (rc != 0) return fail_(n.name + ": --write-node-config exited " + std::to_string(rc)), false;
  StartDevicePlugin(n);
  return true;
}

void ClusterDemo::StartDevicePlugin(Node& n) {
  n.dpdir = n.sim->state_dir() + "/kubelet";
  (void)MakeDirs(n.dpdir + "/plugins");
  n.kubelet = std::make_unique<standins::KubeletStandIn>(n.dpdir + "/plugins");
  std::string cfg_dir = n.sim->state_dir() + "/configmap";
  n.plugin = Start(n.sim->node(),
                   {o_.device_plugin_bin, "--config", cfg_dir + "/device-plugin.json",
                    "--device-plugin-dir", n.dpdir + "/plugins", "--sysfs-root", o_.fixture,
                    "--metrics-port", "-1", "--node-config", cfg_dir + "/node.json", "--node-name",
                    n.name, "--node-ip", "192.0.2." + std::to_string(n.index), "--allocations-dir",
                    n.sim->allocations_dir(), "--pod-resources", n.kubelet->pod_resources_socket()},
                   ToolEnv({}), n.dpdir + "/device-plugin.log");
  bool up = n.kubelet->WaitFor([&] { return !n.kubelet->Lists(resource_).empty(); },
                               std::chrono::milliseconds(10000));
  if (!up) fail_(n.name + ": the device plugin did not register " + resource_);
}

void ClusterDemo::Schedule(Node& n, int replica) {
  std::vector<std::string> free;
  if (!n.kubelet->Lists(resource_).empty()) {
    for (const auto& d : n.kubelet->Lists(resource_).back().devices()) {
      if (d.health() == "Healthy") free.push_back(d.id());
    }
  }
  auto ids = n.kubelet->Preferred(resource_, free, per_pod_);
  auto alloc = ids ? n.kubelet->Allocate(resource_, *ids)
                   : Result<deviceplugin::ContainerAllocation>(Fail(ids.error()));
  if (!alloc) return fail_(n.name + ": allocate: " + alloc.error().message());
  n.kubelet->AssignPod(workload_.ns, workload_.name + "-" + std::to_string(replica), resource_,
                       *ids);
  n.pod = {.ns = workload_.ns,
           .name = workload_.name + "-" + std::to_string(replica),
           .uid = "uid-" + std::to_string(replica),
           .sandbox = "c1a55" + std::to_string(replica)};
  auto nets = standins::ParseNetworksAnnotation(workload_.networks);
  if (nets) n.pod.networks = *nets;
  // The kubelet lists a pod's devices in its own order, not the rails': rotated by three here.
  std::vector<std::string> listed = *ids;
  std::rotate(listed.begin(), listed.begin() + std::min<long>(3, long(listed.size())),
              listed.end());
  n.pod.allocated[resource_] = listed;
  n.netns = n.sim->AddPod(n.pod.name);
  std::printf("  %s on %s: %s allocated, in the kubelet's order: %s ...\n", n.pod.name.c_str(),
              n.name.c_str(), resource_.c_str(), n.pod.allocated[resource_].front().c_str());
}

void ClusterDemo::Attach(Node& n) {
  auto adds = standins::MultusAdds(n.pod, nads_, n.netns, {{"stateDir", n.sim->state_dir()}});
  if (!adds) return fail_(n.pod.name + ": " + adds.error().message());
  n.adds = *adds;
  for (auto& call : n.adds) {
    call.cni_path = o_.cni_plugins;
    auto r = n.sim->Run(o_.rdma_bin, call);
    if (r.exit_code != 0) return fail_(n.pod.name + " " + call.ifname + ": " + r.out + r.err);
    json conf = json::parse(call.config);
    auto rec =
        cni::StateStore(n.sim->state_dir()).Load(conf["name"], call.container_id, call.ifname);
    json result = json::parse(r.out, nullptr, false);
    std::string ip = result.is_object() && !result["ips"].empty()
                         ? result["ips"][0]["address"].get<std::string>()
                         : "";
    ip = ip.substr(0, ip.find('/'));
    got_[conf.value("rail", 0)][n.index] = {ip, rec && *rec ? (*rec)->hca : ""};
    std::printf("    %s %-5s given %-9s rail %d: %s (%s)  %s\n", n.pod.name.c_str(),
                call.ifname.c_str(), conf.value("deviceID", "").c_str(), conf.value("rail", 0),
                got_[conf.value("rail", 0)][n.index].second.c_str(),
                rails_.at(static_cast<size_t>(conf.value("rail", 1) - 1)).c_str(), ip.c_str());
  }
}

void ClusterDemo::CheckRails() {
  auto hcas = sysfs::DiscoverHcas(sysfs::SysfsRoot(o_.fixture), sysfs::HcaDetail::kIdentity);
  std::map<std::string, std::string> hca_of;  // netdev -> HCA
  for (const auto& h : hcas ? *hcas : std::vector<sysfs::Hca>{}) {
    for (const auto& nd : h.netdevs) hca_of[nd] = h.name;
  }
  for (size_t r = 1; r <= rails_.size(); ++r) {
    for (const auto& n : nodes_) {
      auto [ip, hca] = got_[static_cast<int>(r)][n.index];
      if (hca != hca_of[rails_[r - 1]] || ip != RailAddress(static_cast<int>(r), n.index)) {
        fail_(n.name + " rail " + std::to_string(r) + ": got " + hca + " " + ip + ", want " +
              hca_of[rails_[r - 1]] + " " + RailAddress(static_cast<int>(r), n.index));
      }
    }
  }
}

void ClusterDemo::CheckUnique() {
  std::set<std::string> ips;
  std::set<std::string> gids;
  size_t total = 0;
  for (const auto& [rail, by_node] : got_) {
    for (const auto& [node, what] : by_node) {
      ++total;
      ips.insert(what.first);
      gids.insert(GidOf(what.first));
    }
  }
  std::printf("  %zu rail interfaces, %zu distinct addresses, %zu distinct RoCE v2 GIDs\n", total,
              ips.size(), gids.size());
  if (ips.size() != total || gids.size() != total) fail_("an address or GID repeats");
}

void ClusterDemo::CheckReach() {
  const Node& a = nodes_[0];
  const Node& b = nodes_[1];
  for (size_t r = 1; r <= rails_.size(); ++r) {
    std::string ip_a = got_[static_cast<int>(r)][a.index].first;
    std::string ip_b = got_[static_cast<int>(r)][b.index].first;
    bool ok = Echo(a.sim->Pod(a.netns), ip_a, b.sim->Pod(b.netns), ip_b);
    std::printf("  rail %zu: %s (%s) <-> %s (%s) over leaf rail%zu: %s\n", r, ip_a.c_str(),
                a.pod.name.c_str(), ip_b.c_str(), b.pod.name.c_str(), r, ok ? "ok" : "NO ANSWER");
    if (!ok) fail_("rail " + std::to_string(r) + ": the pods do not reach each other");
  }
}

void ClusterDemo::Detach(Node& n) {
  for (auto call : standins::MultusDels(n.adds)) {
    call.cni_path = o_.cni_plugins;
    auto r = n.sim->Run(o_.rdma_bin, call);
    if (r.exit_code != 0) fail_(n.pod.name + " DEL " + call.ifname + ": " + r.out + r.err);
  }
  for (size_t r = 1; r <= rails_.size(); ++r) {
    auto l = links_.GetByName(n.sim->node(), rails_[r - 1]);
    auto addrs = l ? n.sim->addrs().ListAddresses(n.sim->node(), l->ifindex)
                   : Result<std::vector<link::IpPrefix>>(Fail(l.error()));
    bool back = addrs && std::any_of(addrs->begin(), addrs->end(), [&](const link::IpPrefix& p) {
                  return p.address == RailAddress(static_cast<int>(r), n.index);
                });
    if (!back) fail_(n.name + ": " + rails_[r - 1] + " did not come back with its rail address");
  }
  auto left = cni::StateStore(n.sim->state_dir()).List();
  if (!left || !left->empty()) fail_(n.name + ": CNI records left after DEL");
}

int ClusterDemo::Run() {
  Heading(1, "Two nodes, a leaf switch per rail: the rendered chart as a cluster runs it");
  if (!LoadObjects() || !BuildLeaves()) return 1;
  Heading(3,
          "Each node: its rails cabled, the node config the DaemonSet writes, the device plugin");
  nodes_.resize(2);
  for (int i = 0; i < 2; ++i) {
    nodes_[static_cast<size_t>(i)].index = i + 1;
    if (!BuildNode(nodes_[static_cast<size_t>(i)])) return 1;
  }
  Heading(4, "One trainer pod per node, attached through the Multus stand-in");
  for (int i = 0; i < 2; ++i) Schedule(nodes_[static_cast<size_t>(i)], i);
  for (auto& n : nodes_) Attach(n);
  if (fail_.count() == 0) {
    Heading(5, "Every rail on its physical rail's HCA, with the node's own rail address");
    CheckRails();
    CheckUnique();
    Heading(6, "Each pod reaches its peer on the other node over every rail");
    CheckReach();
  }
  std::printf(
      "  NCCL across the nodes: not run by this demo (the single-node demo runs NCCL "
      "where there is a GPU)\n");
  Heading(7, "DEL: every rail back on its node, with its address");
  for (auto& n : nodes_) Detach(n);
  std::printf("\n%s: %d failure(s)\n",
              fail_.count() == 0 ? "CLUSTER DEMO PASSED" : "CLUSTER DEMO FAILED", fail_.count());
  return fail_.count() == 0 ? 0 : 1;
}

}  // namespace

int RunClusterDemo(const Options& o) {
  ClusterDemo demo(o);
  return demo.Run();
}

}  // namespace kuberdma::demo
