// SPDX-License-Identifier: Apache-2.0
// The seam to an external subnet manager: the node's `partitionHook` executable, run when an
// InfiniBand VF on a partition is given a GUID (add) and when it is given back (remove). The hook
// reads one JSON object on stdin and exits 0 once the subnet manager has the change:
//
//   {"action": "add", "pkey": "0x8001", "guid": "0x0201d20300001000", "node": "gpu-17",
//    "network": "tenant-a-ib", "containerId": "3f5c...", "ifname": "net1"}
//
// A UFM deployment's hook PUTs/DELETEs the GUID on /ufmRest/resources/pkeys (docs/cni.md).
#pragma once

#include <cstdint>
#include <string>

#include "kuberdma/cni/types.h"

namespace kuberdma::cni {

struct PartitionChange {
  bool add = true;  // false: remove
  uint16_t pkey = 0;
  uint64_t guid = 0;
  std::string network;
  std::string container_id;
  std::string ifname;

  // The object the hook reads, with `node` (this node's name; "" leaves it out).
  std::string ToJson(const std::string& node) const;
};

class PartitionHook {
 public:
  virtual ~PartitionHook() = default;
  // Tells the subnet manager; an error (code 11, try again later) when the hook fails or is not
  // done in time, with what it wrote on stderr.
  virtual CniResult<void> Apply(const PartitionChange& change) = 0;
};

// Runs the executable at `path` (the node config's partitionHook), killed after `timeout_ms`.
class ExecPartitionHook final : public PartitionHook {
 public:
  ExecPartitionHook(std::string path, std::string node, uint32_t timeout_ms = 30000)
      : path_(std::move(path)), node_(std::move(node)), timeout_ms_(timeout_ms) {}
  CniResult<void> Apply(const PartitionChange& change) override;

 private:
  std::string path_;
  std::string node_;
  uint32_t timeout_ms_;
};

}  // namespace kuberdma::cni
