// SPDX-License-Identifier: Apache-2.0
// The fleet demo: K simulated nodes whose pods hold M rail interfaces, cabled rail by rail to one
// switch per rail; one node's cable on one rail made slow (tbf) or lossy (netem) on both ends;
// rdma-validate --mode acceptance on every node, as the acceptance Job's pods run it. Rank 0's
// fleet report must name exactly that node and rail. Each rail's bridge is a leaf that sends LLDP;
// each node records what its rails hear as its device plugin would (the node contract's cabling
// record), and one cable can be plugged into the wrong leaf (--miscable): the report must name that
// rail and no other. Without a GPU the same run proves the exchange: every node joins over the
// simulated fabric, sends its cabling, and reports that it could not run NCCL.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "demo.h"
#include "kuberdma/base/files.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/lldp/lldp.h"
#include "kuberdma/sim/sim_fleet.h"

namespace kuberdma::demo {

namespace {

using nlohmann::json;
using sim::SimFleet;

struct Target {
  int node = 0;  // 0: nothing degraded
  int rail = 0;
};

class FleetDemo {
 public:
  explicit FleetDemo(const Options& o) : o_(o) {}
  int Run();

 private:
  bool Parse();
  bool ParseTarget(const std::string& flag, const std::string& value, Target& t) const;
  bool Build();
  bool Cable();
  bool RecordCabling(int node, lldp::LldpListener& listener);
  void JudgeCabling(const json& report);
  bool Degrade();
  void RunAcceptance();
  std::vector<std::string> NodeArgs(int node) const;
  void Soak();
  bool SoakRun();
  void SampleUsage(const std::stop_token& stop, json& samples);
  void Judge();
  void JudgeNccl(const json& report);
  void JudgeExchange(const json& report);
  std::string ExpectedVerdict() const;
  std::string ExpectedWhy() const;
  std::string Dir(const std::string& name) const { return dir_ + "/" + name; }
  std::string CablingDir(int node) const { return Dir("cabling-node-" + std::to_string(node)); }

