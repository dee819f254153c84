// SPDX-License-Identifier: Apache-2.0
// The pod's communication libraries other than NCCL (NCCL's own checks: nccl_setup.cc), each held
// to its allocation: what its environment tells it (read by the contract's codec, comm_env.h) and
// what it needs of the node. One named check each, with its fix (docs/doctor.md's table):
//   comm-devices     a device list (UCX, NVSHMEM, Mooncake) naming an HCA the pod lacks, or
//                    leaving one of its HCAs out;
//   comm-transport   a library told to use TCP (UCX_TLS without an RDMA transport, Open MPI's ob1,
//                    Mooncake's MC_FORCE_TCP);
//   comm-gid-index   a library's one GID index that is not the pod's own RoCE v2 GID on one of
//                    its HCAs;
//   gloo-interfaces  Gloo or TensorPipe told an interface this pod does not have;
//   ompi-device-gate HCAs Open MPI 4.1's pml ucx does not take (not mlx*) without
//                    OMPI_MCA_pml_ucx_devices=any: MPI falls back to TCP without a word;
//   ibgda            what NVSHMEM's IBGDA and NCCL's GDAKI need: mlx5, nvidia-peermem or DMA-BUF,
//                    the driver's PeerMappingOverride, PCIe AtomicOps, CAP_SYS_ADMIN;
//   vf-libraries     the libraries' limits on SR-IOV VFs.
#include <linux/capability.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

