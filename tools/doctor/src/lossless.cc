// SPDX-License-Identifier: Apache-2.0
// The node's lossless RoCE setup, per RoCE port on the host: PFC on the RoCE priority (IEEE DCB
// over rtnetlink), DSCP trust, and ECN/DCQCN for that priority (mlx5's
// /sys/class/net/<if>/ecn/roce_np|roce_rp/enable/<prio>). Where the driver cannot say, the answer
// is "unknown", never a failure.
#include <map>
#include <optional>

#include "internal.h"

namespace kuberdma::doctor::internal {

using nlohmann::json;

namespace {

// NCCL's RoCE traffic class 106 is DSCP 26 (106 >> 2).
constexpr uint8_t kRoceDscp = 26;

// Findings of one check over many ports: failures and warnings one by one (each has its own fix),
// the ports that passed or could not be checked as one line each.
class PortFindings {
 public:
  PortFindings(View& v, std::string check) : v_(v), check_(std::move(check)) {}
  ~PortFindings() {
    if (!ok_.empty()) Add(v_, check_, Status::kOk, Join(ok_, "; "));
    if (!unknown_.empty()) Add(v_, check_, Status::kUnknown, Join(unknown_, "; "));
  }
  PortFindings(const PortFindings&) = delete;
  PortFindings& operator=(const PortFindings&) = delete;
  void Ok(std::string what) { ok_.push_back(std::move(what)); }
  void Unknown(std::string what) { unknown_.push_back(std::move(what)); }
  void Bad(Status s, std::string what, std::string fix) {
    Add(v_, check_, s, std::move(what), std::move(fix));
  }

