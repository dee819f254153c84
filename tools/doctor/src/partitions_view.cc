// SPDX-License-Identifier: Apache-2.0
// rdma-doctor partitions: what this node needs from the subnet manager, as partitions.conf says it.
#include <set>
#include <utility>

#include "kuberdma/cni/partitions.h"
#include "kuberdma/doctor/doctor.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::doctor {

namespace {

Result<uint16_t> PartitionKey(const std::string& text) {
  KUBERDMA_ASSIGN_OR_RETURN(uint16_t pkey, sysfs::ParsePkey(text));
  if (sysfs::IsInvalidPkey(pkey) || sysfs::IsDefaultPartition(pkey)) {
    return Fail(
        ErrorCode::kInvalidArgument,
        "--pkey " + text + ": the invalid pkey and the default partition are no partition to list");
  }
  return static_cast<uint16_t>(pkey | 0x8000);  // partitions.conf grants full membership
}

}  // namespace

Result<std::string> PartitionsConf(const Inputs& in, const std::vector<std::string>& pkeys,
                                   const std::string& node) {
  std::vector<cni::AttachmentRecord> records;
  if (auto listed = cni::StateStore(in.state_dir).List(); listed) {
    records = std::move(*listed);
  } else if (listed.error().code() != ErrorCode::kNotFound) {
    return Fail(listed.error().Wrap("read the CNI's records in " + in.state_dir));
  }
  std::vector<cni::PartitionMember> members = cni::PartitionMembers(records, in.root);
  std::set<std::pair<uint16_t, uint64_t>> seen;
  for (const auto& m : members) seen.insert({m.pkey, m.guid});
  for (const auto& text : pkeys) {
    KUBERDMA_ASSIGN_OR_RETURN(uint16_t pkey, PartitionKey(text));
    KUBERDMA_ASSIGN_OR_RETURN(auto ahead, cni::NodePartitionMembers(in.root, pkey));
    for (auto& m : ahead) {
      if (seen.insert({m.pkey, m.guid}).second) members.push_back(std::move(m));
    }
  }
  return cni::RenderPartitionsConf(node, members);
}

}  // namespace kuberdma::doctor
