// SPDX-License-Identifier: Apache-2.0
// rdma-validate: proves, inside a pod, that NCCL uses every injected HCA; in acceptance mode,
// accepts a fleet of nodes and names the slow one. See docs/validator.md.
//
//   rdma-validate [--mode single|multi-pod|acceptance] [--transport ib|socket|verbs|ucx|mpi|gloo]
//                 [--expect mlx5_0,mlx5_1] [--size 256M] [--iters 20] [--timeout 60]
//                 [--min-busbw GBps] [--json FILE]
//   rdma-validate --mode acceptance [--pairs always|auto|never] [--min-fleet-fraction 0.8]
//                 [--baseline FILE] [--baseline-tolerance 0.1] [--push-gateway URL]
//
// Exit: 0 pass, 1 validation failed, 2 environment or usage error, 3 timeout.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <string_view>
#include <utility>

#include "kuberdma/base/files.h"
#include "kuberdma/base/version.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/contract/pod_env.h"
#include "kuberdma/link/netlink_addr_ops.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/sysfs/topology.h"
#include "kuberdma/validator/acceptance_run.h"
#include "kuberdma/validator/comm_plan.h"
#include "kuberdma/validator/gid_env.h"
#include "kuberdma/validator/push.h"
#include "kuberdma/validator/report_html.h"
#include "kuberdma/validator/validate.h"

