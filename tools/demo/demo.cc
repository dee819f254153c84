// SPDX-License-Identifier: Apache-2.0
// kube-rdma's node-in-a-box demo: a simulated 8-GPU node whose eight ConnectX-7 netdevs are real
// veths, two pods, the seed article's NetworkAttachmentDefinition delivered to `rdma` the way
// Multus calls it, the pods' interfaces shown from inside, CHECK, then DEL and proof that every
// device came home. Exits non-zero on any failure; leaves nothing behind.
//
//   kuberdma-demo [--rdma PATH] [--fixture DIR] [--pods N]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "kuberdma/sim/sim_node.h"
#include "kuberdma/sysfs/hca.h"

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

std::string Conf(const SimNode& node) {
  json c = json::parse(kSeedNad);
  c["stateDir"] = node.state_dir();  // keeps the demo off this machine's /run/kube-rdma
  return c.dump();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kube-rdma node-in-a-box demo"};
  std::string rdma_bin = KUBERDMA_RDMA_BIN;
  std::string fixture = KUBERDMA_FIXTURES "/sysfs/roce8";
  int pods = 2;
  app.add_option("--rdma", rdma_bin, "the rdma CNI binary");
  app.add_option("--fixture", fixture, "sysfs fixture of the simulated node");
  app.add_option("--pods", pods, "pods sharing the node's HCAs")->check(CLI::Range(1, 8));
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
                h.netdevs.front().c_str(), std::string(kuberdma::sysfs::LinkLayerName(h.link_layer())).c_str(),
                h.ports.front().rate.c_str());
  }
  SimNode node(fixture, netdevs);
  std::map<std::string, kuberdma::link::LinkInfo> before;
  for (const auto& n : netdevs) before[n] = *node.links().GetByName(node.node(), n);
  std::printf("  node namespace: %s (state in %s)\n", node.node().path().c_str(), node.state_dir().c_str());

  Heading(2, "Two pods, each asking for its share of rdma-net attachments");
  int per_pod = static_cast<int>(netdevs.size()) / pods;
  std::vector<std::string> pod_paths;
  for (int p = 0; p < pods; ++p) {
    pod_paths.push_back(node.AddPod("trainer-" + std::to_string(p)));
    std::printf("  trainer-%d  %s  networks: %d x rdma-net (net1..net%d)\n", p, pod_paths.back().c_str(),
                per_pod, per_pod);
  }

  Heading(3, "Multus delivers the seed NAD to `rdma` for every attachment (CNI ADD)");
  std::printf("  spec.config: %s\n", kSeedNad);
  std::vector<CniCall> attached;
  for (int p = 0; p < pods; ++p) {
    for (int i = 1; i <= per_pod; ++i) {
      CniCall call{"ADD", "trainer" + std::to_string(p) + "-sandbox", pod_paths[static_cast<size_t>(p)], "net" + std::to_string(i), Conf(node)};
      auto t0 = std::chrono::steady_clock::now();
      auto r = node.Run(rdma_bin, call);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r.exit_code != 0) {
        fail("ADD trainer-" + std::to_string(p) + "/" + call.ifname + ": " + r.out);
        continue;
      }
      auto res = json::parse(r.out, nullptr, false);
      auto iface = res.is_discarded() ? json() : res["interfaces"][0];
      std::string mac = iface.value("mac", "?");
      std::string which = "?";
      for (size_t h = 0; h < netdevs.size(); ++h) {
        if (before[netdevs[h]].mac == mac) which = (*hcas)[h].name + " (" + netdevs[h] + ")";
      }
      std::printf("  trainer-%d %-5s <- %-20s mac %s  %.1f ms\n", p, call.ifname.c_str(), which.c_str(),
                  mac.c_str(), ms);
      attached.push_back(call);
    }
  }

  Heading(4, "Inside the pods (read over rtnetlink from each pod's namespace)");
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
      std::printf("  trainer-%d  %-5s mtu %-5u %-4s mac %s  (was %s on the node)\n", p, l.name.c_str(),
                  l.mtu, l.admin_up ? "UP" : "DOWN", l.mac.c_str(), host_name.c_str());
      if (l.mtu != 9000 || !l.admin_up) fail(l.name + " in trainer-" + std::to_string(p) + " is not mtu 9000 and up");
    }
  }
  std::printf("  node namespace now holds %zu of its %zu HCA netdevs\n",
              [&] {
                size_t n = 0;
                for (const auto& nd : netdevs) n += node.links().GetByName(node.node(), nd) ? 1u : 0u;
                return n;
              }(),
              netdevs.size());

  Heading(5, "CNI CHECK of every attachment");
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

  Heading(6, "Pods deleted: CNI DEL gives every device back");
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

  std::printf("\nSummary: %zu attachments across %d pods, %d checked, %d of %zu devices restored.\n",
              attached.size(), pods, checked, restored, before.size());
  std::printf("Verdict: %s\n", fail.count == 0 ? "PASS" : "FAIL");
  return fail.count == 0 ? 0 : 1;
}
