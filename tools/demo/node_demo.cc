// SPDX-License-Identifier: Apache-2.0
// The node-in-a-box demo: a simulated 8-GPU node whose eight ConnectX-7 netdevs are real veths,
// running the objects a cluster is given, read from a rendering of the chart (`make demo`:
// deploy/render.sh, ci/demo-values.yaml; --manifests for any other): the ConfigMap's device
// plugin config (rdma-device-plugin registered with a kubelet stand-in that allocates HCAs for
// what the pod template asks), the NADs and the pod template's networks annotation turned into
// CNI calls by the Multus stand-in, after the cluster network's eth0 (Debian's bridge plugin);
// the pods' interfaces and addresses; rdma-validate in each pod with the init container's
// environment (inventory always; where there is a GPU, an NCCL AllReduce across the pods over
// their IPAM addresses, proven from every interface's counters); rdma-doctor on the node and in a
// pod (GID table, RoCE checks); CHECK; then DEL, the plugin stopped, and proof that every device
// and every address came home. Exits non-zero on any failure; leaves nothing behind.
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
#include <sstream>

#include "demo.h"
#include "kuberdma/base/files.h"
#include "kuberdma/cni/state.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/contract/slot_id.h"
#include "kuberdma/dra/prepare.h"
#include "kuberdma/sim/host_local.h"
#include "kuberdma/sim/manifests.h"
#include "kuberdma/sim/pod_view.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/standins/kubelet.h"
#include "kuberdma/standins/multus.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::demo {

namespace {

using nlohmann::json;
using sim::CniCall;
using sim::SimNode;
namespace fs = std::filesystem;

struct Attachment {
  int rail = 0;  // net<rail>
  std::string hca, netdev, cidr;
  bool child = false;  // a macvlan/ipvlan child of netdev (shared mode), not netdev itself
  CniCall call;
};

struct Pod {
  std::string name, path;
  std::vector<std::string> ids;  // the allocated slots of the NADs' resource
  // The main container's environment: the pod spec's, then the device plugin's; and the init
  // container's (the validator's), the same way.
  std::map<std::string, std::string> env, init_env;
  std::string gpus;  // DRA: its claim's GPUs (PCI addresses)
  CniCall eth0;      // the cluster network's attachment
  std::vector<Attachment> attachments;
};

class NodeDemo {
 public:
  explicit NodeDemo(const Options& o) : o_(o), root_(o.fixture) {}
  // A demo that ends early leaves no device plugin behind.
  ~NodeDemo() { (void)TermPlugin(); }
  NodeDemo(const NodeDemo&) = delete;
  NodeDemo& operator=(const NodeDemo&) = delete;
  int Run();

 private:
  bool ShowNode();
  bool LoadObjects();
  // False when the device plugin (or, with --dra, its driver) is not up: the pods then cannot be
  // given HCAs, so the demo stops there.
  bool StartDevicePlugin();
  [[noreturn]] void ExecDevicePlugin(const std::string& dpdir);
  void ShowRegistrations();
  bool PickWorkload();
  void JudgeDoctorNode(bool attached);
  void WaitForEveryResource(const std::string& config);
  void AllocatePods();
  void Allocate(Pod& pod, std::vector<std::string>& free_ids);
  void AllocateDra(Pod& pod);
  void DoctorTaints();
  void AttachRails();
  void AttachClusterNetwork(Pod& pod);
  void Attach(Pod& pod, const CniCall& call, const std::string& id);
  void ShowPods();
  void ShowShared();
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
  void DoctorNode(const std::string& dpdir, bool attached);
  std::string PodGpus() const;
  void DoctorPod(const std::string& gpus);
  void DoctorMisaligned();
  void CheckAll();
  void DetachAll();
  void StopDevicePlugin();
  // SIGTERM to the device plugin this demo started, if it is still running, and its exit status
  // (-1: none running). Never kill(-1), which would signal every process the demo may signal.
  int TermPlugin();
  std::string Dir(const std::string& name) const { return node_->state_dir() + "/" + name; }
  // A RoCE node (the roce8 fixture), not an InfiniBand one (ib8).
  bool Roce() const {
    return !hcas_.empty() && hcas_.front().link_layer() == sysfs::LinkLayer::kEthernet;
  }
  std::vector<std::string> FixtureEnv(const Pod* pod) const;