 private:
  View& v_;
  std::string check_;
  std::vector<std::string> ok_, unknown_;
};

struct Checks {
  explicit Checks(View& v)
      : pfc(v, "lossless-pfc"), trust(v, "lossless-trust"), ecn(v, "lossless-ecn") {}
  PortFindings pfc, trust, ecn;
};

// PFC and trust from DCB; returns the priority RoCE traffic uses on this port.
int CheckDcb(const Inputs& in, const netns::NetNs& host, const std::string& nd, json& port,
             Checks& c) {
  auto st = in.dcb->Get(host, nd);
  if (!st) {
    port["dcb"] = "unknown";
    c.pfc.Unknown(nd + (st.error().code() == ErrorCode::kNotFound
                            ? " is not in this namespace (attached to a pod?)"
                            : ": its driver has no DCB support (veths have none)"));
    return in.roce_priority;
  }
  int prio = st->TrustsDscp() && st->PriorityOfDscp(kRoceDscp) >= 0 ? st->PriorityOfDscp(kRoceDscp)
                                                                    : in.roce_priority;
  port["pfcPriorities"] = st->PfcPriorities();
  port["trust"] = st->TrustsDscp() ? "dscp" : "pcp";
  port["rocePriority"] = prio;
  std::string p = std::to_string(prio);
  if (st->PfcEnabled(prio)) {
    c.pfc.Ok(nd + " priority " + p);
  } else {
    std::string bits = "0,0,0,0,0,0,0,0";
    bits[2 * static_cast<size_t>(prio)] = '1';
    c.pfc.Bad(
        Status::kFail,
        nd + ": PFC is off on priority " + p + " (RoCE's)" +
            (st->PfcPriorities().empty() ? ", and on every other: RoCE traffic is lossy" : ""),
        "mlnx_qos -i " + nd + " --pfc " + bits + " (or: dcb pfc set dev " + nd + " prio-pfc " + p +
            ":on), and PFC on the switch port");
  }
  if (st->TrustsDscp()) {
    c.trust.Ok(nd + " dscp (" + std::to_string(kRoceDscp) + " -> " + p + ")");
  } else {
    c.trust.Bad(Status::kWarn,
                nd + " trusts PCP: untagged RoCE traffic (pods send untagged) lands in priority 0",
                "mlnx_qos -i " + nd + " --trust dscp, and map DSCP 26 to priority " + p);
  }
  return prio;
}

void CheckEcn(const Inputs& in, const std::string& nd, int prio, json& port, Checks& c) {
  std::string base = "class/net/" + nd + "/ecn/";
  std::string p = std::to_string(prio);
  auto np = in.root.ReadAttr(base + "roce_np/enable/" + p);
  auto rp = in.root.ReadAttr(base + "roce_rp/enable/" + p);
  if (!np && !rp) {
    port["ecn"] = "unknown";
    c.ecn.Unknown(nd + " has no ECN switches (" + in.root.Sys(base) + ": not an mlx5 netdev here)");
    return;
  }
  bool on = np && *np == "1" && rp && *rp == "1";
  port["ecn"] = {
      {"priority", prio}, {"notificationPoint", np ? *np : "?"}, {"reactionPoint", rp ? *rp : "?"}};
  if (on) {
    c.ecn.Ok(nd + " priority " + p);
    return;
  }
  c.ecn.Bad(Status::kFail,
            nd + ": ECN (DCQCN) is off for priority " + p + " (roce_np " + (np ? *np : "?") +
                ", roce_rp " + (rp ? *rp : "?") + "): congestion is handled by pause alone",
            "echo 1 > /sys/class/net/" + nd + "/ecn/roce_np/enable/" + p +
                "; echo 1 > /sys/class/net/" + nd + "/ecn/roce_rp/enable/" + p +
                " (and ECN marking on the switch)");
}

// Where a RoCE port's netdev is: the host's namespace under its own name, or, while a pod has
// it (the CNI's record says which namespace and what the pod calls it), that pod's.
struct PortPlace {
  std::optional<netns::NetNs> ns;
  std::string netdev;
  std::string pod;    // the record's namespace path, empty on the host
  std::string error;  // why the pod's namespace could not be entered
};

PortPlace Locate(const Inputs& in, const Result<netns::NetNs>& host, const sysfs::Hca& h,
                 const std::vector<cni::AttachmentRecord>& records) {
  for (const auto& r : records) {
    // A child's parent, whose PFC and trust count, stays on the host.
    if (r.hca_address != h.address || r.netns.empty() || !r.done || cni::IsChildMode(r.mode)) {
      continue;
    }
    auto pod = netns::NetNs::Open(HostPath(in, r.netns));
    if (!pod) return {std::nullopt, r.ifname, r.netns, pod.error().message()};
    return {std::move(*pod), r.ifname, r.netns, ""};
  }
  std::optional<netns::NetNs> ns;
  if (host) {
    if (auto d = host->Dup()) ns = std::move(*d);
  }
  return {std::move(ns), h.netdevs.empty() ? "" : h.netdevs.front(), "", ""};
}

void CheckPort(const Inputs& in, const sysfs::Hca& h, PortPlace& at, Checks& c, json& ports) {
  json port = {{"hca", h.name}, {"netdev", at.netdev}};
  if (!at.pod.empty()) port["netns"] = at.pod;
  int prio = in.roce_priority;
  if (in.dcb != nullptr && at.ns) {
    prio = CheckDcb(in, *at.ns, at.netdev, port, c);
  } else if (in.dcb != nullptr) {
    port["dcb"] = "unknown";
    c.pfc.Unknown(at.netdev + " is in " + at.pod + ", which cannot be entered: " + at.error);
  }
  if (at.pod.empty()) {
    CheckEcn(in, at.netdev, prio, port, c);
  } else {
    // The ECN switches are under the pod's own /sys/class/net (sysfs follows the namespace).
    port["ecn"] = "unknown";
    c.ecn.Unknown(at.netdev + " is in pod namespace " + at.pod +
                  ": its ECN switches are in the pod's /sys/class/net/" + at.netdev + "/ecn");
  }
  ports.push_back(port);
}

}  // namespace

void CheckLossless(const Inputs& in, const std::vector<sysfs::Hca>& hcas,
                   const std::vector<cni::AttachmentRecord>& records, View& v) {
  json ports = json::array();
  auto host = netns::NetNs::Current();
  {
    Checks c(v);
    for (const auto& h : hcas) {
      if (h.link_layer() != sysfs::LinkLayer::kEthernet) continue;
      PortPlace at = Locate(in, host, h, records);
      if (at.netdev.empty()) continue;
      CheckPort(in, h, at, c, ports);
    }
  }
  if (!ports.empty()) v.doc["lossless"] = ports;
}

}  // namespace kuberdma::doctor::internal