namespace {

using namespace kuberdma::validator;  // NOLINT(google-build-using-namespace): a main() file

// A size option's value, or (after saying which option and why) nullopt: exit 2.
std::optional<size_t> SizeOption(const char* option, const std::string& text) {
  auto v = ParseByteSize(text);
  if (v) return *v;
  std::fprintf(stderr, "rdma-validate: %s: %s\n", option, v.error().message().c_str());
  return std::nullopt;
}

struct Cli {
  Options o;
  std::string mode = "single", transport = "ib", size = "256M", json_path,
              term = "/dev/termination-log";
  // nccl-tests' knobs: the collective(s), a sweep, the datatype, op and root, the check, CSV.
  std::string collective = "all_reduce", min_bytes, max_bytes, step_bytes, datatype = "float",
              op = "sum", csv_path, html_path, html_report;
  double step_factor = 0;
  int check = 1;
  std::map<std::string, std::string> nccl_tests_only;  // -t, -a, ...: refused, naming why
  bool nccl_env = false;
  bool own_gids = false;
  // --env: the communication libraries to tell, and how the pod runs them.
  std::string env_libs, control_interface = "eth0";
  int local_rank = -1;
  bool one_process = false;
};

// Whether NCCL runs at all: only the inventory, or NCCL required.
void AddNcclRequirement(CLI::App& app, Options& o) {
  auto* inventory =
      app.add_flag("--inventory-only", o.inventory_only,
                   "check what the pod has and run no NCCL: the only way a run that proves no "
                   "traffic passes");
  app.add_flag("--require-nccl", o.require_nccl,
               "fail (exit 1) when NCCL cannot run here (no CUDA device, no libnccl): the "
               "default; kept for scripts that pass it")
      ->excludes(inventory);
}

// nccl-tests' options with no equivalent here, and why (or what to use instead): taken by the
// parser so that the refusal can say so.
constexpr std::array<std::pair<std::string_view, std::string_view>, 9> kNcclTestsOnly = {
    {{"-t", "threads per process: rdma-validate runs one rank per GPU in its own process (-g)"},
     {"-a", "averaging across ranks: the report shows every rank's and the slowest"},
     {"-p", "parallel init: each rank initialises in its own process already"},
     {"-z", "blocking collectives: rdma-validate times each phase on the stream"},
     {"-G", "CUDA graphs: not used; --repeats times several phases instead"},
     {"-m", "aggregated iterations: not supported"},
     {"-C", "the report's time column: the report has both times already"},
     {"-N", "run cycles: use --repeats"},
     {"-T", "a timeout in nccl-tests' form: use --timeout SECONDS"}}};

// nccl-tests' options, under its short names too.
void AddCollectiveOptions(CLI::App& app, Cli& c) {
  app.add_option("--collective", c.collective,
                 "all_reduce (default), all_gather, reduce_scatter, alltoall, broadcast, reduce, "
                 "sendrecv, a comma list, or all");
  app.add_option("-b,--minbytes", c.min_bytes, "sweep: the first size (nccl-tests' -b)");
  app.add_option("-e,--maxbytes", c.max_bytes, "sweep: the last size (nccl-tests' -e)");
  app.add_option("-f,--stepfactor", c.step_factor, "sweep: multiply the size by this (-f)");
  app.add_option("-i,--stepbytes", c.step_bytes, "sweep: add this to the size (-i)");
  app.add_option("-d,--datatype", c.datatype,
                 "int8 uint8 int32 uint32 int64 uint64 half bfloat16 float (default) double");
  app.add_option("-o,--op", c.op, "the reductions' op: sum (default) prod max min avg");
  app.add_option("-r,--root", c.o.spec.root, "broadcast's and reduce's root rank (default 0)");
  app.add_option("-c,--check", c.check,
                 "count wrong result elements after each size (1, default; 0: off)")
      ->check(CLI::Range(0, 1));
  app.add_option("--csv", c.csv_path, "also write the per-size table as CSV to this file");
  for (const auto& [flag, why] : kNcclTestsOnly) {
    app.add_option(std::string(flag), c.nccl_tests_only[std::string(flag)])->group("");
  }
  app.add_option("--repeats", c.o.repeats,
                 "timed phases of --iters each, the figure their median (acceptance: 3 when not "
                 "given)")
      ->check(CLI::Range(0, 100));
}

// nccl-tests' options that have no equivalent: exit 2 naming what to use instead.
bool RefuseNcclTestsOnly(const Cli& c) {
  for (const auto& [flag, why] : kNcclTestsOnly) {
    if (c.nccl_tests_only.at(std::string(flag)).empty()) continue;
    std::fprintf(stderr, "rdma-validate: nccl-tests' %.*s has no equivalent here (%.*s)\n",
                 static_cast<int>(flag.size()), flag.data(), static_cast<int>(why.size()),
                 why.data());
    return false;
  }
  return true;
}

// The fleet acceptance's ring and pair rounds run NCCL (ib, socket) or the verbs probe; a library's
// own transport is proven between the pods of one job. Exit 2 rather than an NCCL run not asked
// for.
bool RefuseLibraryAcceptance(const Cli& c) {
  Transport t = c.o.transport;
  if (c.o.mode != Mode::kAcceptance ||
      (t != Transport::kUcx && t != Transport::kMpi && t != Transport::kGloo)) {
    return true;
  }
  std::fprintf(stderr,
               "rdma-validate: --mode acceptance runs NCCL (--transport ib or socket) or the verbs "
               "probe (--transport verbs) across the fleet; --transport %s is proven between the "
               "pods of one job: %s\n",
               c.transport.c_str(),
               t == Transport::kMpi ? "run it under the job's mpirun, one rank per pod"
                                    : "--mode multi-pod with --rank, --world-size and --comm-id");
  return false;
}

bool Refuse(const kuberdma::Error& e) {
  std::fprintf(stderr, "rdma-validate: %s\n", e.message().c_str());
  return false;
}

// The collective options into `o`; false (after saying why) when they do not parse.
bool ParseCollectiveOptions(Cli& c) {
  Options& o = c.o;
  o.collectives.clear();
  std::string list = c.collective == "all" ? "" : c.collective;
  if (c.collective == "all") o.collectives = AllCollectives();
  for (size_t at = 0; at < list.size();) {
    size_t end = std::min(list.find(',', at), list.size());
    auto k = ParseCollective(list.substr(at, end - at));
    if (!k) return Refuse(k.error());
    o.collectives.push_back(*k);
    at = end + 1;
  }
  auto t = ParseDataType(c.datatype);
  auto op = ParseRedOp(c.op);
  if (!t) return Refuse(t.error());
  if (!op) return Refuse(op.error());
  o.spec.type = *t;
  o.spec.op = *op;
  o.check = c.check == 1;
  if (c.min_bytes.empty() && c.max_bytes.empty()) return true;
  auto lo = SizeOption("-b", c.min_bytes.empty() ? c.max_bytes : c.min_bytes);
  auto hi = SizeOption("-e", c.max_bytes.empty() ? c.min_bytes : c.max_bytes);
  auto step = c.step_bytes.empty() ? std::optional<size_t>(0) : SizeOption("-i", c.step_bytes);
  if (!lo || !hi || !step) return false;
  auto sizes = SweepSizes(*lo, *hi, c.step_factor > 0 ? c.step_factor : (*step > 0 ? 0 : 2), *step);
  if (!sizes) return Refuse(sizes.error());
  o.sizes = *sizes;
  o.bytes = o.sizes.back();
  return true;
}

// Shared HCAs: the NCCL variables that pick this pod's own GIDs.
void AddGidOptions(CLI::App& app, Cli& c) {
  app.add_flag("--nccl-env", c.nccl_env,
               "print `export` lines of the NCCL variables that make NCCL use this pod's own "
               "GIDs on RoCE HCAs shared with other pods (eval them before NCCL starts); exit 1 "
               "saying why when none can");
  app.add_option("--env", c.env_libs,
                 "print `export` lines of what each library needs to use this pod's HCAs, RoCE "
                 "GIDs and control interface (nccl, rccl, ucx, mpi, nvshmem, mooncake, nixl, "
                 "gloo, oneccl: a comma list, or all); a variable the pod spec set is kept; exit "
                 "1 saying why when a library cannot be told the pod's own GIDs");
  app.add_option("--local-rank", c.local_rank,
                 "--env for one process, the one that drives this GPU (CUDA index): the HCAs "
                 "beside it")
      ->check(CLI::Range(0, 1023));
  app.add_flag("--one-process", c.one_process,
               "--env for one process that drives every HCA (a KV-cache server): stripe over all");
  app.add_option("--control-interface", c.control_interface,
                 "--env: the pod's cluster interface, for bootstrap and TCP (default eth0)");
  app.add_flag("--own-gids", c.own_gids,
               "shared HCAs: run NCCL with --nccl-env's variables and expect only the HCAs with "
               "this pod's GIDs (exit 1 saying why when no variable can pick them)");
}

// What a run is held to: busbw, line rate, GPUDirect, each device's share.
void AddThresholdOptions(CLI::App& app, Options& o) {
  app.add_option("--min-busbw", o.min_busbw_gbps, "fail below this busbw (GB/s)");
  app.add_option("--min-line-rate,--min-busbw-fraction", o.min_line_rate,
                 "fail an HCA whose part of the largest size's bandwidth is below this fraction of "
                 "its port rate (default 0.5; 0: off; no rate known: skipped with a warning)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_flag("--allow-no-gdr", o.allow_no_gdr,
               "warn instead of failing when NCCL stages an HCA's traffic through host memory "
               "although a GPU shares its PCIe switch (no nvidia-peermem or DMA-BUF here)");
  app.add_option("--min-share", o.min_share,
                 "each device must carry this fraction of an even split")
      ->check(CLI::Range(0.0, 1.0));
}

void AddRunOptions(CLI::App& app, Cli& c) {
  Options& o = c.o;
  app.add_option("--mode", c.mode,
                 "single (every rank in this pod), multi-pod (one pod a node of the world), "
                 "acceptance (a fleet: ring, then pair rounds that find a slow node or rail)")
      ->check(CLI::IsMember({"single", "multi-pod", "acceptance"}));
  app.add_option(
         "--transport", c.transport,
         "ib (default; no silent fallback), socket (TCP-only fabrics, tests), verbs (no NCCL or "
         "GPU: an RDMA write and ping-pong per rail with the peer pod, like ib_write_bw), or a "
         "library other than NCCL through its own transport on the pod's NICs: ucx (tag "
         "rendezvous and RMA with the peer pod), mpi (allreduce and alltoall through pml ucx, "
         "under mpirun), gloo (PyTorch's allreduce over its interfaces)")
      ->check(CLI::IsMember({"ib", "socket", "verbs", "ucx", "mpi", "gloo"}));
  app.add_option("--expect", o.expect,
                 "expected HCAs (ib) or netdevs (socket); default: the device plugin's env");
  app.add_option(
      "--nccl-devices", o.nccl_devices,
      "tell NCCL to use these instead of the expected set (reproduce a misconfiguration)");
  AddGidOptions(app, c);
  app.add_option("--size", c.size, "the collective's size without a sweep (e.g. 256M)");
  app.add_option("-n,--iters", o.iters, "timed iterations (nccl-tests' -n)")
      ->check(CLI::Range(1, 100000));
  app.add_option("-w,--warmup", o.warmup, "warm-up iterations (nccl-tests' -w)")
      ->check(CLI::Range(0, 1000));
  app.add_option("--timeout", o.timeout_s,
                 "seconds for communicator init and each collective phase")
      ->check(CLI::Range(1, 3600));
  AddThresholdOptions(app, o);
  app.add_option("-g,--gpus", o.gpus,
                 "local ranks, one GPU each (nccl-tests' -g with one thread; default: every GPU; "
                 "more than the GPUs share them)");
  app.add_option("--rank", o.rank, "multi-pod/acceptance: this pod's rank (default: from the env)");
  app.add_option("--world-size", o.world_size, "multi-pod/acceptance: number of pods");
  app.add_option("--comm-id", o.comm_id,
                 "multi-pod/acceptance: NCCL_COMM_ID, <rank-0 address>:<port>");
  app.add_option("--log-dir", o.log_dir, "keep NCCL's logs here");
  app.add_option("--json", c.json_path, "write the JSON report here ('-' for stdout)");
  app.add_option("--termination-log", c.term, "one-line summary file, when it exists");
  AddNcclRequirement(app, o);
}

void AddAcceptanceOptions(CLI::App& app, Cli& c) {
  Options& o = c.o;
  app.add_option("--node-name", o.node_name, "acceptance: this node's name (default: $NODE_NAME)");
  app.add_option("--coord-port", o.coord_port,
                 "acceptance: rank 0's coordinator port (default: NCCL port + 1)");
  app.add_option("--pairs", o.pairs,
                 "acceptance: pair rounds always (a baseline per node), auto "
                 "(only when the ring is slow), never")
      ->check(CLI::IsMember({"always", "auto", "never"}));
  app.add_option(
         "--min-fleet-fraction", o.min_fleet_fraction,
         "acceptance: flag a node, HCA or pair rail below this fraction of the fleet's median")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option(
      "--baseline", o.baseline_file,
      "acceptance: an earlier fleet report to compare with (absent: compare with nothing)");
  app.add_option("--baseline-tolerance", o.baseline_tolerance,
                 "acceptance: a drop beyond this fraction of the baseline is a regression")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--taint-dir", o.taint_dir,
                 "acceptance: write this node's HCAs the pass named slow here (the node's "
                 "allocations directory): the DRA driver taints them until the next pass");
  app.add_option("--taint-effect", o.taint_effect,
                 "acceptance: those taints' effect, NoSchedule or None (shown, not acted on)")
      ->check(CLI::IsMember({"NoSchedule", "None"}));
  app.add_option("--cabling", o.cabling_dir,
                 "acceptance: the directory of the node's cabling.json (rdma-device-plugin "
                 "--lldp): rank 0 names a rail cabled to another rail's switch");
  app.add_option("--push-gateway", o.push_gateway,
                 "acceptance (rank 0): push gauges to this Pushgateway");
  app.add_option("--join-timeout", o.join_timeout_s,
                 "acceptance: seconds rank 0 waits for the pods (default max(120, 5 x --timeout))");
  app.add_option("--html", c.html_path,
                 "acceptance (rank 0), --html-report: write the fleet report as one HTML page");
  app.add_option("--html-report", c.html_report,
                 "run nothing: turn this fleet report JSON (and --baseline) into --html's page");
}

