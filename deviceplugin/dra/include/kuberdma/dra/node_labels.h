// SPDX-License-Identifier: Apache-2.0
// The node's topology labels (rails::TopologyLabels: each rail's leaf, the node's block) written
// on its Node object, for topology-aware schedulers (docs/fabric.md). Only keys under
// rails::kTopologyLabelPrefix are ever set or removed; the chart's admission policy holds the
// DaemonSet's ServiceAccount to that prefix and to its own node.
//
//   KUBERDMA_TRY(ApplyTopologyLabels(api, "gpu-node-7", rails::TopologyLabels(rails)));
#pragma once

#include <map>
#include <string>

#include "kuberdma/base/error.h"
#include "kuberdma/dra/apiserver.h"

namespace kuberdma::dra {

// Reads Node `node`, then one JSON merge patch that sets `labels` and removes our prefix's keys
// it no longer has; no request when nothing changes. kInvalidArgument for a key outside the
// prefix or a key or value that is not a label's; Request's errors otherwise (kPermissionDenied
// naming the RBAC rule: patch on nodes).
Result<void> ApplyTopologyLabels(const ApiServer& api, const std::string& node,
                                 const std::map<std::string, std::string>& labels);

}  // namespace kuberdma::dra
