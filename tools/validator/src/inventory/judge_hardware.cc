// SPDX-License-Identifier: Apache-2.0
// What the hardware could give, judged per HCA after an NCCL run: GPUDirect RDMA (NCCL moved GPU
// memory straight to the HCA, not through host memory, wherever a GPU shares the HCA's PCIe
// switch) and line rate (the HCA's part of the largest size's bandwidth against its port rate).
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "kuberdma/contract/pod_env.h"
#include "kuberdma/sysfs/topology.h"
#include "kuberdma/validator/validate.h"

namespace kuberdma::validator {

namespace {

// The PCI distance from HCA `name` to the nearest GPU on this node's bus; nullopt when there is
// no GPU or no PCI device to measure from (a fixture without GPUs, a software device).
std::optional<sysfs::PciDistance> NearestGpu(const sysfs::SysfsRoot& root,
                                             const std::vector<sysfs::Gpu>& gpus,
                                             const std::string& name) {
  auto hca = sysfs::ReadHca(root, name, sysfs::HcaDetail::kIdentity);
  if (!hca || hca->device_path.empty() || hca->bus == sysfs::BusKind::kVirtual || gpus.empty())
    return std::nullopt;
  auto best = sysfs::PciDistance::kSys;
  for (const auto& g : gpus) {
    best = std::min(best,
                    sysfs::Distance(g.device_path, g.numa_node, hca->device_path, hca->numa_node));
  }
  return best;
}

// Why NCCL staged a device's channels through host memory, as far as its log and environment
// tell, and what to do.
std::string GdrCause(const GdrUse& g, const std::function<const char*(const char*)>& getenv) {
  const char* level = getenv("NCCL_NET_GDR_LEVEL");
  std::string set =
      level != nullptr && *level != '\0'
          ? " NCCL_NET_GDR_LEVEL=" + std::string(level) + " is set: it moves the limit."
          : "";
  if (g.supported == 0) {
    return "NCCL found no GPUDirect support for it: nvidia-peermem is not loaded and DMA-BUF is "
           "not usable (modprobe nvidia-peermem on the node, or run the open GPU kernel module on "
           "a kernel >= 5.12 for DMA-BUF; rdma-doctor node checks both: gdr-peermem, "
           "gdr-dmabuf)";
  }
  if (!g.too_far.empty()) {
    return "NCCL found its GPU too far from it (" + g.too_far +
           " in NCCL's path types): the rank's GPU is not the one on this HCA's switch, or PCIe "
           "ACS redirects peer traffic through the root complex (rdma-doctor topo: "
           "gpu-nic-pairing, pcie-acs)." +
           set;
  }
  return "NCCL's log does not say why (its INIT,NET,GRAPH subsystems print the topology "
         "decisions)." +
         set;
}

std::string Fixed(double v, int decimals) {
  char b[32];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

}  // namespace

Result<double> LineRateGbps(const sysfs::SysfsRoot& root, const std::string& name) {
  auto h = sysfs::ReadHca(root, name, sysfs::HcaDetail::kPorts);
  bool software = h && h->bus == sysfs::BusKind::kVirtual;
  double rate = 0;
  if (h && !software) {
    for (const auto& p : h->ports) rate += p.rate_gbps;
  }
  if (rate <= 0) {
    return Fail(ErrorCode::kUnsupported,
                name + ": " +
                    (software ? "a software RDMA device (" + h->driver + ")"
                              : std::string("no port rate in sysfs")) +
                    ": its line-rate floor is not applied");
  }
  return rate;
}

namespace {

// One pair of a DRA claim, `hca` allocated for a GPU on `want`: "" when it holds (`note` set),
// else the problem.
std::string JudgeClaimPair(const sysfs::SysfsRoot& root, const std::vector<sysfs::Gpu>& gpus,
                           const std::string& claim, const std::string& hca,
                           const std::string& want, std::string* note) {
  auto h = sysfs::ReadHca(root, hca, sysfs::HcaDetail::kIdentity);
  if (!h) {
    return "claim " + claim + " gave " + hca + " (paired on " + want +
           "), which this pod does not have";
  }
  std::string have = sysfs::PcieRootOf(h->device_path);
  if (have != want) {
    return hca + " is on PCIe root " + have + ", not the " + want + " claim " + claim +
           " allocated it for: its GPU pair crosses the CPU";
  }
  std::string near;
  for (const auto& g : gpus) {
    if (sysfs::PcieRootOf(g.device_path) == want) near += (near.empty() ? "" : ",") + g.address;
  }
  if (near.empty()) {
    return "claim " + claim + " paired " + hca + " with a GPU on " + want +
           ", and no GPU of this node is under that root";
  }
  *note = "claim " + claim + ": paired with a GPU on " + want + " (" + near + ")";
  return "";
}

}  // namespace

void Validator::JudgeClaim(Report& r) {
  const char* promised = getenv_(contract::kClaimPcieRoots);
  if (promised == nullptr || *promised == '\0') return;
  const char* claim_env = getenv_(contract::kClaim);
  std::string claim = claim_env != nullptr ? claim_env : "(unnamed)";
  auto gpus = sysfs::DiscoverGpus(root_);
  for (const auto& pair : contract::ParseClaimPcieRoots(promised)) {
    const std::string& hca = pair.hca;
    const std::string& root = pair.root;
    auto d = std::find_if(r.devices.begin(), r.devices.end(),
                          [&](const DeviceResult& x) { return x.name == hca; });
    std::string note;
    std::string why = d == r.devices.end()
                          ? "claim " + claim + " gave " + hca + " (paired on " + root +
                                "), which this pod does not have"
                          : JudgeClaimPair(root_, gpus ? *gpus : std::vector<sysfs::Gpu>{}, claim,
                                           hca, root, &note);
    if (!why.empty()) {
      r.problems.push_back(why);
    } else {
      d->notes.push_back(note);
    }
  }
}

void Validator::JudgeGdr(Report& r, const NcclLog& log) {
  if (r.opts.transport != Transport::kIb) return;
  auto gpus = sysfs::DiscoverGpus(root_);
  std::vector<sysfs::Gpu> none;
  for (auto& d : r.devices) {
    auto it = log.gdr().find(d.name);
    if (it == log.gdr().end()) continue;
    const GdrUse& g = it->second;
    int all = g.direct_channels + g.staged_channels;
    if (all == 0) continue;
    d.gpu_direct = g.staged_channels == 0 ? "yes" : (g.direct_channels > 0 ? "partly" : "no");
    auto near = NearestGpu(root_, gpus ? *gpus : none, d.name);
    if (near) d.nearest_gpu_distance = std::string(sysfs::PciDistanceName(*near));
    if (g.staged_channels == 0) continue;
    std::string what = d.name + ": NCCL staged " + std::to_string(g.staged_channels) + " of its " +
                       std::to_string(all) + " channel(s) through host memory (no GPUDirect RDMA)";
    if (g.direct_channels > 0 || !near || *near > sysfs::PciDistance::kPxb) {
      // Some channels direct (ranks whose GPUs are far from it), no GPU to judge by, or no GPU
      // on its switch: GPUDirect was not to be had for those channels.
      d.notes.push_back(what + (!near ? ": no GPU on this node's PCI bus to judge it by"
                                      : "; its nearest GPU is " + d.nearest_gpu_distance));
      if (!near && g.direct_channels == 0) r.warnings.push_back(what + ", not judged: no GPU seen");
      continue;
    }
    std::string msg = what + " although a GPU shares its PCIe switch (" + d.nearest_gpu_distance +
                      "): " + GdrCause(g, getenv_);
    if (r.opts.allow_no_gdr) {
      r.warnings.push_back(msg + " (accepted: --allow-no-gdr)");
    } else {
      r.problems.push_back(msg + " (--allow-no-gdr accepts it where the platform cannot)");
    }
  }
}

void Validator::JudgeLineRate(Report& r) {
  double floor = r.opts.min_line_rate;
  if (floor <= 0 || !r.verified || r.bandwidth.busbw_gbps <= 0) return;
  if (OverNetdevs(r.opts.transport)) {
    r.warnings.emplace_back(
        "line-rate floor not applied: the Socket transport's netdevs report no port rate");
    return;
  }
  for (auto& d : r.devices) {
    if (!d.carried_traffic) continue;  // already failed for carrying less than its share
    auto rate = LineRateGbps(root_, d.name);
    if (!rate) {
      r.warnings.push_back(rate.error().message());
      continue;
    }
    d.line_rate_gbps = *rate;
    // Every hop of the validator's runs crosses a NIC (P2P and SHM are off), so the pod's NICs
    // together move busbw for each local rank; this HCA moved its share of that.
    d.achieved_gbps = r.bandwidth.busbw_gbps * r.local_ranks * d.share;
    d.line_rate_fraction = d.achieved_gbps / (d.line_rate_gbps / 8);
    if (d.line_rate_fraction < floor) {
      r.problems.push_back(d.name + ": " + Fixed(d.achieved_gbps, 2) + " GB/s is " +
                           Fixed(d.line_rate_fraction, 2) + " of its " +
                           Fixed(d.line_rate_gbps, 0) + " Gb/s line rate (" +
                           Fixed(d.line_rate_gbps / 8, 1) + " GB/s); the floor is " +
                           Fixed(floor, 2) + " (--min-line-rate)");
    }
  }
}

}  // namespace kuberdma::validator