  const Options& o_;
  sysfs::SysfsRoot root_;
  Failures fail_;
  std::vector<sysfs::Hca> hcas_;
  std::vector<std::string> netdevs_;
  std::unique_ptr<SimNode> node_;
  std::map<std::string, link::LinkInfo> before_;
  std::unique_ptr<standins::KubeletStandIn> kubelet_;
  std::unique_ptr<DraDemo> dra_;  // --dra
  pid_t plugin_ = -1;
  std::vector<std::string> free_ids_;
  sim::Rendered rendered_;
  sim::Workload workload_;      // the pod template the demo runs
  std::vector<sim::Nad> nads_;  // the rendered NADs, node-local paths kept in the demo's state
  std::string resource_;        // what the NADs' resourceName says
  std::vector<Pod> pods_;
  int checked_ = 0;
  int restored_ = 0;
};

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

// The first pod template that attaches networks, the NADs and their resource; with --dra, the
// claim template it asks through.
bool NodeDemo::PickWorkload() {
  for (const auto& w : rendered_.Workloads()) {
    if (!w.networks.empty()) {
      workload_ = w;
      break;
    }
  }
  nads_ = sim::WithHostLocalStore(rendered_.Nads(), Dir("ipam"));
  for (const auto& n : nads_) {
    if (!n.resource.empty()) resource_ = n.resource;
  }
  if (!o_.dra) return true;
  dra_ = std::make_unique<DraDemo>(Dir("kubelet"), o_.fixture, "demo-node");
  if (!dra_->Load(rendered_.objects, fail_)) return false;
  // The pods ask through the claim template, not limits: as many HCAs as it has pairs.
  workload_.main.limits[resource_] = static_cast<int64_t>(dra_->pairs());
  return true;
}

// The objects the demo runs, from the rendering: the ConfigMap, the NADs, the first pod template
// that attaches networks, and as many of its replicas as the node's HCAs hold.
bool NodeDemo::LoadObjects() {
  Heading(2, "The objects a cluster is given, from " + o_.manifests);
  auto r = sim::LoadRendered(o_.manifests);
  if (!r) {
    std::fprintf(stderr, "%s\n  (`make demo` renders it: deploy/render.sh build/ci/rendered)\n",
                 r.error().message().c_str());
    return false;
  }
  rendered_ = std::move(*r);
  std::printf("  objects: %s\n", rendered_.Summary().c_str());
  if (!PickWorkload()) return false;
  auto per_pod = workload_.main.limits.find(resource_);
  if (workload_.name.empty() || resource_.empty() || per_pod == workload_.main.limits.end()) {
    std::fprintf(stderr,
                 "%s has no pod template that attaches a NAD with a resourceName and asks for "
                 "that resource (render the chart with trainer.enabled=true)\n",
                 o_.manifests.c_str());
    return false;
  }
  int fit = static_cast<int>(netdevs_.size()) / std::max<int>(1, int(per_pod->second));
  pods_.resize(static_cast<size_t>(std::min(workload_.replicas, fit)));
  std::printf(
      "  runs: %s (%d of its %d replicas fit this node's %zu HCAs at %s: %lld each)\n"
      "  kept on this node, not the machine's: stateDir and host-local's dataDir (in %s)\n",
      workload_.Describe().c_str(), int(pods_.size()), workload_.replicas, netdevs_.size(),
      resource_.c_str(), static_cast<long long>(per_pod->second), node_->state_dir().c_str());
  return !pods_.empty();
}

void NodeDemo::ShowRegistrations() {
  for (const auto& r : kubelet_->registrations()) {
    const auto& lists = kubelet_->Lists(r.resource_name());
    std::printf("  registered %-12s %4d slot(s)  endpoint %s\n", r.resource_name().c_str(),
                lists.empty() ? 0 : lists.back().devices_size(), r.endpoint().c_str());
  }
}

// Every resource's registration and first ListAndWatch answer, not only the one the pods use:
// a resource whose list has not arrived yet would print 0 slots.
void NodeDemo::WaitForEveryResource(const std::string& config) {
  json parsed = json::parse(config, nullptr, false);
  size_t resources = parsed.is_object() ? parsed.value("configList", json::array()).size() : 0;
  if (dra_ && resources > 0) --resources;  // the DRA driver's is not registered
  kubelet_->WaitFor(
      [&] {
        const auto& regs = kubelet_->registrations();
        return regs.size() >= resources &&
               std::all_of(regs.begin(), regs.end(), [&](const auto& r) {
                 return !kubelet_->Lists(r.resource_name()).empty();
               });
      },
      std::chrono::milliseconds(5000));
}

// The child's side of StartDevicePlugin: rdma-device-plugin as the DaemonSet runs it, on the
// fixture and the stand-ins; never returns.
void NodeDemo::ExecDevicePlugin(const std::string& dpdir) {
  FILE* f = std::freopen((dpdir + "/device-plugin.log").c_str(), "w", stderr);
  (void)f;
  std::vector<std::string> args = {o_.device_plugin_bin,
                                   "--config=" + dpdir + "/device-plugin.json",
                                   "--device-plugin-dir=" + dpdir + "/plugins",
                                   "--sysfs-root=" + o_.fixture,
                                   "--metrics-port=-1",
                                   "--node-config=" + node_->node_config_path(),
                                   "--allocations-dir=" + node_->allocations_dir(),
                                   "--pod-resources=" + kubelet_->pod_resources_socket()};
  if (dra_) {
    for (auto& a : dra_->PluginArgs()) args.push_back(std::move(a));
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
  ::_exit(127);
}

bool NodeDemo::StartDevicePlugin() {
  Heading(3, "rdma-device-plugin, with the rendered ConfigMap, registers with a kubelet stand-in");
  std::string dpdir = Dir("kubelet");
  auto config = rendered_.ConfigMapData("device-plugin.json");
  if (!config) {
    fail_(config.error().message());
    return false;
  }
  (void)MakeDirs(dpdir + "/plugins");
  (void)WriteFileAtomic(dpdir + "/device-plugin.json", *config);
  kubelet_ = std::make_unique<standins::KubeletStandIn>(dpdir + "/plugins");
  // The node config as the DaemonSet writes it: the CNI asks this device plugin, which asks the
  // kubelet stand-in's pod-resources API, whether each HCA it attaches is the pod's.
  auto node_config = rendered_.ConfigMapData("node.json");
  (void)WriteFileAtomic(node_->node_config_path(), node_config ? *node_config : "{}\n");
  plugin_ = ::fork();
  if (plugin_ == 0) ExecDevicePlugin(dpdir);
  // With DRA, the device plugin registers only what the DRA driver does not publish: nothing,
  // where the config's one resource is the driver's (the default: one resource per PF).
  json parsed = json::parse(*config, nullptr, false);
  bool dra_only =
      dra_ && parsed.is_object() && parsed.value("configList", json::array()).size() <= 1;
  bool up = dra_only || kubelet_->WaitFor(
                            [&] {
                              return dra_ ? !kubelet_->registrations().empty()
                                          : !kubelet_->Lists(resource_).empty();
                            },
                            std::chrono::milliseconds(10000));
  if (!up) {
    fail_("the device plugin did not register " + resource_ + " (log: " + dpdir +
          "/device-plugin.log)");
    return false;
  }
  WaitForEveryResource(*config);
  ShowRegistrations();
  if (!dra_) {
    for (const auto& d : kubelet_->Lists(resource_).back().devices()) {
      if (d.health() == "Healthy") free_ids_.push_back(d.id());
    }
  } else {
    std::printf(
        "  %s: not registered with the kubelet; its DRA driver, rdma.kube-rdma.io, "
        "offers those HCAs instead:\n",
        resource_.c_str());
    if (!dra_->Register(fail_) || !dra_->WaitForSlices(fail_)) return false;
  }
  DoctorNode(dpdir, false);
  return true;
}

void NodeDemo::AllocateDra(Pod& pod) {
  auto claim = dra_->ClaimFor(workload_.ns, pod.name, resource_);
  if (!claim) return fail_("claim for " + pod.name + ": " + claim.error().message());
  pod.ids = claim->device_ids;
  pod.gpus = claim->gpus;
  for (const auto& [k, v] : workload_.main.env) pod.env[k] = v;
  for (const auto& [k, v] : claim->env) pod.env[k] = v;
  if (const sim::Container* v = workload_.Validator()) {
    for (const auto& [k, val] : v->env) pod.init_env[k] = val;
  }
  for (const auto& [k, v] : claim->env) pod.init_env[k] = v;
  for (const char* k : {contract::kNcclIbHca, dra::kClaimRootsEnv}) {
    std::printf("             %s=%s\n", k, pod.env[k].c_str());
  }
}

void NodeDemo::Allocate(Pod& pod, std::vector<std::string>& free_ids) {
  if (dra_) return AllocateDra(pod);
  int per_pod = static_cast<int>(workload_.main.limits.at(resource_));
  auto pref = kubelet_->Preferred(resource_, free_ids, per_pod);
  if (!pref) return fail_(pref.error().message());
  pod.ids = *pref;
  // Each slot's HCA is taken: later pods get other HCAs.
  auto hca_of = [](const std::string& id) {
    auto slot = contract::ParseSlot(id);
    return slot && slot->kind == contract::SlotKind::kPerHca ? slot->base : id;
  };
  for (const auto& id : *pref) {
    std::erase_if(free_ids, [&](const std::string& f) { return hca_of(f) == hca_of(id); });
  }
  auto alloc = kubelet_->Allocate(resource_, *pref);
  if (!alloc) return fail_(alloc.error().message());
  kubelet_->AssignPod(workload_.ns, pod.name, resource_, *pref);
  for (const auto& [k, v] : workload_.main.env) pod.env[k] = v;
  for (const auto& [k, v] : alloc->envs) pod.env[k] = v;
  if (const sim::Container* v = workload_.Validator()) {
    for (const auto& [k, val] : v->env) pod.init_env[k] = val;
  }
  for (const auto& [k, v] : alloc->envs) pod.init_env[k] = v;
  std::printf(
      "  %s  %s\n             devices: %zu nodes under /dev/infiniband (uverbs, umad, "
      "rdma_cm)\n",
      pod.name.c_str(), pod.path.c_str(), alloc->devices.size());
  std::printf("             %s=%s\n", contract::kNcclIbHca, pod.env[contract::kNcclIbHca].c_str());
  auto described = contract::DecodeHcas(pod.env[contract::kHcas]);
  std::string desc;
  for (const auto& h : described ? *described : std::vector<contract::HcaInfo>{}) {
    desc += (desc.empty() ? "" : ", ") + h.name + " numa" + std::to_string(h.numa_node);
  }
  std::printf("             %s: [%s]\n", contract::kHcas, desc.c_str());
}

void NodeDemo::AllocatePods() {
  Heading(4, dra_ ? "The pods' claims from the template: allocated (stand-in scheduler), prepared "
                    "by the DRA driver"
                  : "The pods ask for " + resource_ +
                        " as the pod template does; the kubelet allocates");
  for (size_t p = 0; p < pods_.size(); ++p) {
    Pod& pod = pods_[p];
    pod.name = workload_.name + "-" + std::to_string(p);
    pod.path = node_->AddPod(pod.name);
    Allocate(pod, free_ids_);
  }
  if (dra_) dra_->ShowMisaligned(fail_);
}

// eth0, as the cluster's network gives every pod before Multus's attachments: Debian's bridge
// plugin with host-local, a stand-in for flannel or calico.
void NodeDemo::AttachClusterNetwork(Pod& pod) {
  json conf = {{"cniVersion", "1.0.0"},
               {"name", "cluster"},
               {"type", "bridge"},
               {"bridge", "cni0"},
               {"isGateway", true}};
  conf["ipam"] = {{"type", "host-local"},
                  {"dataDir", Dir("ipam")},
                  {"ranges", {{{{"subnet", "10.244.0.0/24"}}}}}};
  pod.eth0 = CniCall{.command = "ADD",
                     .container_id = pod.name + "-sandbox",
                     .netns = pod.path,
                     .ifname = "eth0",
                     .config = conf.dump(),
                     .cni_path = o_.cni_plugins};
  auto r = node_->Run(o_.cni_plugins + "/bridge", pod.eth0);
  if (r.exit_code != 0) fail_("the cluster network's ADD for " + pod.name + ": " + r.out + r.err);
}

void NodeDemo::Attach(Pod& pod, const CniCall& call, const std::string& id) {
  auto t0 = std::chrono::steady_clock::now();
  auto r = node_->Run(o_.rdma_bin, call);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (r.exit_code != 0) return fail_("ADD " + pod.name + "/" + call.ifname + ": " + r.out + r.err);
  auto res = json::parse(r.out, nullptr, false);
  Attachment a{.rail = static_cast<int>(pod.attachments.size()) + 1, .call = call};
  a.cidr = res.is_discarded() || res["ips"].empty() ? "" : res["ips"][0].value("address", "");
  // What `rdma` recorded: the HCA, and its netdev moved in or the parent of a child.
  std::string how = "<-";
  auto conf = json::parse(call.config, nullptr, false);
  auto rec =
      cni::StateStore(node_->state_dir())
          .Load(conf.is_object() ? conf.value("name", "") : "", call.container_id, call.ifname);
  if (rec && *rec) {
    a.hca = (*rec)->hca;
    a.netdev = (*rec)->host_name;
    a.child = cni::IsChildMode((*rec)->mode);
    if (a.child) how = std::string(cni::AttachModeName((*rec)->mode));
  }
  std::printf("  %s %-5s deviceID %-9s %-7s %-6s (%s)  %-13s %.1f ms\n", pod.name.c_str(),
              call.ifname.c_str(), id.c_str(), how.c_str(), a.hca.c_str(), a.netdev.c_str(),
              a.cidr.c_str(), ms);
  auto slot = contract::ParseSlot(id);
  if (slot && slot->kind == contract::SlotKind::kPerHca && a.hca != slot->base) {
    fail_(pod.name + "/" + call.ifname + " got " + a.hca + ", not the allocated " + id);
  }
  if (a.cidr.empty() && json::parse(call.config).contains("ipam")) {
    fail_(pod.name + "/" + call.ifname + ": the result lists no IPAM address");
  }
  pod.attachments.push_back(a);
}

void NodeDemo::AttachRails() {
  Heading(5, "Multus: eth0 from the cluster network, then the annotation's NADs through `rdma`");
  std::printf("  k8s.v1.cni.cncf.io/networks: %s\n", workload_.networks.c_str());
  for (const auto& n : nads_) {
    std::printf("  NAD %s/%s (resourceName %s): %s\n", n.ns.c_str(), n.name.c_str(),
                n.resource.c_str(), n.config.dump().c_str());
  }
  auto networks = standins::ParseNetworksAnnotation(workload_.networks);
  if (!networks) return fail_(networks.error().message());
  for (Pod& pod : pods_) {
    AttachClusterNetwork(pod);
    standins::MultusPod mp{.ns = workload_.ns,
                           .name = pod.name,
                           .uid = "uid-" + pod.name,
                           .sandbox = pod.name + "-sandbox",
                           .networks = *networks,
                           .allocated = {{resource_, pod.ids}}};
    auto calls = standins::MultusAdds(mp, nads_, pod.path, {{"stateDir", node_->state_dir()}});
    if (!calls) return fail_("Multus cannot attach " + pod.name + ": " + calls.error().message());
    for (size_t i = 0; i < calls->size(); ++i) {
      (*calls)[i].cni_path = o_.cni_plugins;
      Attach(pod, (*calls)[i], i < pod.ids.size() ? pod.ids[i] : "");
    }
  }
}

void NodeDemo::ShowPods() {
  Heading(6, "Inside the pods (read over rtnetlink from each pod's namespace)");
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
      // An attachment has what its NAD asks for (eth0 always has an address).
      if (addrs.empty() && l.name == "eth0") fail_("eth0 in " + pod.name + " has no IPv4 address");
      for (const auto& a : pod.attachments) {
        if (a.call.ifname != l.name) continue;
        json conf = json::parse(a.call.config);
        if (addrs.empty() && conf.contains("ipam"))
          fail_(l.name + " in " + pod.name + " has no IPv4 address from its NAD's ipam");
        if (conf.contains("mtu") && l.mtu != conf["mtu"].get<uint32_t>())
          fail_(l.name + " in " + pod.name + " is not mtu " + conf["mtu"].dump());
        if (conf.value("linkState", "") == "up" && !l.admin_up)
          fail_(l.name + " in " + pod.name + " is not up, as its NAD's linkState says");
      }
    }
  }
  size_t home = 0;
  for (const auto& nd : netdevs_) home += node_->links().GetByName(node_->node(), nd) ? 1u : 0u;
  std::printf("  node namespace now holds %zu of its %zu HCA netdevs\n", home, netdevs_.size());
  ShowShared();
}