#include "internal.h"
#include "kuberdma/base/files.h"
#include "kuberdma/contract/comm_env.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::doctor::internal {
namespace {

contract::CommSaid Said(const Inputs& in, std::vector<std::string>* unparsed) {
  return contract::ReadCommEnv([&in](const char* k) { return in.getenv ? in.getenv(k) : nullptr; },
                               unparsed);
}

std::set<std::string> NamesOf(const std::vector<sysfs::Hca>& hcas) {
  std::set<std::string> out;
  for (const auto& h : hcas) out.insert(h.name);
  return out;
}

// One device list against the pod's HCAs: names it lacks fail, HCAs it leaves out warn.
void CheckList(const char* var, const std::vector<std::string>& listed,
               const std::set<std::string>& ours, View& v) {
  std::vector<std::string> foreign, missing;
  for (const auto& n : listed) {
    if (!ours.contains(n)) foreign.push_back(n);
  }
  for (const auto& o : ours) {
    if (std::find(listed.begin(), listed.end(), o) == listed.end()) missing.push_back(o);
  }
  if (!foreign.empty()) {
    Add(v, "comm-devices", Status::kFail,
        std::string(var) + " names " + Join(foreign, ", ") +
            ", which this pod was not given: the library skips it (UCX with only a warning) or "
            "finds no device",
        "remove " + std::string(var) +
            " from the pod spec (the device plugin sets it) or eval "
            "\"$(rdma-validate --env all)\"");
  } else if (!missing.empty()) {
    Add(v, "comm-devices", Status::kWarn,
        std::string(var) + " leaves out " + Join(missing, ", ") +
            ": those NICs carry none of the library's traffic",
        "list every HCA of the pod (rdma-validate --env), or per process the one beside its GPU "
        "(--local-rank)");
  }
}

std::vector<std::string> DeviceNames(const std::vector<contract::CommDevice>& devs) {
  std::vector<std::string> out;
  for (const auto& d : devs) out.push_back(d.name);
  return out;
}

void CheckDevices(const contract::CommSaid& s, const std::set<std::string>& ours, View& v) {
  size_t before = v.findings.size();
  // A deny list ("^mlx5_7:1") names no HCA the library is held to.
  bool ucx = s.ucx_devices && !s.ucx_devices_exclude;
  if (ucx) CheckList(contract::kUcxNetDevices, DeviceNames(*s.ucx_devices), ours, v);
  if (s.nvshmem_hcas) CheckList(contract::kNvshmemHcaList, DeviceNames(*s.nvshmem_hcas), ours, v);
  if (s.mooncake_filters) CheckList(contract::kMooncakeFilters, *s.mooncake_filters, ours, v);
  if (v.findings.size() == before && (ucx || s.nvshmem_hcas || s.mooncake_filters)) {
    Add(v, "comm-devices", Status::kOk, "the libraries' device lists name this pod's HCAs");
  }
}

// UCX_TLS with no RDMA transport: "tcp", "tcp,sm,self", "^rc,ud,dc,ib" ...
bool TcpOnly(const std::string& tls) {
  if (tls == "all" || tls.empty()) return false;
  bool deny = tls.front() == '^';
  bool rdma = false;
  for (const auto& t : Split(deny ? tls.substr(1) : tls, ',')) {
    rdma = rdma || t.rfind("rc", 0) == 0 || t.rfind("ud", 0) == 0 || t.rfind("dc", 0) == 0 ||
           t == "ib";
  }
  return deny ? rdma : !rdma;
}

void CheckTransport(const Inputs& in, const contract::CommSaid& s, View& v) {
  std::vector<std::string> tcp;
  if (s.ucx_tls && TcpOnly(*s.ucx_tls)) tcp.push_back("UCX_TLS=" + *s.ucx_tls);
  if (s.ompi_pml && (*s.ompi_pml == "ob1" || *s.ompi_pml == "^ucx")) {
    tcp.push_back("OMPI_MCA_pml=" + *s.ompi_pml);
  }
  if (Env(in, "MC_FORCE_TCP") == "1" || Env(in, "MC_FORCE_TCP") == "true") {
    tcp.push_back("MC_FORCE_TCP=" + Env(in, "MC_FORCE_TCP"));
  }
  if (!tcp.empty()) {
    Add(v, "comm-transport", Status::kFail,
        Join(tcp, ", ") + ": that library's traffic goes over TCP, not this pod's HCAs",
        "remove it from the pod spec (or the image's entrypoint); rdma-validate --transport ucx "
        "or mpi proves the HCAs carry it");
  } else if (s.ucx_tls || s.ompi_pml) {
    Add(v, "comm-transport", Status::kOk, "UCX and Open MPI may use RDMA transports");
  }
}

// Each one-index GID variable against each RoCE HCA of the pod: the entry must be a RoCE v2 GID
// of one of the pod's addresses (NCCL_IB_GID_INDEX has its own check: roce-gid-index).
void CheckGidIndices(const Inputs& in, const contract::CommSaid& s,
                     const std::vector<sysfs::Hca>& expected, View& v) {
  auto indices = s.GidIndices();
  indices.erase("NCCL_IB_GID_INDEX");
  if (indices.empty()) return;
  const std::vector<std::string> own = OwnIpv4(in);
  std::vector<std::string> wrong;
  for (const auto& listed : expected) {
    auto h = sysfs::ReadHca(in.root, listed.name, sysfs::HcaDetail::kTables);
    if (!h || h->ports.empty() || h->link_layer() != sysfs::LinkLayer::kEthernet) continue;
    const auto& gids = h->ports.front().gids;
    const sysfs::Gid* mine = sysfs::FirstV2ForAddresses(gids, own);
    for (const auto& [var, index] : indices) {
      auto at =
          std::find_if(gids.begin(), gids.end(), [&](const auto& g) { return g.index == index; });
      bool ok = at != gids.end() && at->IsRoceV2() &&
                std::find(own.begin(), own.end(), at->Ipv4()) != own.end();
      if (ok) continue;
      wrong.push_back(
          var + "=" + std::to_string(index) + " on " + h->name + " (" +
          (at == gids.end() ? std::string("no such entry") : "not this pod's RoCE v2 GID") +
          (mine != nullptr ? "; this pod's is index " + std::to_string(mine->index)
                           : std::string()) +
          ")");
    }
  }
  if (!wrong.empty()) {
    Add(v, "comm-gid-index", Status::kFail, Join(wrong, "; "),
        "eval \"$(rdma-validate --env ucx,nvshmem,mooncake)\": it sets each library's GID to this "
        "pod's own (UCX per HCA where the indices differ), or says why it cannot");
  } else {
    Add(v, "comm-gid-index", Status::kOk, "each library's GID index is this pod's on every HCA");
  }
}

void CheckGloo(const contract::CommSaid& s, const std::vector<std::string>& ifnames, View& v) {
  std::vector<std::string> absent;
  for (const auto& i : s.gloo_ifnames.value_or(std::vector<std::string>{})) {
    if (std::find(ifnames.begin(), ifnames.end(), i) == ifnames.end()) absent.push_back(i);
  }
  if (s.tp_ifname && std::find(ifnames.begin(), ifnames.end(), *s.tp_ifname) == ifnames.end()) {
    absent.push_back(*s.tp_ifname + " (TensorPipe)");
  }
  if (!absent.empty()) {
    Add(v, "gloo-interfaces", Status::kFail,
        "Gloo is told " + Join(absent, ", ") +
            ", which this pod does not have: its process "
            "group cannot start",
        "name this pod's interfaces, the same count in every process (rdma-validate --env gloo)");
  } else if (s.gloo_ifnames || s.tp_ifname) {
    Add(v, "gloo-interfaces", Status::kOk, "Gloo's interfaces are this pod's");
  }
}

void CheckOmpiGate(const Inputs& in, const contract::CommSaid& s,
                   const std::vector<sysfs::Hca>& expected, View& v) {
  std::vector<std::string> other;
  for (const auto& h : expected) {
    if (h.name.rfind("mlx", 0) != 0) other.push_back(h.name);
  }
  bool uses_mpi = s.ompi_pml.has_value() || !Env(in, "OMPI_COMM_WORLD_SIZE").empty();
  if (other.empty() || !uses_mpi) return;
  if (s.ompi_pml_ucx_devices == "any") {
    Add(v, "ompi-device-gate", Status::kOk,
        "OMPI_MCA_pml_ucx_devices=any: pml ucx takes " + Join(other, ", "));
    return;
  }
  Add(v, "ompi-device-gate", Status::kFail,
      Join(other, ", ") +
          " are not named mlx*: Open MPI 4.1's pml ucx steps aside for them "
          "(pml_ucx_devices mlx*) and MPI runs over TCP without a word",
      "OMPI_MCA_pml_ucx_devices=any (rdma-validate --env mpi sets it; open-mpi/ompi#9403)");
}

bool CapSysAdmin(const Inputs& in) {
  std::istringstream status(ReadFile(in.proc_status).value_or(""));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("CapEff:", 0) != 0) continue;
    uint64_t caps = std::strtoull(line.c_str() + 7, nullptr, 16);
    return (caps >> CAP_SYS_ADMIN & 1) != 0;
  }
  return false;
}

