// SPDX-License-Identifier: Apache-2.0
// Counters, bandwidth, ranks and expected devices.
#include "kuberdma/validator/checks.h"

#include <cctype>
#include <cstdlib>

#include "kuberdma/contract/comm_env.h"
#include "kuberdma/contract/pod_env.h"

namespace kuberdma::validator {

namespace {

std::optional<int> Int(const char* v) {
  if (v == nullptr || *v == '\0') return std::nullopt;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 0 || n > 1000000) return std::nullopt;
  return static_cast<int>(n);
}

}  // namespace

CounterDelta Delta(uint64_t before, uint64_t after) {
  constexpr uint64_t k32 = 0xffffffffULL;
  CounterDelta d;
  if (after >= before) {
    d.value = after - before;
    d.saturated = after == k32 && before == k32;
    return d;
  }
  if (before <= k32 && after <= k32) {
    d.wrapped = true;
    d.value = (k32 - before) + after + 1;
    return d;
  }
  d.value = 0;  // a 64-bit counter going backwards: reset (driver reload); no claim
  d.wrapped = true;
  return d;
}

const std::vector<std::string>& IbErrorCounters() {
  static const std::vector<std::string> kNames = {"symbol_error",
                                                  "link_downed",
                                                  "link_error_recovery",
                                                  "port_rcv_errors",
                                                  "port_xmit_discards",
                                                  "port_rcv_remote_physical_errors",
                                                  "local_link_integrity_errors",
                                                  "excessive_buffer_overrun_errors",
                                                  "port_xmit_constraint_errors",
                                                  "port_rcv_constraint_errors"};
  return kNames;
}

Result<PortCounters> ReadPortCounters(const sysfs::SysfsRoot& root, const std::string& hca,
                                      uint32_t port) {
  std::string dir = "class/infiniband/" + hca + "/ports/" + std::to_string(port) + "/counters/";
  auto x = root.ReadAttr(dir + "port_xmit_data");
  auto r = root.ReadAttr(dir + "port_rcv_data");
  if (!x || !r)
    return Fail(ErrorCode::kNotFound,
                hca + " port " + std::to_string(port) + " has no data counters");
  PortCounters c;
  c.xmit_words = std::strtoull(x->c_str(), nullptr, 10);
  c.rcv_words = std::strtoull(r->c_str(), nullptr, 10);
  for (const auto& e : IbErrorCounters()) {
    if (auto v = root.ReadAttr(dir + e)) c.errors[e] = std::strtoull(v->c_str(), nullptr, 10);
  }
  return c;
}

Bandwidth CollectiveBandwidth(Collective c, uint64_t bytes, double seconds, int nranks) {
  Bandwidth b;
  if (seconds <= 0 || nranks <= 0) return b;
  b.algbw_gbps = static_cast<double>(bytes) / seconds / 1e9;
  b.busbw_gbps = b.algbw_gbps * BusFactor(c, nranks);
  return b;
}

Bandwidth AllReduceBandwidth(uint64_t bytes, double seconds, int nranks) {
  return CollectiveBandwidth(Collective::kAllReduce, bytes, seconds, nranks);
}

namespace {

// The rank (and world size) a launcher put in the environment, or from a StatefulSet hostname.
RankInfo RankFromEnvironment(const std::function<const char*(const char*)>& getenv,
                             const std::string& hostname) {
  RankInfo r;
  struct Pair {
    const char* rank;
    const char* size;
  };
  for (auto [rk, sz] :
       {Pair{"RANK", "WORLD_SIZE"}, Pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        Pair{"PMI_RANK", "PMI_SIZE"}, Pair{"SLURM_PROCID", "SLURM_NTASKS"},
        Pair{"JOB_COMPLETION_INDEX", "WORLD_SIZE"}}) {
    auto rank = Int(getenv(rk));
    if (!rank) continue;
    r.rank = *rank;
    r.source = rk;
    if (auto size = Int(getenv(sz))) {
      r.world_size = *size;
      r.source += std::string("+") + sz;
    }
    return r;
  }
  // A StatefulSet pod is <name>-<ordinal>.
  auto dash = hostname.find_last_of('-');
  if (dash != std::string::npos && dash + 1 < hostname.size()) {
    if (auto ord = Int(hostname.c_str() + dash + 1)) {
      r.rank = *ord;
      r.source = "hostname ordinal";
    }
  }
  if (auto size = Int(getenv("WORLD_SIZE"))) r.world_size = *size;
  return r;
}

}  // namespace

