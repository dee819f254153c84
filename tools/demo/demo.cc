// SPDX-License-Identifier: Apache-2.0
// kube-rdma's node-in-a-box demo: a simulated 8-GPU node whose eight ConnectX-7 netdevs are real
// veths; rdma-device-plugin registered with a kubelet stand-in that allocates HCAs for two pods;
// the seed article's NetworkAttachmentDefinition delivered to `rdma` the way Multus calls it (with
// the allocated device IDs); the pods' interfaces and environment shown; rdma-validate in each pod
// (inventory always; where the machine has a GPU per pod, an NCCL AllReduce across the pods over
// their attachments, each cabled to its peers by a switch, proven from every interface's
// counters); rdma-doctor; CHECK; then DEL, the plugin stopped, and proof that every device came
// home. Exits non-zero on any failure; leaves nothing behind.
//
//   kuberdma-demo [--rdma PATH] [--device-plugin PATH] [--validate PATH] [--doctor PATH]
//                 [--fixture DIR] [--pods N] [--nccl auto|on|off]
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kuberdma/base/files.h"
#include "kuberdma/deviceplugin/kubelet_standin.h"
#include "kuberdma/podenv/pod_env.h"
#include "kuberdma/sim/sim_node.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/sysfs/topology.h"

namespace {

using kuberdma::sim::CniCall;
using kuberdma::sim::SimNode;
using nlohmann::json;

// The seed article's NAD spec.config, as written.
constexpr const char* kSeedNad =
    R"({"cniVersion":"0.3.1","name":"rdma-net","type":"rdma","pkey":"0xffff","linkState":"up","mtu":9000})";

struct Failure {
  int count = 0;
  void operator()(const std::string& what) {
    ++count;
    std::printf("  FAIL  %s\n", what.c_str());
  }
};

void Heading(int n, const char* text) { std::printf("\n[%d] %s\n", n, text); }

// What Multus sends for one attachment of the seed NAD annotated with a device-plugin resource:
// the NAD's config plus the device ID the kubelet allocated for it.
std::string Conf(const SimNode& node, const std::string& device_id) {
  json c = json::parse(kSeedNad);
  c["stateDir"] = node.state_dir();  // keeps the demo off this machine's /run/kube-rdma
  if (!device_id.empty()) c["runtimeConfig"] = {{"deviceID", device_id}};
  return c.dump();
}

constexpr const char* kPluginConfig = R"({"configList":[
  {"resourceName":"shared","rdmaHcaMax":1000,"selectors":{"vendors":["15b3"]}},
  {"resourceName":"hca","rdmaHcaMax":8,"policy":"per-hca","selectors":{"vendors":["15b3"]}}]})";

// Runs `argv` inside `ns` with `env`, prints its output indented, returns its exit code.
int RunShown(const kuberdma::netns::NetNs& ns, const std::vector<std::string>& argv,
             const std::vector<std::string>& env, const std::string& out) {
  int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  auto pid = kuberdma::testing::SpawnIn(ns, argv, env, -1, fd, fd);
  ::close(fd);
  int st = 0;
  if (pid) waitpid(*pid, &st, 0);
  auto text = kuberdma::ReadFile(out);
  std::string body = text ? *text : "";
  size_t pos = 0;
  while (pos < body.size()) {
    size_t e = body.find('\n', pos);
    std::printf("    %s\n",
                body.substr(pos, e == std::string::npos ? std::string::npos : e - pos).c_str());
    if (e == std::string::npos) break;
    pos = e + 1;
  }
  return pid && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// The environment the demo's tools run with: a plain PATH, the library path the demo was given
// (binaries carried to another machine with their libraries), and `extra`.
std::vector<std::string> ToolEnv(std::vector<std::string> extra) {
  extra.insert(extra.begin(), "PATH=/usr/bin:/bin");
  if (const char* ld = std::getenv("LD_LIBRARY_PATH"))
    extra.push_back(std::string("LD_LIBRARY_PATH=") + ld);
  return extra;
}

// GPUs of this machine, from their device nodes (/dev/nvidia0, /dev/nvidia1, ...).
int CountGpus() {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev", ec)) {
    std::string name = e.path().filename();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        name.find_first_not_of("0123456789", 6) == std::string::npos)
      ++n;
  }
  return n;
}