std::vector<std::string> IbgdaMissing(const Inputs& in, const std::vector<sysfs::Hca>& hcas) {
  std::vector<std::string> missing;
  std::vector<std::string> not_mlx5, no_atomics;
  for (const auto& h : hcas) {
    if (h.driver != "mlx5_core") not_mlx5.push_back(h.name);
    auto atomics = sysfs::ReadAtomicOpRequester(in.root, h.device_path);
    if (atomics == sysfs::AtomicOps::kDisabled) no_atomics.push_back(h.name);
  }
  if (!not_mlx5.empty()) missing.push_back("mlx5 devices (" + Join(not_mlx5, ", ") + " are not)");
  auto g = sysfs::ReadGpuDirectSupport(in.root);
  if (!g.peermem_loaded && !(g.nvidia_open && in.kernel_version >= 512)) {
    missing.push_back("nvidia-peermem or DMA-BUF (see gpudirect-rdma)");
  }
  if (g.peer_mapping_override == false) {
    missing.push_back("the driver's PeerMappingOverride=1 (NVreg_RegistryDwords)");
  }
  if (!no_atomics.empty()) {
    missing.push_back("PCIe AtomicOps on " + Join(no_atomics, ", ") +
                      " (AtomicOp Requester Enable)");
  }
  if (!CapSysAdmin(in)) missing.push_back("CAP_SYS_ADMIN in this container");
  return missing;
}

void CheckIbgda(const Inputs& in, const std::vector<sysfs::Hca>& expected, View& v) {
  auto gpus = sysfs::DiscoverGpus(in.root);
  if (!gpus || gpus->empty() || expected.empty()) return;
  std::string ibgda = Env(in, "NVSHMEM_IB_ENABLE_IBGDA");
  bool asked = ibgda == "1" || ibgda == "true" || Env(in, "NCCL_GIN_TYPE") == "3";
  std::vector<std::string> missing = IbgdaMissing(in, expected);
  if (missing.empty()) {
    Add(v, "ibgda", Status::kOk, "NVSHMEM's IBGDA and NCCL's GDAKI have what they need here");
    return;
  }
  Add(v, "ibgda", asked ? Status::kFail : Status::kWarn,
      "GPU-initiated RDMA (NVSHMEM IBGDA, NCCL GIN GDAKI) lacks: " + Join(missing, "; ") +
          (asked ? ": it is asked for (NVSHMEM_IB_ENABLE_IBGDA / NCCL_GIN_TYPE=3) and will fail "
                   "to start or fall back to the CPU proxy"
                 : ""),
      "docs/comm-libs.md#nvshmem: options nvidia NVreg_RegistryDwords=\"PeerMappingOverride=1;\", "
      "nvidia-peermem or the open kernel module, mlxconfig PCI_ATOMIC_MODE, and a privileged "
      "container (sgl-project/sglang#12533)");
}

void CheckVfLimits(const std::vector<sysfs::Hca>& expected, View& v) {
  std::vector<std::string> vfs;
  for (const auto& h : expected) {
    if (!h.pf_address.empty()) vfs.push_back(h.name);
  }
  if (vfs.empty()) return;
  Add(v, "vf-libraries", Status::kWarn,
      Join(vfs, ", ") +
          " are SR-IOV VFs: NVSHMEM has hung on VFs in pods "
          "(deepseek-ai/DeepEP#658, NVIDIA/nvshmem#89), IBGDA needs DEVX objects a "
          "VF may not be allowed, and one VF's rate limit caps every library on it",
      "prove the libraries the pod uses on its VFs (rdma-validate --transport ucx, mpi); give "
      "NVSHMEM/DeepEP pods whole HCAs (mode move) until it is");
}

}  // namespace

void CheckCommLibraries(const Inputs& in, const std::vector<sysfs::Hca>& expected, View& v) {
  std::vector<std::string> unparsed;
  contract::CommSaid s = Said(in, &unparsed);
  for (const auto& u : unparsed) {
    Add(v, "comm-gid-index", Status::kFail, u, "a GID index is a number (or unset)");
  }
  CheckDevices(s, NamesOf(expected), v);
  CheckTransport(in, s, v);
  CheckGidIndices(in, s, expected, v);
  CheckOmpiGate(in, s, expected, v);
  CheckIbgda(in, expected, v);
  CheckVfLimits(expected, v);
}

// Gloo's interfaces need the pod's interface names (pod_view.cc has them).
void CheckGlooInterfaces(const Inputs& in, const std::vector<std::string>& ifnames, View& v) {
  CheckGloo(Said(in, nullptr), ifnames, v);
}

}  // namespace kuberdma::doctor::internal
