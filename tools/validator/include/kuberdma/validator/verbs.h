// SPDX-License-Identifier: Apache-2.0
// The verbs probe (rdma-validate-verbs.so, loaded on first use): per HCA an RC QP with the peer's
// HCA of the same rail, RDMA writes both ways and a ping-pong. The request and answer are the
// module's JSON (verbs_module.cc's header); the two sides meet over TCP at "peer" (the server
// listens on its port, the client connects to it).
//
//   auto answer = VerbsProbe({{"role", "server"}, {"peer", "10.0.0.1:29510"}, {"hcas", {"mlx5_0"}},
//                             {"bytes", 8 << 20}, {"iters", 20}, {"timeoutS", 60}});
//   (*answer)["rails"][0]["writeGBps"]
#pragma once

#include <nlohmann/json.hpp>

#include "kuberdma/base/error.h"

namespace kuberdma::validator {

// The module's answer to `request`; an error when the module cannot be loaded (no libibverbs)
// or the probe could not start (no peer within the timeout).
Result<nlohmann::json> VerbsProbe(const nlohmann::json& request);

}  // namespace kuberdma::validator