void NodeDemo::ShowShared() {
  // Shared mode: the i-th attachment of every pod is a child of the same HCA, left on the node.
  std::map<int, std::vector<std::string>> per_rail;  // rail -> "pod:hca"
  for (const auto& pod : pods_) {
    for (const auto& a : pod.attachments) {
      if (!a.child) continue;
      per_rail[a.rail].push_back(pod.name + " on " + a.hca);
      if (!node_->links().GetByName(node_->node(), a.netdev)) {
        fail_(a.netdev + ", the parent of " + pod.name + "/" + a.call.ifname + ", left the node");
      }
      const auto& first = pods_.front().attachments;
      auto rail = static_cast<size_t>(a.rail - 1);
      if (rail >= first.size() || a.hca != first[rail].hca) {
        fail_(pod.name + "/" + a.call.ifname + " shares " + a.hca + ", not rail " +
              std::to_string(a.rail) + "'s HCA");
      }
    }
  }
  for (const auto& [rail, who] : per_rail) {
    std::string list;
    for (const auto& w : who) list += (list.empty() ? "" : ", ") + w;
    std::printf("  rail %d shared: %s\n", rail, list.c_str());
  }
}

void NodeDemo::Validate() {
  Heading(7, "rdma-validate in each pod: inventory, then NCCL across the pods where a GPU is");
  std::string shipped;
  const sim::Container* validator = workload_.Validator();
  if (validator != nullptr) {
    for (const auto& a : validator->command) shipped += " " + a;
    for (const auto& a : validator->args) shipped += " " + a;
    shipped += validator->image.empty() ? "" : " (image " + validator->image + ")";
  }
  std::printf(
      "  the pod template's init container runs:%s\n"
      "  here, with its environment and the plugin's, but veths for HCAs: --inventory-only\n",
      shipped.c_str());
  for (const auto& pod : pods_) {
    std::printf("  %s:\n", pod.name.c_str());
    std::vector<std::string> env = ToolEnv({"KUBERDMA_SYSFS_ROOT=" + o_.fixture});
    for (const auto& [k, v] : pod.init_env) env.push_back(k + "=" + v);
    int rc = RunShown(node_->Pod(pod.path),
                      {o_.validate_bin, "--inventory-only", "--termination-log", "/nonexistent"},
                      env, Dir("validate-" + pod.name + ".txt"));
    if (rc != 0) fail_("rdma-validate in " + pod.name + " exited " + std::to_string(rc));
  }
  int gpus = CountGpus();
  if (!Roce() && o_.nccl != "off") {
    std::printf(
        "  NCCL AllReduce: skipped (NCCL's Socket transport stands in for the HCAs here and needs "
        "addresses; the InfiniBand rendering gives its interfaces none: the RoCE demo runs it)\n");
    return;
  }
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
          "--rank", r, "--world-size", std::to_string(pods_.size()), "--comm-id", root_ip + ":29500",
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
  int npods = static_cast<int>(pods_.size());
  if (gpus < npods) {
    std::printf(
        "  GPUs shared: %d pods on %d GPU(s) (pod p uses GPU p mod %d); each rank's own "
        "NCCL_HOSTID keeps their traffic on the network\n",
        npods, gpus, gpus);
  }
  std::string out = Dir("nccl");
  (void)MakeDirs(out);
  std::vector<pid_t> ranks;
  for (int p = 0; p < npods; ++p) {
    std::string r = std::to_string(p);
    (void)MakeDirs(out + "/logs" + r);
    std::vector<std::string> args = RankArgs(p, expect, root_ip, out);
    auto env = ToolEnv({"CUDA_VISIBLE_DEVICES=" + std::to_string(p % gpus)});
    ranks.push_back(Start(node_->Pod(pods_[static_cast<size_t>(p)].path), args, env,
                          out + "/rank" + r + ".txt"));
  }
  for (int p = 0; p < npods; ++p) {
    int rc = Wait(ranks[static_cast<size_t>(p)]);
    if (rc != 0)
      fail_("NCCL validation in " + pods_[static_cast<size_t>(p)].name + ": exit " +
            std::to_string(rc));
  }
  ShowNcclReports(out);
}

