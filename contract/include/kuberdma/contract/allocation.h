// SPDX-License-Identifier: Apache-2.0
// Allocation records: which per-HCA slots the kubelet allocated together to one container, written
// by rdma-device-plugin at Allocate, read by the `rdma` CNI. Multus passes a pod's slots to its
// attachments in whatever order the kubelet lists them; a network that is one physical rail
// ("rail": i) finds, from the one slot it was given, every HCA of the same allocation and takes the
// one on rail i. One small file per slot, replaced whenever that slot is allocated again.
//
//   KUBERDMA_TRY(RecordAllocation(kAllocationsDir, {.resource = "rdma/hca", .slots = ids,
//                                                   .hcas = hcas}));
//   auto group = FindAllocation(kAllocationsDir, "mlx5_3-000");  // nullopt: none recorded
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kuberdma/base/error.h"
#include "kuberdma/rails/cabling.h"

namespace kuberdma::contract {

inline constexpr char kAllocationsDir[] = "/run/kube-rdma/allocations";
inline constexpr char kAllocationsDirEnv[] = "KUBERDMA_ALLOCATIONS_DIR";
inline constexpr size_t kMaxAllocationSlots = 256;

struct AllocationGroup {
  std::string resource;            // "rdma/hca"
  std::vector<std::string> slots;  // the slot IDs of one container's Allocate, as asked
  std::vector<std::string> hcas;   // their HCAs (names), one per slot
  bool operator==(const AllocationGroup&) const = default;
};

// KUBERDMA_ALLOCATIONS_DIR when set, else kAllocationsDir.
std::string AllocationsDir();

std::string EncodeAllocation(const AllocationGroup& group);
// kInvalidArgument for a document that is not one (wrong types, more than kMaxAllocationSlots,
// slots and hcas of different lengths).
Result<AllocationGroup> DecodeAllocation(std::string_view text);

// Writes `group` under each of its slots in `dir` (created when missing), atomically per file.
// kInvalidArgument for a slot ID that is not a plain file name.
Result<void> RecordAllocation(const std::string& dir, const AllocationGroup& group);

// The group `slot` was last allocated in; nullopt when none is recorded. Errors for a record
// that cannot be read or decoded, naming the file.
Result<std::optional<AllocationGroup>> FindAllocation(const std::string& dir,
                                                      const std::string& slot);

// ---- DRA: the HCAs a prepared ResourceClaim gave its pods ----
// The DRA driver records each claim it prepares (<dir>/claims/<uid>.json) with the pods the claim
// is reserved for (status.reservedFor), so that the CNI's allocation check accepts a DRA
// allocation as it accepts a device plugin one; unpreparing removes the record.

struct ClaimRecord {
  std::string claim;  // "team-a/trainer-0-pairs"
  std::string uid;
  std::vector<std::string> pods;  // "team-a/trainer-0"
  std::vector<std::string> hcas;  // "mlx5_0"
  bool operator==(const ClaimRecord&) const = default;
};

// kInvalidArgument for a uid that is not a plain file name.
Result<void> RecordClaim(const std::string& dir, const ClaimRecord& rec);
Result<void> RemoveClaim(const std::string& dir, const std::string& uid);
// Every record (the doctor's node view); unreadable ones are skipped (and said in `skipped`).
std::vector<ClaimRecord> ListClaims(const std::string& dir,
                                    std::vector<std::string>* skipped = nullptr);
// The records naming pod `ns`/`name`; unreadable records are skipped (and said in `skipped`).
std::vector<ClaimRecord> ClaimsOfPod(const std::string& dir, const std::string& ns,
                                     const std::string& name,
                                     std::vector<std::string>* skipped = nullptr);

// The DRA driver's devices that carry a taint now (dra/slices.h), as it last published them, for
// rdma-doctor: <dir>/dra-taints.json, rewritten when they change, empty when none is tainted.
struct TaintRecord {
  std::string device;  // "mlx5-0"
  std::string hca;     // "mlx5_0"
  std::string key;     // "rdma.kube-rdma.io/link-down"
  std::string value;   // "port-1-DOWN"
  std::string effect;  // NoSchedule, NoExecute, None
  bool operator==(const TaintRecord&) const = default;
};
Result<void> RecordTaints(const std::string& dir, const std::vector<TaintRecord>& taints);
// kNotFound when the driver never wrote one (DRA off); kInvalidArgument naming a bad file.
Result<std::vector<TaintRecord>> ListTaints(const std::string& dir);

// The fleet acceptance's verdict on this node's HCAs (rdma-validate --taint-dir, opt-in): the
// HCAs it named slow in its last pass, which the DRA driver taints (rdma.kube-rdma.io/acceptance)
// until the next pass rewrites the file. <dir>/acceptance-verdicts.json.
struct VerdictRecord {
  std::string hca;     // "mlx5_3"
  std::string why;     // "slow on rail 3: 40% of the fleet's median"
  std::string effect;  // the taint's: NoSchedule or None
  bool operator==(const VerdictRecord&) const = default;
};
Result<void> RecordVerdicts(const std::string& dir, const std::vector<VerdictRecord>& verdicts);
// kNotFound when no pass wrote one; kInvalidArgument naming a bad file.
Result<std::vector<VerdictRecord>> ListVerdicts(const std::string& dir);

// Each rail's switch as LLDP last named it (rdma-device-plugin --lldp, docs/fabric.md): the DRA
// driver publishes it as rdma.kube-rdma.io/leaf, the doctor shows it without listening again.
// A rail keeps its last neighbour while a pod holds its netdev (the frames go to the pod then);
// one that said it is gone (TTL 0), or stayed silent past its TTL, has no record.
// <dir>/cabling.json.
struct CablingRecord {
  std::string hca;     // "mlx5_3"
  std::string netdev;  // the rail's netdev on the host when it was heard
  int rail = 0;
  std::string switch_name;  // system name, else chassis ID (printable: escaped by the reader)
  std::string port;         // the switch's port
  std::string chassis_id;
  int64_t heard_at = 0;  // unix seconds
  // Unix seconds when the neighbour's word lapses (heard_at plus the LLDPDU's TTL) unless heard
  // again; 0: it has no lifetime (an InfiniBand rail's SMP answer).
  int64_t expires_at = 0;
  bool operator==(const CablingRecord&) const = default;
};
// An Ethernet rail's record written before records had "expiresAt": it lapses this long after it
// was heard (lldpd's and most switches' TTL: 4 x 30 s).
inline constexpr int64_t kDefaultLldpTtl = 120;
Result<void> RecordCabling(const std::string& dir, const std::vector<CablingRecord>& rails);
// kNotFound when nothing was heard yet (or --lldp is off; an empty file too); kInvalidArgument
// naming a bad file.
// Names that are not printable ASCII are refused with the file.
Result<std::vector<CablingRecord>> ListCabling(const std::string& dir);
// The records as the cabling judgement and the topology labels read them (rails/cabling.h).
std::vector<rails::RailNeighbor> RailNeighbors(const std::vector<CablingRecord>& recs);
// What `rail` heard from `heard` at `heard_at` (unix seconds), as a record: an Ethernet rail's
// lapses after the LLDPDU's TTL, an InfiniBand rail's (an SMP answer) never.
CablingRecord CablingRecordOf(const rails::RailNeighbor& rail, const lldp::Neighbor& heard,
                              int64_t heard_at);

// ---- Which HCAs a pod was allocated: the CNI asks rdma-device-plugin ----
// The CNI checks that the HCA it is about to attach is the pod's (kube-rdma's resources in the
// kubelet's pod-resources API). It runs for every attachment and must stay small and fast, so it
// asks the device plugin, which holds a gRPC client of the kubelet, over a unix socket in the
// allocations directory: one JSON line each way.

inline constexpr char kPodsSocket[] = "pods.sock";

struct PodQuery {
  std::string ns;
  std::string name;
};

struct PodAnswer {
  bool known = false;              // the kubelet lists the pod
  std::vector<std::string> hcas;   // the HCAs of kube-rdma's resources allocated to it
  std::vector<std::string> slots;  // their device IDs, for messages
  // The pod's prepared DRA claims, by uid: their HCAs (a claim device ID names one of them).
  std::map<std::string, std::vector<std::string>> claims;
  std::string error;  // the device plugin could not ask the kubelet: why
};

std::string EncodePodQuery(const PodQuery& q);
Result<PodQuery> DecodePodQuery(std::string_view line);
std::string EncodePodAnswer(const PodAnswer& a);
Result<PodAnswer> DecodePodAnswer(std::string_view line);

// Asks the device plugin at `socket` (one connection, one line each way), waiting at most
// `timeout` in all. kNotFound when nothing listens there, kTimeout when it does not answer in
// time, kIo or kInvalidArgument otherwise; a PodAnswer with `error` set when the device plugin
// could not reach the kubelet.
Result<PodAnswer> AskPodHcas(const std::string& socket, const PodQuery& query,
                             std::chrono::milliseconds timeout);

}  // namespace kuberdma::contract
