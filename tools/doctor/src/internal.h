// SPDX-License-Identifier: Apache-2.0
// What the doctor's views share: adding a finding, reading the environment, small list helpers.
// Internal to tools/doctor.
#pragma once

#include <string>
#include <vector>

#include "kuberdma/cni/state.h"
#include "kuberdma/doctor/doctor.h"
#include "kuberdma/netns/netns.h"
#include "kuberdma/rails/node_config.h"
#include "kuberdma/rails/rails.h"
#include "kuberdma/sysfs/topology.h"

namespace kuberdma::doctor::internal {

inline void Add(View& v, std::string check, Status s, std::string msg, std::string fix = "") {
  v.findings.push_back({std::move(check), s, std::move(msg), std::move(fix)});
}

// "ok", "warn", "FAIL", "unknown".
const char* StatusName(Status s);

// The variable `k` from the inputs' environment, "" when unset.
std::string Env(const Inputs& in, const char* k);
std::vector<std::string> Split(const std::string& s, char sep);
std::string Join(const std::vector<std::string>& v, const std::string& sep = ",");
std::vector<std::string> Names(const std::vector<sysfs::Hca>& hcas);
// The HCAs this pod was given, from the device plugin's env (the pod-env contract).
std::vector<std::string> Ours(const Inputs& in);

// The common mistakes in a pod's NCCL setup as checks (nccl_setup.cc).
void CheckNcclTransport(const Inputs& in, const std::vector<sysfs::Hca>& visible, View& v);
void CheckIbHca(const Inputs& in, const std::vector<std::string>& present,
                const std::vector<std::string>& ours, View& v);
void CheckChannelsAndNics(const Inputs& in, const std::vector<std::string>& ours, size_t visible,
                          View& v);
void CheckSocketIfname(const Inputs& in, const std::vector<std::string>& ifnames, View& v);
void CheckMemlock(View& v);
// A DRA claim's promise (KUBERDMA_CLAIM_PCIE_ROOTS): each HCA on the root it was allocated for,
// with one of the pod's GPUs under it (claims.cc).
void CheckClaimAlignment(const Inputs& in, const std::vector<sysfs::Hca>& visible, View& v);
void CheckNcclVersion(const Inputs& in, View& v);
// The version ("2.28.3") of the NCCL this process would load, as rdma-validate finds it; "" when
// none is found.
std::string NcclLibraryVersion(const Inputs& in);

// The IPv4 addresses on this namespace's interfaces: the pod's own (roce.cc). Empty when the
// addresses cannot be listed.
std::vector<std::string> OwnIpv4(const Inputs& in);
// What the pod's communication libraries are told (comm_libs.cc): each list, transport, GID index
// and interface against its allocation; Open MPI's device gate; IBGDA's and GDAKI's prerequisites;
// the libraries' limits on SR-IOV VFs.
void CheckCommLibraries(const Inputs& in, const std::vector<sysfs::Hca>& expected, View& v);
// Gloo's and TensorPipe's interfaces against the pod's (`ifnames`).
void CheckGlooInterfaces(const Inputs& in, const std::vector<std::string>& ifnames, View& v);

// RoCE (roce.cc): the pod's GID tables and the checks on them, NCCL's RoCE retry settings, and
// the node's lossless configuration per RoCE port.
void GidTables(const Inputs& in, const std::vector<sysfs::Hca>& expected, View& v);
void CheckRoceRetries(const Inputs& in, const std::vector<sysfs::Hca>& expected, View& v);
// PFC, trust and ECN of every RoCE port: on the host, or in the pod whose CNI record holds it.
// The GPUs the pod has: every one on the PCI bus, or those --gpus names (sysfs shows a pod the
// node's GPUs). The topology view and the NCCL setup checks count the same set.
std::vector<sysfs::Gpu> PodGpus(const Inputs& in);

// GPUDirect RDMA (gpudirect.cc): nvidia-peermem, DMA-BUF and PCIe ACS between GPUs and HCAs.
void CheckGpuDirect(const Inputs& in, const std::vector<sysfs::Hca>& hcas, View& v);

void CheckLossless(const Inputs& in, const std::vector<sysfs::Hca>& hcas,
                   const std::vector<cni::AttachmentRecord>& records, View& v);

// Each rail's LLDP neighbour, heard for in.lldp_wait_ms on the rails whose netdev is in `host`,
// judged against config.rail_switches (cabling_view.cc); nothing when not asked to listen.
void CheckCabling(const Inputs& in, const netns::NetNs& host, const std::vector<sysfs::Hca>& hcas,
                  const rails::NodeRoles& roles, const rails::NodeConfig& config, View& v);

}  // namespace kuberdma::doctor::internal
