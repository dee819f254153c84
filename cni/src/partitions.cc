// SPDX-License-Identifier: Apache-2.0
// The partition members the node's attachments need, the VF GUIDs it derives, and their opensm
// partitions.conf form.
#include "kuberdma/cni/partitions.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "kuberdma/link/vf_ops.h"
#include "kuberdma/sysfs/hca.h"
#include "kuberdma/sysfs/sriov.h"

namespace kuberdma::cni {

namespace {

// The GUID ADD gave the record's VF (its "set" names both GUIDs alike); nullopt for none.
std::optional<uint64_t> VfGuid(const AttachmentRecord& r) {
  if (!r.vf || !r.vf->set.is_object()) return std::nullopt;
  auto it = r.vf->set.find("portGuid");
  if (it == r.vf->set.end() || !it->is_string()) return std::nullopt;
  auto g = link::ParseGuid(it->get<std::string>());
  if (!g || *g == 0) return std::nullopt;
  return *g;
}

std::string Who(const AttachmentRecord& r) {
  return r.network + " " + r.container_id.substr(0, 12) + " " + r.ifname;
}

// By pkey; within one, in the order found (records, or each PF's port before its VFs).
void Sort(std::vector<PartitionMember>& members) {
  std::stable_sort(members.begin(), members.end(),
                   [](const auto& a, const auto& b) { return a.pkey < b.pkey; });
}

}  // namespace

std::string FormatGuidHex(uint64_t guid) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(guid));
  return buf;
}

Result<uint64_t> GeneratedVfGuid(uint64_t pf_node_guid, uint32_t vf_index) {
  if (pf_node_guid == 0) {
    return Fail(ErrorCode::kInvalidArgument,
                "the PF's node GUID is zero, so no VF GUID can be derived from it");
  }
  if (vf_index > 254) {
    return Fail(ErrorCode::kInvalidArgument,
                "VF " + std::to_string(vf_index) + " is past the 255 a derived GUID can number");
  }
  uint64_t oui = pf_node_guid >> 40;
  uint64_t fold = ((oui >> 16) ^ (oui >> 8) ^ oui) & 0xff;
  return (uint64_t{0x02} << 56) | (uint64_t{vf_index + 1} << 48) | (fold << 40) |
         (pf_node_guid & 0xffffffffffULL);
}

std::optional<PartitionMember> VfPartitionMember(const AttachmentRecord& r) {
  if (!r.vf || r.link_layer != "InfiniBand" || r.pkey == sysfs::kDefaultPkey) return std::nullopt;
  auto g = VfGuid(r);
  if (!g) return std::nullopt;
  return PartitionMember{
      r.pkey, *g, Who(r) + " (VF " + std::to_string(r.vf->index) + " of " + r.vf->pf_address + ")"};
}

Result<uint64_t> PortGuid(const sysfs::SysfsRoot& root, const std::string& hca_address) {
  KUBERDMA_ASSIGN_OR_RETURN(sysfs::Hca hca,
                            sysfs::HcaForAddress(root, hca_address, sysfs::HcaDetail::kTables));
  const sysfs::Port* port = hca.port(1);
  if (port != nullptr && !port->gids.empty() && port->gids.front().index == 0) {
    // GID 0 is the subnet prefix and the port GUID: its last four groups.
    const std::string& gid = port->gids.front().gid;
    if (gid.size() == 39) {
      if (auto g = link::ParseGuid(gid.substr(20)); g && *g != 0) return *g;
    }
  }
  auto g = link::ParseGuid(hca.node_guid);
  if (!g || *g == 0) {
    return Fail(ErrorCode::kNotFound, hca.name + " reports no port GUID (GID 0) or node GUID");
  }
  return *g;
}

std::vector<PartitionMember> PartitionMembers(const std::vector<AttachmentRecord>& records,
                                              const sysfs::SysfsRoot& root) {
  std::vector<PartitionMember> out;
  for (const auto& r : records) {
    if (r.link_layer != "InfiniBand" || r.pkey == sysfs::kDefaultPkey) continue;
    if (r.vf) {
      if (auto m = VfPartitionMember(r)) out.push_back(std::move(*m));
      continue;
    }
    if (auto g = PortGuid(root, r.hca_address)) {
      out.push_back({r.pkey, *g, Who(r) + " (" + r.hca + " port 1)"});
    }
  }
  Sort(out);
  return out;
}

Result<std::vector<PartitionMember>> NodePartitionMembers(const sysfs::SysfsRoot& root,
                                                          uint16_t pkey) {
  KUBERDMA_ASSIGN_OR_RETURN(auto hcas, sysfs::DiscoverHcas(root, sysfs::HcaDetail::kPorts));
  std::vector<PartitionMember> out;
  for (const auto& h : hcas) {
    if (h.link_layer() != sysfs::LinkLayer::kInfiniBand || !h.pf_address.empty()) continue;
    if (auto g = PortGuid(root, h.address)) out.push_back({pkey, *g, h.name + " port 1"});
    auto pf = sysfs::ReadSriovPf(root, h.pci_address);
    auto node = link::ParseGuid(h.node_guid);
    if (!pf || !*pf || !node) continue;
    for (int i = 0; i < (*pf)->total_vfs && i < 255; ++i) {
      if (auto g = GeneratedVfGuid(*node, static_cast<uint32_t>(i))) {
        out.push_back({pkey, *g, "VF " + std::to_string(i) + " of " + h.name + " (derived)"});
      }
    }
  }
  Sort(out);
  return out;
}

std::string RenderPartitionsConf(const std::string& node,
                                 const std::vector<PartitionMember>& members) {
  std::map<uint16_t, std::vector<const PartitionMember*>> by_pkey;
  for (const auto& m : members) by_pkey[m.pkey].push_back(&m);
  std::string out = "# kube-rdma: the port GUIDs node " + node +
                    " hands out per partition (rdma-doctor partitions).\n"
                    "# opensm merges definitions of one pkey: append every node's output to "
                    "partitions.conf.\n";
  for (const auto& [pkey, list] : by_pkey) {
    std::string name = sysfs::FormatPkey(pkey);
    out += "kube-rdma-" + name.substr(2) + "=" + name + ", ipoib, defmember=full :\n";
    for (size_t i = 0; i < list.size(); ++i) {
      // A comment runs to the end of the line, so the separator goes before it.
      out += "    " + FormatGuidHex(list[i]->guid) + "=full" + (i + 1 < list.size() ? "," : "") +
             "  # " + list[i]->why + "\n";
    }
    out += "    ;\n";
  }
  return out;
}

}  // namespace kuberdma::cni