// The --nccl-env plan for this namespace's addresses and the GID tables it sees; nullopt after
// saying why it could not be read.
std::optional<GidEnvPlan> PlanForThisPod() {
  auto root = kuberdma::sysfs::SysfsRoot::FromEnv();
  auto hcas = kuberdma::sysfs::DiscoverHcas(root, kuberdma::sysfs::HcaDetail::kTables);
  if (!hcas) {
    std::fprintf(stderr, "rdma-validate: %s\n", hcas.error().message().c_str());
    return std::nullopt;
  }
  std::vector<GidTable> tables;
  for (const auto& h : *hcas) {
    if (h.link_layer() != kuberdma::sysfs::LinkLayer::kEthernet || h.ports.empty()) continue;
    tables.push_back({h.name, h.ports.front().number, h.ports.front().gids});
  }
  GidEnvPlan plan = PlanNcclGidEnv(tables, kuberdma::netns::NamespaceIpv4());
  for (const auto& n : plan.notes) std::fprintf(stderr, "rdma-validate: %s\n", n.c_str());
  if (!plan.ok) {
    std::fprintf(stderr, "rdma-validate: no NCCL variable can pick this pod's GIDs: %s\n",
                 plan.why_not.c_str());
  }
  return plan;
}

// --nccl-env: the plan as `export` lines. Exit 0, 1 when no variable can work, 2 unreadable.
int PrintNcclEnv() {
  auto plan = PlanForThisPod();
  if (!plan) return 2;
  if (!plan->ok) return 1;
  std::fputs(FormatExports(*plan).c_str(), stdout);
  return 0;
}

