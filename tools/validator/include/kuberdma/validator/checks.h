// SPDX-License-Identifier: Apache-2.0
// The validator's arithmetic and environment reading, all pure or over a SysfsRoot:
//  - traffic counters and their deltas (IB port_xmit_data/port_rcv_data are 4-byte words; 32-bit
//    counters wrap or saturate),
//  - nccl-tests' bandwidth definitions (AllReduce busbw = algbw * 2(n-1)/n),
//  - rank and world size from RANK/WORLD_SIZE, MPI, Slurm, an Indexed Job or a StatefulSet ordinal,
//  - the expected device set from flags or the device plugin's env (KUBERDMA_HCAS, NCCL_IB_HCA).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/sysfs/sysfs.h"
#include "kuberdma/validator/collective.h"

namespace kuberdma::validator {

// ---- Counters ----

struct CounterDelta {
  uint64_t value = 0;
  bool wrapped = false;    // a 32-bit counter went round once
  bool saturated = false;  // a 32-bit IB counter stuck at 0xffffffff: no proof possible
};

// Difference of two readings of one counter. A 32-bit counter (both readings <= 0xffffffff) that
// went backwards wrapped once; one at 0xffffffff at the end is saturated.
CounterDelta Delta(uint64_t before, uint64_t after);

// InfiniBand/RoCE port data counters count 4-byte words.
inline constexpr uint64_t kIbDataWordBytes = 4;

struct PortCounters {
  uint64_t xmit_words = 0;
  uint64_t rcv_words = 0;
  std::map<std::string, uint64_t> errors;  // symbol_error, link_downed, port_rcv_errors, ...
};

// Reads class/infiniband/<hca>/ports/<port>/counters. kNotFound if the port has none.
Result<PortCounters> ReadPortCounters(const sysfs::SysfsRoot& root, const std::string& hca,
                                      uint32_t port);

// The error counters worth reporting when they move during a run.
const std::vector<std::string>& IbErrorCounters();

// ---- Bandwidth (nccl-tests' definitions) ----

struct Bandwidth {
  double algbw_gbps = 0;  // GB/s: bytes / time
  double busbw_gbps = 0;  // GB/s: algbw * the collective's bus factor (2(n-1)/n for AllReduce)
};
Bandwidth CollectiveBandwidth(Collective c, uint64_t bytes, double seconds, int nranks);
Bandwidth AllReduceBandwidth(uint64_t bytes, double seconds, int nranks);

// ---- Ranks ----

struct RankInfo {
  int rank = -1;
  int world_size = -1;
  std::string source;  // which variables said so
};
// Reads rank and world size through `getenv` and `hostname`; flags (>= 0) win. kInvalidArgument
// naming what is missing when nothing says.
Result<RankInfo> DetectRank(const std::function<const char*(const char*)>& getenv,
                            const std::string& hostname, int flag_rank, int flag_world);

// ---- Expected devices ----

struct Expected {
  std::vector<std::string> names;                      // HCA names (ib) or netdev names (socket)
  std::map<std::string, std::vector<uint32_t>> ports;  // HCA -> ports named by NCCL_IB_HCA (if any)
  std::string source;  // --expect, KUBERDMA_HCAS, NCCL_IB_HCA or NCCL_SOCKET_IFNAME
};
// The HCAs the pod should have: `flag` (comma list), else KUBERDMA_HCAS, else NCCL_IB_HCA (exact
// "=" form or a plain list; an exclusion list "^..." names none).
Result<Expected> ExpectedHcas(const std::function<const char*(const char*)>& getenv,
                              const std::string& flag);
// The netdevs for the Socket transport: `flag`, else NCCL_SOCKET_IFNAME; for Gloo (`gloo`):
// `flag`, else the interfaces its environment lists (contract/comm_env.h).
Result<Expected> ExpectedNetdevs(const std::function<const char*(const char*)>& getenv,
                                 const std::string& flag, bool gloo = false);

}  // namespace kuberdma::validator