  const Options& o_;
  Failures fail_;
  Target target_;
  Target miscabled_;
  bool nccl_ = false;
  int gpus_ = 0;
  std::string dir_;
  std::unique_ptr<SimFleet> fleet_;
};

bool FleetDemo::ParseTarget(const std::string& flag, const std::string& value, Target& t) const {
  if (value == "none") return true;
  if (std::sscanf(value.c_str(), "%d:%d", &t.node, &t.rail) != 2) {
    std::fprintf(stderr, "%s %s: expected NODE:RAIL (1-based) or none\n", flag.c_str(),
                 value.c_str());
    return false;
  }
  if (t.node < 1 || t.node > o_.fleet || t.rail < 1 || t.rail > o_.rails) {
    std::fprintf(stderr, "%s %s: the fleet has nodes 1-%d and rails 1-%d\n", flag.c_str(),
                 value.c_str(), o_.fleet, o_.rails);
    return false;
  }
  return true;
}

bool FleetDemo::Parse() {
  if (!ParseTarget("--degrade", o_.degrade, target_) ||
      !ParseTarget("--miscable", o_.miscable, miscabled_)) {
    return false;
  }
  if (miscabled_.node > 0 && o_.rails < 2) {
    std::fprintf(stderr, "--miscable needs another rail's leaf to plug into: --rails 2 or more\n");
    return false;
  }
  gpus_ = CountGpus();
  nccl_ = o_.nccl == "on" || (o_.nccl == "auto" && gpus_ > 0);
  if (nccl_ && gpus_ == 0) {
    std::fprintf(stderr, "--nccl on, but this machine has no GPU (/dev/nvidia*)\n");
    return false;
  }
  char tmpl[] = "/tmp/krt-fleet-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) return false;
  dir_ = tmpl;
  return true;
}

bool FleetDemo::Build() {
  Heading(1, "A simulated fleet: " + std::to_string(o_.fleet) + " nodes x " +
                 std::to_string(o_.rails) + " rails, rail i of every node on switch rail<i>");
  auto fleet = SimFleet::Create(o_.fleet, o_.rails);
  if (!fleet) {
    std::fprintf(stderr, "build the fleet: %s\n", fleet.error().message().c_str());
    return false;
  }
  fleet_ = std::move(*fleet);
  for (int n = 1; n <= o_.fleet; ++n) {
    std::string addrs;
    for (int r = 1; r <= o_.rails; ++r)
      addrs += "  " + SimFleet::Ifname(r) + " " + SimFleet::Address(n, r);
    std::printf("  node-%-3d %s\n", n, addrs.c_str());
  }
  return Cable();
}

// The leaves send LLDP; each node hears its rails' switches and records them where its device
// plugin would (the node contract's cabling record), which its rdma-validate sends to rank 0
// (--cabling).
bool FleetDemo::Cable() {
  Heading(2, "LLDP: each rail's leaf, as each node's device plugin records it");
  std::optional<std::pair<int, int>> wrong;
  if (miscabled_.node > 0) wrong = std::pair{miscabled_.node, miscabled_.rail};
  if (auto sent = fleet_->AnnounceLldp(wrong); !sent) {
    fail_("the leaves' LLDP: " + sent.error().message());
    return false;
  }
  if (wrong) {
    std::printf("  node-%d rail %d is plugged into %s (the demo's planted miscabling)\n",
                miscabled_.node, miscabled_.rail,
                SimFleet::Leaf(miscabled_.rail % o_.rails + 1).c_str());
  }
  lldp::PacketLldpListener listener;
  for (int n = 1; n <= o_.fleet; ++n) {
    if (!RecordCabling(n, listener)) return false;
  }
  return true;
}

bool FleetDemo::RecordCabling(int node, lldp::LldpListener& listener) {
  std::vector<std::string> netdevs;
  for (int r = 1; r <= o_.rails; ++r) netdevs.push_back(SimFleet::Ifname(r));
  Result<lldp::Heard> heard = lldp::Heard{};
  auto ran = fleet_->Node(node).RunIn([&] {
    heard = listener.Listen(netdevs, std::chrono::seconds(10), lldp::ListenUntil::kEachHeard);
  });
  if (!ran || !heard) {
    fail_("node-" + std::to_string(node) +
          " listening for LLDP: " + (!ran ? ran.error().message() : heard.error().message()));
    return false;
  }
  std::vector<contract::CablingRecord> recs;
  std::string shown;
  for (int r = 1; r <= o_.rails; ++r) {
    auto it = heard->neighbors.find(SimFleet::Ifname(r));
    if (it == heard->neighbors.end() || it->second.ttl_s == 0) continue;  // silent, or withdrawn
    rails::RailNeighbor rail{.rail = r, .hca = SimFleet::Ifname(r), .netdev = SimFleet::Ifname(r)};
    recs.push_back(contract::CablingRecordOf(rail, it->second, std::time(nullptr)));
    shown += "  " + rail.netdev + " -> " + it->second.Switch() + " " + it->second.Port();
  }
  std::printf("  node-%-3d%s\n", node, shown.c_str());
  if (recs.size() != static_cast<size_t>(o_.rails))
    fail_("node-" + std::to_string(node) + " heard " + std::to_string(recs.size()) + " of " +
          std::to_string(o_.rails) + " leaves");
  if (auto w = contract::RecordCabling(CablingDir(node), recs); !w) {
    fail_("record node-" + std::to_string(node) + "'s cabling: " + w.error().message());
    return false;
  }
  return true;
}

bool FleetDemo::Degrade() {
  Heading(3, "Degrade one cable, both directions");
  if (target_.node == 0) {
    std::printf("  nothing degraded (--degrade none): the fleet must pass\n");
    return true;
  }
  Result<void> r = o_.degrade_kind == "loss"
                       ? fleet_->Lose(target_.node, target_.rail, o_.degrade_loss)
                       : fleet_->LimitRate(target_.node, target_.rail,
                                           static_cast<uint64_t>(o_.degrade_gbps * 1e9));
  if (!r) {
    fail_("degrade node-" + std::to_string(target_.node) + " rail " + std::to_string(target_.rail) +
          ": " + r.error().message());
    return false;
  }
  char what[64];
  if (o_.degrade_kind == "loss") {
    std::snprintf(what, sizeof what, "drops %.1f%% of packets (netem)", o_.degrade_loss);
  } else {
    std::snprintf(what, sizeof what, "limited to %.2f Gbit/s (tbf)", o_.degrade_gbps);
  }
  std::printf("  node-%d rail %d (%s): %s\n", target_.node, target_.rail,
              SimFleet::Ifname(target_.rail).c_str(), what);
  return true;
}

std::vector<std::string> FleetDemo::NodeArgs(int node) const {
  std::string n = std::to_string(node);
  // The simulated fabric shares this machine's cores: healthy pairs vary more than on a real
  // fabric, and the degraded cable is several times slower, not 20%: --min-fleet-fraction 0.5.
  // clang-format off
  return {o_.validate_bin, "--mode", "acceptance", "--transport", "socket",
          "--expect", fleet_->Expect(), "--rank", std::to_string(node - 1),
          "--world-size", std::to_string(o_.fleet), "--comm-id", SimFleet::Address(1, 1) + ":29500",
          "--node-name", "node-" + n, "--size", o_.fleet_size, "--iters", "5", "--warmup", "2",
          "--timeout", "60", "--pairs", "always",
          "--json", Dir("node-" + n + ".json"), "--log-dir", Dir("logs-node-" + n),
          "--termination-log", "/nonexistent", "--html", Dir("node-" + n + ".html"),
          "--cabling", CablingDir(node)};
  // clang-format on
}

// Every 5 s, each node's rail counters (a device plugin's scrape interval, as Prometheus would
// record them), until stopped.
void FleetDemo::SampleUsage(const std::stop_token& stop, json& samples) {
  auto start = std::chrono::steady_clock::now();
  for (auto next = start; !stop.stop_requested(); next += std::chrono::seconds(5)) {
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (int n = 1; n <= o_.fleet; ++n) {
      for (int r = 1; r <= o_.rails; ++r) {
        auto b = fleet_->Bytes(n, r);
        if (b)
          samples.push_back(
              {{"t", t}, {"node", n}, {"rail", r}, {"tx", b->first}, {"rx", b->second}});
      }
    }
    while (!stop.stop_requested() &&
           std::chrono::steady_clock::now() < next + std::chrono::seconds(5))
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

// The ring again and again (acceptance, --pairs never: the demo's pods' traffic, with each node's
// own NCCL_HOSTID) for --soak seconds, while every rail's bytes are sampled.
void FleetDemo::Soak() {
  Heading(4, "NCCL AllReduces on every node for " + std::to_string(o_.soak) +
                 " s, each rail's bytes sampled every 5 s");
  json samples = json::array();
  auto start = std::chrono::steady_clock::now();
  int runs = 0;
  {
    std::jthread sampler([&](std::stop_token st) { SampleUsage(st, samples); });
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(o_.soak)) {
      ++runs;
      if (!SoakRun()) break;
    }
  }
  std::string out = o_.usage_out.empty() ? Dir("usage.json") : o_.usage_out;
  json doc = {{"interval_s", 5},
              {"nodes", o_.fleet},
              {"rails", o_.rails},
              {"degrade", o_.degrade},
              {"degradeGbps", o_.degrade_gbps},
              {"devices", o_.soak_devices.empty() ? fleet_->Expect() : o_.soak_devices},
              {"runs", runs},
              {"samples", samples}};
  if (auto w = WriteFileAtomic(out, doc.dump()); !w) {
    fail_("write the usage samples: " + w.error().message());
  }
  std::printf("  %d runs, %zu samples written to %s\n", runs, samples.size(), out.c_str());
}

// One ring on every node at once (the acceptance's, pairs never, --soak-devices as what the
// pods expect); false when a node could not run it.
bool FleetDemo::SoakRun() {
  std::vector<pid_t> pids;
  for (int n = 1; n <= o_.fleet; ++n) {
    std::vector<std::string> args = NodeArgs(n);
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      if (args[i] == "--pairs") args[i + 1] = "never";
      if (args[i] == "--expect" && !o_.soak_devices.empty()) args[i + 1] = o_.soak_devices;
      if (args[i] == "--iters") args[i + 1] = "50";
    }
    std::string gpu = std::to_string((n - 1) % std::max(1, gpus_));
    auto env = ToolEnv({"CUDA_VISIBLE_DEVICES=" + gpu, "NODE_NAME=node-" + std::to_string(n)});
    pids.push_back(
        Start(fleet_->Node(n), args, env, Dir("soak-node-" + std::to_string(n) + ".txt")));
  }
  int failed = 0;
  for (pid_t p : pids) failed += Wait(p) >= 2 ? 1 : 0;
  if (failed > 0) fail_("a soak run could not run on " + std::to_string(failed) + " node(s)");
  return failed == 0;
}

void FleetDemo::RunAcceptance() {
  Heading(4, "rdma-validate --mode acceptance on every node (rank 0 on node-1 coordinates)");
  if (nccl_ && gpus_ < o_.fleet) {
    std::printf(
        "  GPUs shared: %d nodes on %d GPU(s) (node n uses GPU (n-1) mod %d); each node's own "
        "NCCL_HOSTID keeps their traffic on the fabric\n",
        o_.fleet, gpus_, gpus_);
  }
  if (!nccl_) std::printf("  SKIPPED NCCL: no GPU here; the nodes still join and report\n");
  auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  for (int n = 1; n <= o_.fleet; ++n) {
    (void)MakeDirs(Dir("logs-node-" + std::to_string(n)));
    std::string gpu = nccl_ ? std::to_string((n - 1) % gpus_) : "";
    auto env = ToolEnv({"CUDA_VISIBLE_DEVICES=" + gpu, "NODE_NAME=node-" + std::to_string(n)});
    pids.push_back(
        Start(fleet_->Node(n), NodeArgs(n), env, Dir("node-" + std::to_string(n) + ".txt")));
  }
  std::vector<int> codes;
  for (pid_t p : pids) codes.push_back(Wait(p));
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto table = ReadFile(Dir("node-1.txt"));
  std::printf("%s", table ? table->c_str() : "  (rank 0 wrote nothing)\n");
  for (int n = 1; n <= o_.fleet; ++n) {
    std::printf("  node-%d: exit %d\n", n, codes[static_cast<size_t>(n - 1)]);
    if (codes[static_cast<size_t>(n - 1)] >= 2)
      fail_("node-" + std::to_string(n) + " could not run its part");
  }
  std::printf("  acceptance took %.1f s\n", secs);
}

void FleetDemo::JudgeNccl(const json& report) {
  std::vector<std::string> named;
  for (const auto& c : report.value("culprits", json::array())) {
    std::string node = c["node"].is_string() ? c["node"].get<std::string>() : "every node";
    named.push_back(node + "/" + c.value("hca", "*"));
  }
  std::string want = "node-" + std::to_string(target_.node) + "/" + SimFleet::Ifname(target_.rail);
  if (target_.node == 0) {
    if (report.value("verdict", "") != "pass") fail_("a healthy fleet did not pass acceptance");
    return;
  }
  if (named != std::vector<std::string>{want}) {
    std::string got;
    for (const auto& s : named) got += (got.empty() ? "" : ", ") + s;
    fail_("the report should name exactly " + want +
          ", it names: " + (got.empty() ? "nothing" : got));
  } else {
    std::printf("  found it: the report names %s, and nothing else\n", want.c_str());
  }
  if (report.value("verdict", "") != "fail") fail_("the degraded fleet should fail acceptance");
}

void FleetDemo::JudgeExchange(const json& report) {
  int joined = 0;
  for (const auto& n : report.value("nodes", json::array())) {
    std::string problems = n.value("problems", json::array()).dump();
    if (problems.find("never reached the coordinator") != std::string::npos) {
      fail_(n.value("name", "?") + " never reached rank 0 over the simulated fabric");
    } else if (problems.find("did not take part") != std::string::npos) {
      // It reached rank 0 and said why it cannot run NCCL: no GPU, a build without CUDA, or no
      // libnccl.so.2 where a CUDA build looks for it (a fresh machine with CUDA but no NCCL).
      ++joined;
    }
  }
  if (joined != o_.fleet) {
    fail_(std::to_string(joined) + " of " + std::to_string(o_.fleet) +
          " nodes joined and reported why they cannot run NCCL");
  } else {
    std::printf(
        "  every node joined rank 0 over rail 1 and reported it had no GPU to run NCCL on\n");
  }
}

// What a correct acceptance says of this fleet, and why: the demo plants a fault or has no GPU,
// so "fail" is often the right answer, and the demo passes when the report is right.
std::string FleetDemo::ExpectedVerdict() const {
  return nccl_ && target_.node == 0 ? "pass" : "fail";
}

std::string FleetDemo::ExpectedWhy() const {
  if (!nccl_) {
    return "no node has a GPU, so none can run NCCL; the demo proves every node reached rank 0";
  }
  if (target_.node == 0) return "a healthy fleet";
  return "node-" + std::to_string(target_.node) + "'s " + SimFleet::Ifname(target_.rail) +
         " was made slow on purpose, and the report must name it";
}

void FleetDemo::Judge() {
  Heading(5, "What the fleet report says");
  auto text = ReadFile(Dir("node-1.json"));
  json report = text ? json::parse(*text, nullptr, false) : json();
  if (!report.is_object() || report.value("kind", "") != "kuberdma-acceptance") {
    fail_("rank 0 wrote no fleet report (" + Dir("node-1.json") + ")");
    return;
  }
  std::printf("  verdict %s, ring busbw %.2f GB/s, fleet median pair busbw %.2f GB/s\n",
              report.value("verdict", "?").c_str(), report["ring"].value("busbwGBps", 0.0),
              report.value("fleetMedianGBps", 0.0));
  std::printf("  (the demo expects \"%s\": %s)\n", ExpectedVerdict().c_str(),
              ExpectedWhy().c_str());
  if (nccl_) {
    JudgeNccl(report);
  } else {
    JudgeExchange(report);
  }
  JudgeCabling(report);
}

// Exactly the planted miscabling is named, in the node's problems and its cabling, and no other.
void FleetDemo::JudgeCabling(const json& report) {
  std::vector<std::string> named;
  for (const auto& n : report.value("nodes", json::array())) {
    if (!n.contains("cabling")) fail_(n.value("name", "?") + " sent rank 0 no cabling");
    for (const auto& c : n.value("cabling", json::array())) {
      if (c.contains("finding"))
        named.push_back(n.value("name", "?") + "/" + c.value("netdev", ""));
    }
  }
  std::string want = miscabled_.node > 0 ? "node-" + std::to_string(miscabled_.node) + "/" +
                                               SimFleet::Ifname(miscabled_.rail)
                                         : "";
  if (named != (want.empty() ? std::vector<std::string>{} : std::vector<std::string>{want})) {
    std::string got;
    for (const auto& x : named) got += (got.empty() ? "" : ", ") + x;
    fail_("the report's cabling should name " + (want.empty() ? "nothing" : want) +
          ", it names: " + (got.empty() ? "nothing" : got));
    return;
  }
  std::string problems = report.value("problems", json::array()).dump();
  if (!want.empty() &&
      problems.find("cabling: node-" + std::to_string(miscabled_.node)) == std::string::npos) {
    fail_("the miscabled rail is not among the fleet's problems");
    return;
  }
  std::printf("  cabling: %s\n",
              want.empty() ? "every rail on its own leaf, as the report says"
                           : ("the report names " + want + ", on " +
                              SimFleet::Leaf(miscabled_.rail % o_.rails + 1) + ", and nothing else")
                                 .c_str());
}

int FleetDemo::Run() {
  if (!Parse()) return 2;
  if (!Build()) return 1;
  if (Degrade() && o_.soak > 0) {
    Soak();
  } else if (fail_.count() == 0) {
    RunAcceptance();
    Judge();
  }
  fleet_.reset();
  if (fail_.count() == 0 && !o_.keep) {
    std::filesystem::remove_all(dir_);
  } else {
    std::printf("\n  reports and NCCL logs kept in %s\n", dir_.c_str());
  }
  std::printf("\n%s (%d failure(s))\n",
              fail_.count() == 0
                  ? "FLEET DEMO PASSED: the acceptance report said what this fleet deserves"
                  : "FLEET DEMO FAILED",
              fail_.count());
  return fail_.count() == 0 ? 0 : 1;
}

}  // namespace

int RunFleetDemo(const Options& o) { return FleetDemo(o).Run(); }

}  // namespace kuberdma::demo