// The CUDA index (GPUs in PCI order) of the GPU that shares each HCA's PCIe switch, where one does.
std::map<std::string, int> NearestGpus(const kuberdma::sysfs::SysfsRoot& root,
                                       const std::vector<kuberdma::sysfs::Hca>& hcas) {
  std::map<std::string, int> out;
  auto gpus = kuberdma::sysfs::DiscoverGpus(root);
  if (!gpus) return out;
  for (const auto& h : hcas) {
    auto best = kuberdma::sysfs::PciDistance::kPhb;
    for (size_t i = 0; i < gpus->size(); ++i) {
      const auto& g = (*gpus)[i];
      auto d = kuberdma::sysfs::Distance(g.device_path, g.numa_node, h.device_path, h.numa_node);
      if (d < best) {
        best = d;
        out[h.name] = static_cast<int>(i);
      }
    }
  }
  return out;
}

// The first IPv4 address of `ifname` in this namespace, "" when none.
std::string AddressOf(const std::string& ifname) {
  kuberdma::link::NetlinkLinkOps links;
  kuberdma::link::NetlinkAddrOps addrs;
  auto here = kuberdma::netns::NetNs::Current();
  if (!here) return "";
  auto l = links.GetByName(*here, ifname);
  auto ips = l ? addrs.ListAddresses(*here, l->ifindex)
               : kuberdma::Result<std::vector<kuberdma::link::IpPrefix>>{};
  for (const auto& ip : ips ? *ips : std::vector<kuberdma::link::IpPrefix>{}) {
    if (ip.family == 4) return ip.address;
  }
  return "";
}

