// SPDX-License-Identifier: Apache-2.0
// InfiniBand's side of the cabling (docs/fabric.md): LLDP is Ethernet's, so an IB rail's neighbour
// is asked of the neighbour itself, with a directed-route subnet management packet one hop out of
// the HCA's port (IBA 14.2.2: Get(NodeInfo), Get(NodeDescription)), as ibnetdiscover walks a
// fabric. The answer is the subnet manager's view of that cable: the switch's node GUID, the
// number of its port the cable lands on, and its node description (what a switch is named).
// A MAD comes from the fabric, so it is untrusted: every field is bounds-checked, the description
// kept printable (escaped as \xNN).
//
//   UmadHopProbe probe;
//   auto n = probe.Neighbor("mlx5_0", 1, std::chrono::seconds(1));   // switch GUID, port, name
//   auto heard = HearInfiniband(probe, rails, std::chrono::seconds(1));
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/lldp/lldp.h"
#include "kuberdma/rails/cabling.h"

namespace kuberdma::smp {

inline constexpr size_t kMadSize = 256;
inline constexpr uint8_t kDirectedRouteClass = 0x81;  // subnet management, directed route
enum class Attr : uint16_t { kNodeDescription = 0x0010, kNodeInfo = 0x0011 };

// The Get SMP for `attr` one hop out of the local `port`: directed route, hop count 1, initial
// path [0, port], permissive LIDs. `tid` is the transaction ID the answer echoes.
std::array<uint8_t, kMadSize> HopQuery(Attr attr, uint8_t port, uint64_t tid);

struct NodeInfo {
  int node_type = 0;  // 1 channel adapter, 2 switch, 3 router
  int num_ports = 0;
  uint64_t node_guid = 0;
  uint64_t port_guid = 0;
  int local_port = 0;  // the neighbour's port the query arrived on: where the cable lands
};

// The GetResp to HopQuery(kNodeInfo): kInvalidArgument for a MAD too short, of another class,
// method or attribute, or carrying an error status (naming it).
Result<NodeInfo> ParseNodeInfo(std::span<const uint8_t> mad);
// The GetResp to HopQuery(kNodeDescription): its text up to the first NUL, escaped.
Result<std::string> ParseNodeDescription(std::span<const uint8_t> mad);

// The neighbour as the cabling judgement reads it: chassis ID "0x" + the node GUID, port ID the
// port number, system name the node description (the GUID when it has none).
lldp::Neighbor ToNeighbor(const NodeInfo& info, const std::string& description);

// The seam: what is one hop out of `hca`'s `port`.
class HopProbe {
 public:
  virtual ~HopProbe() = default;
  // kUnsupported without the umad device (no ib_umad), kPermissionDenied without access to it,
  // kTimeout when nothing answered (the port is down, or its peer does not answer SMPs).
  virtual Result<lldp::Neighbor> Neighbor(const std::string& hca, int port,
                                          std::chrono::milliseconds timeout) = 0;
};

// The real probe: rdma-core's libibumad on /dev/infiniband/umad<N> (root, or its group).
class UmadHopProbe final : public HopProbe {
 public:
  Result<lldp::Neighbor> Neighbor(const std::string& hca, int port,
                                  std::chrono::milliseconds timeout) override;
};

// Fills the neighbour of each InfiniBand rail of `rails` (RailNeighbor::infiniband) from `probe`;
// other rails are left as they are. Success when every IB rail answered, else the first failure
// (the rails that answered keep their neighbour even then; a rail that failed keeps none).
Result<void> HearInfiniband(HopProbe& probe, std::vector<rails::RailNeighbor>& rails,
                            std::chrono::milliseconds timeout);

}  // namespace kuberdma::smp