pid_t StartPlugin(const std::string& bin, const std::string& dir, const std::string& root) {
  pid_t pid = fork();
  if (pid == 0) {
    std::string log = dir + "/device-plugin.log";
    FILE* f = std::freopen(log.c_str(), "w", stderr);
    (void)f;
    execl(bin.c_str(), bin.c_str(), "--config", (dir + "/device-plugin.json").c_str(),
          "--device-plugin-dir", (dir + "/plugins").c_str(), "--sysfs-root", root.c_str(),
          "--metrics-port", "-1", nullptr);
    _exit(127);
  }
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kube-rdma node-in-a-box demo"};
  std::string rdma_bin = KUBERDMA_RDMA_BIN;
  std::string dp_bin = KUBERDMA_DP_BIN;
  std::string validate_bin = KUBERDMA_VALIDATE_BIN;
  std::string doctor_bin = KUBERDMA_DOCTOR_BIN;
  std::string fixture = KUBERDMA_FIXTURES "/sysfs/roce8";
  int pods = 2;
  app.add_option("--rdma", rdma_bin, "the rdma CNI binary");
  app.add_option("--device-plugin", dp_bin, "the rdma-device-plugin binary");
  app.add_option("--validate", validate_bin, "the rdma-validate binary");
  app.add_option("--doctor", doctor_bin, "the rdma-doctor binary");
  app.add_option("--fixture", fixture, "sysfs fixture of the simulated node");
  app.add_option("--pods", pods, "pods sharing the node's HCAs")->check(CLI::Range(1, 8));
  std::string nccl = "auto";
  app.add_option("--nccl", nccl,
                 "NCCL AllReduce across the pods: auto (when there is a GPU per pod), on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  CLI11_PARSE(app, argc, argv);
  if (geteuid() != 0) {
    std::fprintf(stderr, "kuberdma-demo needs root: it creates network namespaces and veths\n");
    return 2;
  }
  kuberdma::sim::RemoveStaleNamespaces();
  Failure fail;
  std::printf("kube-rdma node-in-a-box demo\n");

  Heading(1, "A simulated GPU node: HCAs from a sysfs fixture, their netdevs real veths");
  kuberdma::sysfs::SysfsRoot root(fixture);
  auto hcas = kuberdma::sysfs::DiscoverHcas(root, kuberdma::sysfs::HcaDetail::kPorts);
  if (!hcas || hcas->empty()) {
    std::fprintf(stderr, "no HCAs in fixture %s\n", fixture.c_str());
    return 2;
  }
  std::vector<std::string> netdevs;
  std::printf("  %-8s %-14s %-5s %-12s %-9s %s\n", "HCA", "PCI", "NUMA", "netdev", "link", "rate");
  for (const auto& h : *hcas) {
    netdevs.push_back(h.netdevs.front());
    std::printf("  %-8s %-14s %-5d %-12s %-9s %s\n", h.name.c_str(), h.address.c_str(), h.numa_node,
                h.netdevs.front().c_str(),
                std::string(kuberdma::sysfs::LinkLayerName(h.link_layer())).c_str(),
                h.ports.front().rate.c_str());
  }
  SimNode node(fixture, netdevs);
  std::map<std::string, kuberdma::link::LinkInfo> before;
  for (const auto& n : netdevs) before[n] = *node.links().GetByName(node.node(), n);
  std::printf("  node namespace: %s (state in %s)\n", node.node().path().c_str(),
              node.state_dir().c_str());

  Heading(2, "rdma-device-plugin registers rdma/shared and rdma/hca with a kubelet stand-in");
  std::string dpdir = node.state_dir() + "/kubelet";
  (void)kuberdma::MakeDirs(dpdir + "/plugins");
  (void)kuberdma::WriteFileAtomic(dpdir + "/device-plugin.json", kPluginConfig);
  kuberdma::deviceplugin::KubeletStandIn kubelet(dpdir + "/plugins");
  pid_t plugin = StartPlugin(dp_bin, dpdir, fixture);
  bool registered = kubelet.WaitFor(
      [&] { return !kubelet.Lists("rdma/shared").empty() && !kubelet.Lists("rdma/hca").empty(); },
      std::chrono::milliseconds(10000));
  if (!registered)
    fail("the device plugin did not register (log: " + dpdir + "/device-plugin.log)");
  std::vector<std::string> free_ids;
  if (registered) {
    for (const auto& r : kubelet.registrations()) {
      std::printf("  registered %-12s endpoint %s\n", r.resource_name().c_str(),
                  r.endpoint().c_str());
    }
    const auto& hca_list = kubelet.Lists("rdma/hca").back();
    std::printf(
        "  rdma/shared: %d slots over all 8 HCAs; rdma/hca: %d slots, 8 per HCA, with NUMA "
        "topology\n",
        kubelet.Lists("rdma/shared").back().devices_size(), hca_list.devices_size());
    for (const auto& d : hca_list.devices()) {
      if (d.health() == "Healthy") free_ids.push_back(d.id());
    }
  }

  Heading(3, "Two pods ask for rdma/hca; the kubelet allocates NUMA-local HCAs");
  int per_pod = static_cast<int>(netdevs.size()) / pods;
  std::vector<std::string> pod_paths;
  std::vector<std::vector<std::string>> pod_ids(static_cast<size_t>(pods));
  std::vector<std::map<std::string, std::string>> pod_env(static_cast<size_t>(pods));
  for (int p = 0; p < pods; ++p) {
    auto up = static_cast<size_t>(p);
    pod_paths.push_back(node.AddPod("trainer-" + std::to_string(p)));
    auto pref = kubelet.Preferred("rdma/hca", free_ids, per_pod);
    if (!pref) {
      fail(pref.error().message());
      continue;
    }
    pod_ids[up] = *pref;
    for (const auto& id : *pref)
      free_ids.erase(std::remove(free_ids.begin(), free_ids.end(), id), free_ids.end());
    // Each slot's HCA is taken: later pods get other HCAs.
    for (const auto& id : *pref) {
      std::string hca = id.substr(0, id.find('-'));
      free_ids.erase(
          std::remove_if(free_ids.begin(), free_ids.end(),
                         [&](const std::string& f) { return f.substr(0, f.find('-')) == hca; }),
          free_ids.end());
    }
    auto alloc = kubelet.Allocate("rdma/hca", *pref);
    if (!alloc) {
      fail(alloc.error().message());
      continue;
    }
    pod_env[up] = alloc->envs;
    std::printf(
        "  trainer-%d  %s\n             devices: %zu nodes under /dev/infiniband (uverbs, umad, "
        "rdma_cm)\n",
        p, pod_paths.back().c_str(), alloc->devices.size());
    std::printf("             NCCL_IB_HCA=%s\n", alloc->envs[kuberdma::podenv::kNcclIbHca].c_str());
    auto hcas_env = json::parse(alloc->envs[kuberdma::podenv::kHcas], nullptr, false);
    std::string desc;
    if (!hcas_env.is_discarded()) {
      for (const auto& h : hcas_env) {
        desc += (desc.empty() ? "" : ", ") + h["name"].get<std::string>() + " numa" +
                std::to_string(h["numaNode"].get<int>());
      }
    }
    std::printf("             KUBERDMA_HCAS: [%s]\n", desc.c_str());
  }

  Heading(4, "Multus delivers the seed NAD to `rdma` for every attachment (CNI ADD)");
  std::printf(
      "  spec.config: %s\n  (annotated k8s.v1.cni.cncf.io/resourceName: rdma/hca, so each "
      "attachment carries\n"
      "   one allocated device ID in runtimeConfig.deviceID)\n",
      kSeedNad);
  std::vector<CniCall> attached;
  std::map<int, std::vector<std::string>> rails;  // net<i> of every pod: the HCA netdevs behind it
  for (int p = 0; p < pods; ++p) {
    auto up = static_cast<size_t>(p);
    for (int i = 1; i <= per_pod; ++i) {
      std::string id = static_cast<size_t>(i - 1) < pod_ids[up].size()
                           ? pod_ids[up][static_cast<size_t>(i - 1)]
                           : "";
      CniCall call{"ADD", "trainer" + std::to_string(p) + "-sandbox", pod_paths[up],
                   "net" + std::to_string(i), Conf(node, id)};
      auto t0 = std::chrono::steady_clock::now();
      auto r = node.Run(rdma_bin, call);
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r.exit_code != 0) {
        fail("ADD trainer-" + std::to_string(p) + "/" + call.ifname + ": " + r.out);
        continue;
      }
      auto res = json::parse(r.out, nullptr, false);
      auto iface = res.is_discarded() ? json() : res["interfaces"][0];
      std::string mac = iface.value("mac", "?");
      std::string which = "?";
      for (size_t h = 0; h < netdevs.size(); ++h) {
        if (before[netdevs[h]].mac != mac) continue;
        which = (*hcas)[h].name + " (" + netdevs[h] + ")";
        rails[i].push_back(netdevs[h]);
      }
      std::printf("  trainer-%d %-5s deviceID %-9s <- %-20s %.1f ms\n", p, call.ifname.c_str(),
                  id.c_str(), which.c_str(), ms);
      if (!id.empty() && which.rfind(id.substr(0, id.find('-')) + " ", 0) != 0) {
        fail("trainer-" + std::to_string(p) + "/" + call.ifname + " got " + which +
             ", not the allocated " + id);
      }
      attached.push_back(call);
    }
  }

  Heading(5, "Inside the pods (read over rtnetlink from each pod's namespace)");
  for (int p = 0; p < pods; ++p) {
    auto links = node.links().List(node.Pod(pod_paths[static_cast<size_t>(p)]));
    if (!links) {
      fail("list links in trainer-" + std::to_string(p));
      continue;
    }
    for (const auto& l : *links) {
      if (l.name == "lo") continue;
      std::string host_name = "?";
      for (const auto& [n, info] : before) {
        if (info.mac == l.mac) host_name = n;
      }
      std::printf("  trainer-%d  %-5s mtu %-5u %-4s mac %s  (was %s on the node)\n", p,
                  l.name.c_str(), l.mtu, l.admin_up ? "UP" : "DOWN", l.mac.c_str(),
                  host_name.c_str());
      if (l.mtu != 9000 || !l.admin_up)
        fail(l.name + " in trainer-" + std::to_string(p) + " is not mtu 9000 and up");
    }
  }
  std::printf(
      "  node namespace now holds %zu of its %zu HCA netdevs\n",
      [&] {
        size_t n = 0;
        for (const auto& nd : netdevs) n += node.links().GetByName(node.node(), nd) ? 1u : 0u;
        return n;
      }(),
      netdevs.size());

  Heading(6, "rdma-validate in each pod: inventory, then NCCL across the pods where GPUs exist");
  for (int p = 0; p < pods; ++p) {
    auto up = static_cast<size_t>(p);
    std::vector<std::string> env = ToolEnv({"KUBERDMA_SYSFS_ROOT=" + fixture});
    for (const auto& [k, v] : pod_env[up]) env.push_back(k + "=" + v);
    std::printf("  trainer-%d:\n", p);
    int rc = RunShown(node.Pod(pod_paths[up]),
                      {validate_bin, "--inventory-only", "--termination-log", "/nonexistent"}, env,
                      node.state_dir() + "/validate-" + std::to_string(p) + ".txt");
    if (rc != 0)
      fail("rdma-validate in trainer-" + std::to_string(p) + " exited " + std::to_string(rc));
  }

  int gpus_here = CountGpus();
  if (nccl == "off" || (nccl == "auto" && gpus_here < pods)) {
    std::printf(
        "  NCCL AllReduce: skipped (%s; it needs a GPU per pod and rdma-validate built with "
        "NCCL)\n",
        nccl == "off" ? "--nccl off" : (std::to_string(gpus_here) + " GPU(s) here").c_str());
  } else {
    // One switch per rail: net<i> of every pod on bridge rail<i>, addresses 10.10.<i>.<pod+1>.
    // NCCL's Socket transport then uses each interface as its own network device, and each
    // interface's counters show what it carried: the stand-in for IB HCAs on a GPU machine.
    std::printf("  cabling: net<i> of every pod on switch rail<i>, 10.10.<i>.<pod>/24\n");
    std::string expect;
    for (const auto& [i, devs] : rails) {
      expect += (expect.empty() ? "net" : ",net") + std::to_string(i);
      if (auto c = node.Connect("rail" + std::to_string(i), devs); !c)
        fail("cable rail " + std::to_string(i) + ": " + c.error().message());
    }
    for (int p = 0; p < pods; ++p) {
      auto ns = node.Pod(pod_paths[static_cast<size_t>(p)]);
      if (auto lo = node.links().GetByName(ns, "lo"))
        (void)node.links().Change(ns, lo->ifindex, {.up = true});
      for (const auto& [i, devs] : rails) {
        auto l = node.links().GetByName(ns, "net" + std::to_string(i));
        std::string cidr = "10.10." + std::to_string(i) + "." + std::to_string(p + 1) + "/24";
        if (!l || !node.addrs().AddAddress(ns, l->ifindex, *kuberdma::link::ParsePrefix(cidr)))
          fail("address " + cidr + " on trainer-" + std::to_string(p));
      }
    }
    std::vector<pid_t> ranks;
    std::string out = node.state_dir() + "/nccl";
    (void)kuberdma::MakeDirs(out);
    for (int p = 0; p < pods; ++p) {
      std::string r = std::to_string(p);
      std::vector<std::string> args = {validate_bin,
                                       "--mode",
                                       "multi-pod",
                                       "--transport",
                                       "socket",
                                       "--expect",
                                       expect,
                                       "--rank",
                                       r,
                                       "--world-size",
                                       std::to_string(pods),
                                       "--comm-id",
                                       "10.10.1.1:29500",
                                       "--size",
                                       "64M",
                                       "--iters",
                                       "20",
                                       "--timeout",
                                       "60",
                                       "--json",
                                       out + "/rank" + r + ".json",
                                       "--log-dir",
                                       out + "/logs" + r,
                                       "--termination-log",
                                       "/nonexistent"};
      (void)kuberdma::MakeDirs(out + "/logs" + r);
      std::vector<std::string> env = ToolEnv({"HOME=/tmp", "CUDA_VISIBLE_DEVICES=" + r});
      int fd = ::open((out + "/rank" + r + ".txt").c_str(),
                      O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      auto pid = kuberdma::testing::SpawnIn(node.Pod(pod_paths[static_cast<size_t>(p)]), args, env,
                                          -1, fd, fd);
      ::close(fd);
      ranks.push_back(pid ? *pid : -1);
    }
    for (int p = 0; p < pods; ++p) {
      int st = 0;
      if (ranks[static_cast<size_t>(p)] > 0) waitpid(ranks[static_cast<size_t>(p)], &st, 0);
      int rc = ranks[static_cast<size_t>(p)] > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      auto text = kuberdma::ReadFile(out + "/rank" + std::to_string(p) + ".json");
      json rep = text ? json::parse(*text, nullptr, false) : json();
      std::printf("  trainer-%d rank %d: exit %d", p, p, rc);
      if (rep.is_object() && rep.contains("collective")) {
        std::printf(", AllReduce busbw %.2f GB/s\n", rep["collective"].value("busbwGBps", 0.0));
        for (const auto& d : rep["devices"]) {
          std::printf("    %-5s %s by NCCL, %s, share %.1f%%\n", d.value("name", "?").c_str(),
                      d.value("chosenByNccl", false) ? "chosen" : "NOT chosen",
                      d.value("carriedTraffic", false) ? "carried traffic" : "CARRIED NOTHING",
                      100.0 * d.value("share", 0.0));
        }
      } else {
        std::printf(", no report\n");  // its output follows: no report is a failure
      }
      std::string verdict = rep.is_object() ? rep.value("verdict", "") : "";
      if (rc != 0 || verdict != "pass") {
        // What went wrong, from the validator's own report and the end of NCCL's log.
        auto txt = kuberdma::ReadFile(out + "/rank" + std::to_string(p) + ".txt");
        std::printf("%s", txt ? txt->c_str() : "");
        auto log = kuberdma::ReadFile(out + "/logs" + std::to_string(p) + "/nccl.rank0.log");
        if (log) {
          size_t from = log->size() > 3000 ? log->size() - 3000 : 0;
          std::printf("    ... NCCL log (rank %d):\n%s\n", p, log->substr(from).c_str());
        }
        fail("NCCL validation in trainer-" + std::to_string(p) + ": exit " + std::to_string(rc) +
             ", verdict " + (verdict.empty() ? "none" : verdict));
      }
    }
  }

  Heading(7, "rdma-doctor on the node, and the GPU-HCA topology seen from trainer-0");
  {
    std::vector<std::string> env = ToolEnv({"KUBERDMA_SYSFS_ROOT=" + fixture});
    std::printf("  rdma-doctor node:\n");
    int rc = RunShown(node.node(),
                      {doctor_bin, "--state-dir", node.state_dir(), "--device-plugin-dir",
                       dpdir + "/plugins", "node"},
                      env, node.state_dir() + "/doctor-node.txt");
    if (rc != 0) fail("rdma-doctor node found a failure");
    for (const auto& [k, v] : pod_env[0]) env.push_back(k + "=" + v);
    std::printf("  rdma-doctor topo (trainer-0):\n");
    // trainer-0 holds the node's first four GPUs (NUMA 0), as its allocation of HCAs does.
    auto gpus = kuberdma::sysfs::DiscoverGpus(root);
    std::string mine;
    for (size_t i = 0; gpus && i < gpus->size() / static_cast<size_t>(pods); ++i)
      mine += (mine.empty() ? "" : ",") + (*gpus)[i].address;
    int rc_topo = RunShown(node.Pod(pod_paths[0]), {doctor_bin, "topo", "--gpus", mine}, env,
                           node.state_dir() + "/doctor-topo.txt");
    if (rc_topo != 0) fail("rdma-doctor topo found a failure");
  }

  Heading(8, "CNI CHECK of every attachment");
  int checked = 0;
  for (auto c : attached) {
    c.command = "CHECK";
    json conf = json::parse(c.config);
    conf["cniVersion"] = "1.0.0";  // CHECK exists from 0.4.0 on
    c.config = conf.dump();
    auto r = node.Run(rdma_bin, c);
    if (r.exit_code == 0) {
      ++checked;
    } else {
      fail("CHECK " + c.netns + "/" + c.ifname + ": " + r.out);
    }
  }
  std::printf("  %d of %zu attachments verified\n", checked, attached.size());

  Heading(9, "Pods deleted: CNI DEL gives every device back; the plugin stops");
  for (auto it = attached.rbegin(); it != attached.rend(); ++it) {
    CniCall c = *it;
    c.command = "DEL";
    auto r = node.Run(rdma_bin, c);
    if (r.exit_code != 0) fail("DEL " + c.ifname + ": " + r.out);
  }
  int restored = 0;
  for (const auto& [name, was] : before) {
    auto now = node.links().GetByName(node.node(), name);
    bool same = now && now->mac == was.mac && now->mtu == was.mtu && now->admin_up == was.admin_up;
    std::printf("  %-12s %s\n", name.c_str(),
                same ? "home: name, MAC, MTU and admin state as before" : "NOT RESTORED");
    if (same) {
      ++restored;
    } else {
      fail(name + " not restored");
    }
  }

  kill(plugin, SIGTERM);
  int status = 0;
  waitpid(plugin, &status, 0);
  bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
               !std::filesystem::exists(dpdir + "/plugins/kuberdma-rdma-hca.sock");
  std::printf("  rdma-device-plugin: SIGTERM -> %s\n",
              clean ? "exit 0, sockets removed" : "DID NOT STOP CLEANLY");
  if (!clean) fail("device plugin did not stop cleanly");
  kubelet.Stop();

  std::printf(
      "\nSummary: %zu attachments across %d pods, %d checked, %d of %zu devices restored.\n",
      attached.size(), pods, checked, restored, before.size());
  std::printf("Verdict: %s\n", fail.count == 0 ? "PASS" : "FAIL");
  return fail.count == 0 ? 0 : 1;
}