// --env: what each library needs, as `export` lines. Exit 0; 1 when they cannot be told the pod's
// own GIDs (said why); 2 when the libraries or the node cannot be read.
int PrintCommEnv(const Cli& c) {
  auto libs = kuberdma::contract::ParseLibraries(c.env_libs);
  if (!libs) {
    std::fprintf(stderr, "rdma-validate: --env: %s\n", libs.error().message().c_str());
    return 2;
  }
  auto root = kuberdma::sysfs::SysfsRoot::FromEnv();
  auto hcas = kuberdma::sysfs::DiscoverHcas(root, kuberdma::sysfs::HcaDetail::kTables);
  if (!hcas) {
    std::fprintf(stderr, "rdma-validate: %s\n", hcas.error().message().c_str());
    return 2;
  }
  PodCommInputs in{.own_ipv4 = kuberdma::netns::NamespaceIpv4(),
                   .control_netdev = c.control_interface,
                   .control_address = AddressOf(c.control_interface),
                   .layout = c.one_process ? kuberdma::contract::ProcessLayout::kOneForAll
                                           : kuberdma::contract::ProcessLayout::kOnePerGpu,
                   .nearest_gpu = NearestGpus(root, *hcas)};
  if (c.local_rank >= 0) in.local_rank = c.local_rank;
  for (const auto& h : *hcas) {
    if (h.link_layer() != kuberdma::sysfs::LinkLayer::kEthernet || h.ports.empty()) continue;
    in.tables.push_back({h.name, h.ports.front().number, h.ports.front().gids});
  }
  auto getenv = [](const char* k) { return std::getenv(k); };
  if (auto pod = kuberdma::contract::Read(getenv); pod && pod->hcas) in.allocated = pod->hcas;
  PodCommPlan plan = PlanPodComm(*libs, in);
  for (const auto& n : plan.notes) std::fprintf(stderr, "rdma-validate: %s\n", n.c_str());
  if (!plan.why_not.empty()) {
    std::fprintf(stderr, "rdma-validate: --env %s: %s\n", c.env_libs.c_str(), plan.why_not.c_str());
    return 1;
  }
  std::vector<std::string> kept;
  std::string exports = FormatCommExports(plan, getenv, &kept);
  for (const auto& lib : plan.libraries) {
    for (const auto& n : lib.notes) {
      std::fprintf(stderr, "rdma-validate: %s: %s\n",
                   std::string(kuberdma::contract::LibraryName(lib.library)).c_str(), n.c_str());
    }
  }
  for (const auto& k : kept) std::fprintf(stderr, "rdma-validate: %s\n", k.c_str());
  std::fputs(exports.c_str(), stdout);
  return 0;
}