void NodeDemo::ShowNcclReports(const std::string& out) {
  for (size_t p = 0; p < pods_.size(); ++p) {
    std::string r = std::to_string(p);
    auto text = ReadFile(out + "/rank" + r + ".json");
    json rep = text ? json::parse(*text, nullptr, false) : json();
    bool ok = rep.is_object() && rep.value("verdict", "") == "pass";
    std::printf("  %s rank %zu: %s", pods_[p].name.c_str(), p,
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
    fail_("NCCL validation in " + pods_[p].name + " did not pass");
  }
}

// Before any pod, the node's own view: the fixture's ens4f0np0 has ECN off on purpose, and that
// must be named. With the pods attached, the CNI records say where each netdev went, and nothing
// fails (a pod's ECN switches are in its own sysfs: unknown from the node).
// rdma-doctor node's lines on the DRA driver's tainted devices.
void NodeDemo::DoctorTaints() {
  std::vector<std::string> args = {o_.doctor_bin,
                                   "--state-dir",
                                   node_->state_dir(),
                                   "--allocations-dir",
                                   node_->allocations_dir(),
                                   "node"};
  pid_t pid = Start(node_->node(), args, FixtureEnv(nullptr), Dir("doctor-taints.txt"));
  int status = 0;
  if (pid > 0) ::waitpid(pid, &status, 0);
  std::printf("  rdma-doctor node, on the tainted NIC:\n");
  std::istringstream lines(ReadFile(Dir("doctor-taints.txt")).value_or(""));
  bool shown = false;
  bool after_taint = false;  // a finding's "fix:" line follows it
  for (std::string l; std::getline(lines, l);) {
    bool taint = l.find("dra-taints") != std::string::npos;
    bool show = taint || l.find("draTaints") != std::string::npos ||
                (after_taint && l.find("fix:") != std::string::npos);
    after_taint = taint;
    if (!show) continue;
    std::printf("  %s\n", l.c_str());
    shown = shown || taint;
  }
  if (!shown) fail_("rdma-doctor node did not show the tainted NIC (dra-taints)");
}

void NodeDemo::DoctorNode(const std::string& dpdir, bool attached) {
  std::printf("  rdma-doctor node (%s):\n",
              attached ? "the pods hold every netdev, the CNI records say where"
              : Roce() ? "before any pod: the fixture's ens4f0np0 has ECN off on purpose; veths "
                         "have no DCB, so PFC is unknown"
                       : "before any pod");
  // The DaemonSet's install step, as it runs on a node: the doctor finds the binary it put there.
  std::string bin_dir = Dir("cni-bin");
  if (!attached) {
    std::string installed = bin_dir + "/kube-rdma";
    if (RunShown(node_->node(), {o_.rdma_bin, "--install", installed}, {}, Dir("install.txt")) !=
        0) {
      return fail_("rdma --install " + installed + " failed");
    }
  }
  std::vector<std::string> args = {o_.doctor_bin,
                                   "--state-dir",
                                   node_->state_dir(),
                                   "--device-plugin-dir",
                                   dpdir + "/plugins",
                                   "--cni-bin-dir",
                                   bin_dir,
                                   "--allocations-dir",
                                   node_->allocations_dir(),
                                   "node"};
  (void)RunShown(node_->node(), args, FixtureEnv(nullptr), Dir("doctor-node.txt"));
  args.insert(args.begin() + 1, "--json");
  (void)Wait(Start(node_->node(), args, FixtureEnv(nullptr), Dir("doctor-node.json")));
  JudgeDoctorNode(attached);
}

// rdma-doctor node's findings: nothing fails but, before the pods, ens4f0np0's ECN (RoCE).
void NodeDemo::JudgeDoctorNode(bool attached) {
  auto text = ReadFile(Dir("doctor-node.json"));
  json doc = text ? json::parse(*text, nullptr, false) : json();
  if (!doc.is_object()) return fail_("rdma-doctor node --json gave no report");
  bool named = false;
  for (const auto& f : doc["findings"]) {
    bool expected = f.value("check", "") == "lossless-ecn" &&
                    f.value("message", "").rfind("ens4f0np0:", 0) == 0;
    named = named || (expected && f.value("status", "") == "FAIL");
    if (f.value("status", "") == "FAIL" && !expected) {
      fail_("rdma-doctor node: " + f.value("check", "") + ": " + f.value("message", ""));
    }
  }
  if (!named && !attached && Roce()) fail_("rdma-doctor node did not name ens4f0np0's missing ECN");
}

// Pod 0's GPUs: the node's first ones (NUMA 0), as its allocation of HCAs is.
std::string NodeDemo::PodGpus() const {
  if (!pods_.front().gpus.empty()) return pods_.front().gpus;  // DRA: the claim's
  auto gpus = sysfs::DiscoverGpus(root_);
  std::string mine;
  for (size_t i = 0; gpus && i < gpus->size() / pods_.size(); ++i) {
    mine += (mine.empty() ? "" : ",") + (*gpus)[i].address;
  }
  return mine;
}

void NodeDemo::DoctorPod(const std::string& gpus) {
  // The kernel derives each RoCE port's GIDs from its netdev's addresses; the fixture cannot, so
  // the demo writes pod 0's view of sysfs with the GIDs its IPAM addresses give.
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
  // The trainer container's environment: the pod template's and the device plugin's.
  std::vector<std::string> env = ToolEnv({"KUBERDMA_SYSFS_ROOT=" + sysfs});
  for (const auto& [k, v] : pod.env) env.push_back(k + "=" + v);
  if (RunShown(node_->Pod(pod.path), {o_.doctor_bin, "pod", "--gpus", gpus}, env,
               Dir("doctor-pod.txt")) != 0) {
    fail_("rdma-doctor pod found a failure");
  }
}

void NodeDemo::Doctor() {
  Heading(8, "rdma-doctor on the node, in " + pods_.front().name +
                 ", and the GPU-HCA topology seen from it");
  DoctorNode(Dir("kubelet"), true);
  std::string mine = PodGpus();
  DoctorPod(mine);
  std::printf("  rdma-doctor topo (%s):\n", pods_.front().name.c_str());
  if (RunShown(node_->Pod(pods_[0].path), {o_.doctor_bin, "topo", "--gpus", mine},
               FixtureEnv(&pods_.front()), Dir("doctor-topo.txt")) != 0) {
    fail_("rdma-doctor topo found a failure");
  }
  if (dra_ && pods_.size() > 1) DoctorMisaligned();
}

// A wrong pair, as if the claim's GPUs were not the ones it was allocated: pod 0's HCAs with pod
// 1's GPUs, which sit under other PCIe roots. rdma-doctor pod must fail it by name.
void NodeDemo::DoctorMisaligned() {
  const Pod& pod = pods_.front();
  std::string sysfs = Dir("sysfs-" + pod.name);
  std::vector<std::string> env = ToolEnv({"KUBERDMA_SYSFS_ROOT=" + sysfs});
  for (const auto& [k, v] : pod.env) env.push_back(k + "=" + v);
  std::printf("  rdma-doctor pod, %s's HCAs given %s's GPUs (not the claim's pairs):\n",
              pod.name.c_str(), pods_[1].name.c_str());
  std::string out = Dir("doctor-misaligned.txt");
  int rc = Start(node_->Pod(pod.path), {o_.doctor_bin, "pod", "--gpus", pods_[1].gpus}, env, out);
  rc = Wait(rc);
  auto text = ReadFile(out);
  std::string line;
  if (text) {
    auto at = text->find("[FAIL] claim-alignment");
    if (at != std::string::npos) line = text->substr(at, text->find('\n', at) - at);
  }
  std::printf("    %s\n", line.empty() ? "(no claim-alignment failure)" : line.c_str());
  if (rc == 0 || line.empty()) fail_("rdma-doctor pod did not fail a GPU+NIC pair on two roots");
}

void NodeDemo::CheckAll() {
  Heading(dra_ ? 10 : 9,
          "CNI CHECK of every attachment (IPAM's addresses on the interface, host-local asked)");
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

void NodeDemo::DetachAll() {
  Heading(dra_ ? 11 : 10,
          "Pods deleted: CNI DEL gives every device and address back; the plugin stops");
  for (auto pod = pods_.rbegin(); pod != pods_.rend(); ++pod) {
    for (auto a = pod->attachments.rbegin(); a != pod->attachments.rend(); ++a) {
      CniCall c = a->call;
      c.command = "DEL";
      auto r = node_->Run(o_.rdma_bin, c);
      if (r.exit_code != 0) fail_("DEL " + pod->name + "/" + c.ifname + ": " + r.out);
    }
    CniCall eth0 = pod->eth0;
    eth0.command = "DEL";
    auto r = node_->Run(o_.cni_plugins + "/bridge", eth0);
    if (r.exit_code != 0) fail_("the cluster network's DEL for " + pod->name + ": " + r.out);
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
  size_t held = sim::HostLocalHeld(Dir("ipam"));
  std::printf("  host-local holds %zu address(es) after DEL\n", held);
  if (held != 0) fail_("host-local still holds " + std::to_string(held) + " address(es)");
}

int NodeDemo::TermPlugin() {
  if (plugin_ <= 0) return -1;
  ::kill(plugin_, SIGTERM);
  int rc = Wait(plugin_);
  plugin_ = -1;
  return rc;
}

// Stops the device plugin this demo started, if it did, and says whether it stopped cleanly.
void NodeDemo::StopDevicePlugin() {
  if (plugin_ <= 0) return;
  int rc = TermPlugin();
  bool clean = rc == 0 && !fs::exists(Dir("kubelet/plugins/kuberdma-rdma-hca.sock"));
  std::printf("  rdma-device-plugin: SIGTERM -> %s\n",
              clean ? "exit 0, sockets removed" : "DID NOT STOP CLEANLY");
  if (!clean) fail_("device plugin did not stop cleanly");
  if (kubelet_) kubelet_->Stop();
}

int NodeDemo::Run() {
  std::printf("kube-rdma node-in-a-box demo\n");
  if (!ShowNode() || !LoadObjects()) return 2;
  if (StartDevicePlugin()) {
    AllocatePods();
    AttachRails();
    ShowPods();
    Validate();
    Doctor();
    if (dra_) {
      Heading(9,
              "A NIC goes down: its device tainted, the pod told, new claims allocated around it");
      if (dra_->ShowNicDown(fail_)) DoctorTaints();
      dra_->ShowNicUp(fail_);
    }
    CheckAll();
    DetachAll();
    if (dra_) dra_->UnprepareAll(fail_);
  }
  StopDevicePlugin();
  size_t attached = 0;
  for (const auto& p : pods_) attached += p.attachments.size();
  std::printf(
      "\nSummary: %zu attachments across %d pods, %d checked, %d of %zu devices restored, "
      "every address released.\n",
      attached, int(pods_.size()), checked_, restored_, before_.size());
  std::printf("Verdict: %s\n", fail_.count() == 0 ? "PASS" : "FAIL");
  return fail_.count() == 0 ? 0 : 1;
}

}  // namespace

int RunNodeDemo(const Options& o) {
  if (!o.dra) return NodeDemo(o).Run();
  // DRA takes a NIC down and up again: on a copy of the fixture, never the repository's.
  char tmpl[] = "/tmp/kuberdma-demo-sysfs-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return 2;
  Options copy = o;
  copy.fixture = std::string(tmpl) + "/sysfs";
  std::error_code ec;
  std::filesystem::copy(
      o.fixture, copy.fixture,
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks, ec);
  int rc = ec ? 2 : NodeDemo(copy).Run();
  if (ec) std::fprintf(stderr, "copy %s: %s\n", o.fixture.c_str(), ec.message().c_str());
  std::filesystem::remove_all(tmpl, ec);
  return rc;
}

}  // namespace kuberdma::demo