Result<RankInfo> DetectRank(const std::function<const char*(const char*)>& getenv,
                            const std::string& hostname, int flag_rank, int flag_world) {
  RankInfo r = RankFromEnvironment(getenv, hostname);
  if (flag_rank >= 0) {
    r.rank = flag_rank;
    r.source = "--rank";
  }
  if (flag_world >= 0) r.world_size = flag_world;
  if (r.rank < 0) {
    return Fail(ErrorCode::kInvalidArgument,
                "multi-pod mode needs this pod's rank: set --rank, RANK, an MPI or Slurm rank, run "
                "as an Indexed Job (JOB_COMPLETION_INDEX) or in a StatefulSet (hostname "
                "<name>-<ordinal>)");
  }
  if (r.world_size <= 0) {
    return Fail(ErrorCode::kInvalidArgument,
                "multi-pod mode needs the world size: set --world-size or WORLD_SIZE");
  }
  if (r.rank >= r.world_size) {
    return Fail(ErrorCode::kInvalidArgument, "rank " + std::to_string(r.rank) + " (from " +
                                                 r.source + ") is not below world size " +
                                                 std::to_string(r.world_size));
  }
  return r;
}

Result<Expected> ExpectedHcas(const std::function<const char*(const char*)>& getenv,
                              const std::string& flag) {
  Expected e;
  if (!flag.empty()) {
    for (auto& entry : contract::ParseIbHca(flag).entries) {
      e.names.push_back(entry.name);
      e.ports[entry.name] = entry.ports;
    }
    e.source = "--expect";
    return e;
  }
  KUBERDMA_ASSIGN_OR_RETURN(contract::PodEnv pod, contract::Read(getenv));
  if (pod.hcas) {
    e.names = pod.HcaNames();
    e.source = contract::kHcas;
  }
  if (pod.ib_hca && !pod.ib_hca->exclude) {
    for (const auto& entry : pod.ib_hca->entries) {
      e.ports[entry.name] = entry.ports;
      if (!pod.hcas) e.names.push_back(entry.name);
    }
    if (e.source.empty()) e.source = contract::kNcclIbHca;
  }
  if (e.names.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                std::string("no expected HCAs: pass --expect mlx5_0,mlx5_1 or run with "
                            "rdma-device-plugin's env (") +
                    contract::kHcas + ", " + contract::kNcclIbHca + ")");
  }
  return e;
}

Result<Expected> ExpectedNetdevs(const std::function<const char*(const char*)>& getenv,
                                 const std::string& flag, bool gloo) {
  Expected e;
  std::string v = flag;
  e.source = "--expect";
  if (v.empty() && gloo) {
    // Gloo's interface list (contract/comm_env.h reads it): plain names, comma-separated.
    for (const auto& name :
         contract::ReadCommEnv(getenv).gloo_ifnames.value_or(std::vector<std::string>{})) {
      e.names.push_back(name);
    }
    e.source = "Gloo's interfaces";
    if (e.names.empty()) {
      return Fail(ErrorCode::kInvalidArgument,
                  "no expected interfaces: pass --expect eth0 or run with `rdma-validate --env "
                  "gloo`'s variables");
    }
    return e;
  }
  if (v.empty()) {
    const char* s = getenv("NCCL_SOCKET_IFNAME");
    v = s != nullptr ? s : "";
    e.source = "NCCL_SOCKET_IFNAME";
  }
  // NCCL's interface lists share NCCL_IB_HCA's grammar (=exact, ^exclude, comma-separated).
  contract::IbHcaList list = contract::ParseIbHca(v);
  if (list.exclude) {
    return Fail(ErrorCode::kInvalidArgument, "an exclusion list (^...) names no expected netdevs");
  }
  for (const auto& entry : list.entries) e.names.push_back(entry.name);
  if (e.names.empty()) {
    return Fail(ErrorCode::kInvalidArgument,
                "no expected netdevs: pass --expect net1,net2 or set NCCL_SOCKET_IFNAME");
  }
  return e;
}

}  // namespace kuberdma::validator