// --own-gids: the plan's variables in this process's environment (NCCL reads them there), and,
// without --expect, only the HCAs with this pod's entries expected. False after saying why not.
bool ApplyOwnGids(Options& o) {
  auto plan = PlanForThisPod();
  if (!plan || !plan->ok) return false;
  for (const auto& [k, v] : plan->vars) {
    ::setenv(k.c_str(), v.c_str(), 1);
    if (k == kuberdma::contract::kNcclIbHca && o.expect.empty()) o.expect = v;
  }
  return true;
}

// Writes a file a flag named and says so on stderr (stdout may carry --json -): what, where,
// how big; or why not. Every file-writing flag goes through here.
bool WriteReported(const char* flag, const std::string& path, const std::string& content,
                   const std::string& what) {
  if (auto w = kuberdma::WriteFileAtomic(path, content); !w) {
    std::fprintf(stderr, "rdma-validate: %s %s: %s\n", flag, path.c_str(),
                 w.error().message().c_str());
    return false;
  }
  std::fprintf(stderr, "rdma-validate: wrote %s (%zu bytes): %s\n", path.c_str(), content.size(),
               what.c_str());
  return true;
}

// The fleet report `doc` (and the --baseline report) as a page at `path`; false after saying why.
bool WriteHtml(const std::string& path, const nlohmann::json& doc, const std::string& baseline) {
  nlohmann::json base;
  if (!baseline.empty()) {
    auto text = kuberdma::ReadFile(baseline);
    base = text ? nlohmann::json::parse(*text, nullptr, false) : nlohmann::json();
  }
  auto page = FleetReportHtml(doc, baseline.empty() ? nullptr : &base);
  if (page) {
    return WriteReported("--html", path, *page,
                         "the fleet report as a page, " + std::to_string(doc["nodes"].size()) +
                             " node(s)" + (baseline.empty() ? "" : ", against " + baseline));
  }
  std::fprintf(stderr, "rdma-validate: %s\n", page.error().message().c_str());
  return false;
}

// --html-report: a saved fleet report to a page. Exit 0, or 2 when it cannot be read or written.
int RenderHtml(const Cli& c) {
  if (c.html_path.empty()) {
    std::fprintf(stderr, "rdma-validate: --html-report needs --html OUT.html\n");
    return 2;
  }
  auto text = kuberdma::ReadFile(c.html_report);
  if (!text) {
    std::fprintf(stderr, "rdma-validate: --html-report %s: %s\n", c.html_report.c_str(),
                 text.error().message().c_str());
    return 2;
  }
  auto doc = nlohmann::json::parse(*text, nullptr, false);
  return WriteHtml(c.html_path, doc, c.o.baseline_file) ? 0 : 2;
}

void Write(const std::string& json_path, const std::string& term, const std::string& text,
           const nlohmann::json& doc, const std::string& summary) {
  std::fputs(text.c_str(), json_path == "-" ? stderr : stdout);
  if (!json_path.empty()) {
    std::string out = doc.dump(2) + "\n";
    if (json_path == "-") {
      std::fputs(out.c_str(), stdout);
    } else {
      (void)WriteReported("--json", json_path, out, "the report as JSON");  // it says why not
    }
  }
  // The kubelet keeps at most 4 KiB of a termination message.
  if (::access(term.c_str(), W_OK) == 0) std::ofstream(term) << summary.substr(0, 4000) << "\n";
}

int Acceptance(Validator& v, const Cli& c) {
  auto getenv = [](const char* k) { return std::getenv(k); };
  AcceptanceOutcome out = RunAcceptance(v, getenv);
  if (out.fleet && !c.o.push_gateway.empty()) {
    auto samples = AcceptanceSamples(out.document, static_cast<double>(std::time(nullptr)));
    if (auto pushed = Push(samples, c.o.push_gateway); !pushed) {
      std::fprintf(stderr, "rdma-validate: %s\n", pushed.error().message().c_str());
      out.text += "  warning: " + pushed.error().message() + "\n";
    }
  }
  if (!c.o.taint_dir.empty() && out.exit_code < 2) {
    std::vector<kuberdma::contract::VerdictRecord> verdicts;
    for (const auto& [hca, why] : out.slow_hcas) {
      verdicts.push_back({.hca = hca, .why = why, .effect = c.o.taint_effect});
    }
    auto written = kuberdma::contract::RecordVerdicts(c.o.taint_dir, verdicts);
    out.text += written ? "  DRA taints: " + std::to_string(verdicts.size()) +
                              " HCA(s) of this node until the next pass\n"
                        : "  warning: " + written.error().message() + "\n";
  }
  // Exit 2 and 3 mean it could not run: say why on stderr, where a pod's error belongs.
  if (out.exit_code >= 2) {
    std::fputs(out.text.c_str(), stderr);
    out.text.clear();
  }
  Write(c.json_path, c.term, out.text, out.document, out.summary);
  if (out.fleet && !c.html_path.empty())
    (void)WriteHtml(c.html_path, out.document, c.o.baseline_file);
  return out.exit_code;
}

// The words of --mode, --transport and --size into the options.
void Resolve(Cli& c) {
  c.o.mode = c.mode == "single" ? Mode::kSingle
                                : (c.mode == "multi-pod" ? Mode::kMultiPod : Mode::kAcceptance);
  for (Transport t : {Transport::kIb, Transport::kSocket, Transport::kVerbs, Transport::kUcx,
                      Transport::kMpi, Transport::kGloo}) {
    if (c.transport == TransportName(t)) c.o.transport = t;
  }
  c.o.one_process = c.one_process;
  c.o.control_interface = c.control_interface;
  // A run by hand that proves nothing fails: only --inventory-only passes on the inventory.
  c.o.require_nccl = !c.o.inventory_only;
}

int Run(int argc, char** argv) {
  CLI::App app{"rdma-validate: prove that NCCL uses every RDMA device this pod was given"};
  app.set_version_flag("--version", kuberdma::kVersionLine);
  Cli c;
  AddRunOptions(app, c);
  AddCollectiveOptions(app, c);
  AddAcceptanceOptions(app, c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  Resolve(c);
  if (c.nccl_env) return PrintNcclEnv();
  if (!c.env_libs.empty()) return PrintCommEnv(c);
  if (!c.html_report.empty()) return RenderHtml(c);
  if (!RefuseNcclTestsOnly(c) || !RefuseLibraryAcceptance(c)) return 2;
  auto size = SizeOption("--size", c.size);
  if (!size) return 2;
  c.o.bytes = *size;
  if (!ParseCollectiveOptions(c)) return 2;
  if (c.o.bytes < 4096 && c.o.sizes.empty()) {
    std::fprintf(stderr,
                 "rdma-validate: --size %s is too small to measure bandwidth (at least 4K)\n",
                 c.size.c_str());
    return 2;
  }
  if (c.own_gids && !ApplyOwnGids(c.o)) return 1;
  kuberdma::link::NetlinkLinkOps links;
  Validator v(c.o, kuberdma::sysfs::SysfsRoot::FromEnv(), links,
              [](const char* k) { return std::getenv(k); });
  if (c.o.mode == Mode::kAcceptance) return Acceptance(v, c);
  Report r = v.Run();
  Write(c.json_path, c.term, r.Table(), r.ToJson(), r.Summary());
  if (!c.csv_path.empty()) {
    std::string csv;
    for (const auto& run : r.runs) csv += ResultCsv(run.spec, run.nranks, run.sizes);
    (void)WriteReported("--csv", c.csv_path, csv,
                        "each run's sizes as CSV");  // a failure is said; the verdict stands
  }
  return r.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rdma-validate: internal error: %s\n", e.what());
    return 2;
  }
}
