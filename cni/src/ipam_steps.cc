// SPDX-License-Identifier: Apache-2.0
// The plugin's IPAM steps: allocate (ADD) and apply to the pod interface, verify, release (every
// undo path), check, collect (GC). Delegation itself is ipam.cc.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "kuberdma/cni/plugin.h"

namespace kuberdma::cni {

using link::LinkInfo;
using netns::NetNs;
using nlohmann::json;

namespace {

// The newest version both this plugin and the IPAM plugin speak, not newer than `ours`.
std::string BestCommonVersion(const std::vector<std::string>& theirs, const std::string& ours) {
  std::string best;
  for (const auto& v : SupportedVersions()) {
    bool shared = std::find(theirs.begin(), theirs.end(), v) != theirs.end();
    if (shared && CompareVersions(v, ours) <= 0) best = v;
  }
  return best;
}

DelegateRequest ToDelegate(Command command, const Request& req) {
  return {.command = command,
          .container_id = req.container_id,
          .netns = req.netns,
          .ifname = req.ifname,
          .args = req.args,
          .path = req.path};
}

bool HasAddress(const std::vector<link::IpPrefix>& have, const link::IpPrefix& want) {
  return std::find(have.begin(), have.end(), want) != have.end();
}

}  // namespace

std::optional<IpamState> IpamOf(const AttachmentRecord* rec, const NetConf& conf) {
  if (rec != nullptr && rec->ipam) return rec->ipam;
  if (conf.ipam) return IpamState{.type = conf.ipam->type, .section = conf.ipam->section};
  return std::nullopt;
}

CniResult<json> Plugin::CallIpam(Command command, const IpamState& ipam, const Request& req,
                                 const NetConf& conf) const {
  if (d_.ipam == nullptr) {
    return CniFail(kInvalidConfig, "ipam " + ipam.type +
                                       " is configured but this plugin was "
                                       "built without IPAM");
  }
  json stdin_conf = conf.raw.is_object() && !conf.raw.empty()
                        ? conf.raw
                        : json{{"cniVersion", conf.cni_version}, {"name", conf.name}};
  stdin_conf["ipam"] = ipam.section;
  DelegateRequest dreq = ToDelegate(command, req);
  auto answer = d_.ipam->Run(ipam.type, dreq, stdin_conf);
  if (answer || answer.error().code != kIncompatibleVersion) return answer;
  // An IPAM plugin older than the config's cniVersion (Debian 12's host-local stops at 1.0.0):
  // speak the newest version it knows; its result is read whatever version it is in.
  auto versions = d_.ipam->Versions(ipam.type, dreq);
  std::string best = versions ? BestCommonVersion(*versions, conf.cni_version) : "";
  if (best.empty()) return answer;
  spdlog::debug("IPAM {} does not speak cniVersion {}: using {}", ipam.type, conf.cni_version,
                best);
  stdin_conf["cniVersion"] = best;
  return d_.ipam->Run(ipam.type, dreq, stdin_conf);
}

Result<void> Plugin::ConfigureInterface(const AttachmentRecord& rec, const IpamResult& ipam,
                                        std::optional<bool> want_up, const NetNs& pod) {
  KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l, d_.links.GetByName(pod, rec.ifname));
  std::string gw4;
  std::string gw6;
  for (const auto& ip : ipam.ips) {
    auto added = d_.addrs->AddAddress(pod, l.ifindex, ip.address);
    if (!added && added.error().code() != ErrorCode::kAlreadyExists) return added;
    std::string& gw = ip.address.family == 6 ? gw6 : gw4;
    if (gw.empty()) gw = ip.gateway;
  }
  // Routes through a gateway need the link up (the kernel has no connected route before).
  if (want_up) KUBERDMA_TRY(d_.links.Change(pod, l.ifindex, {.up = *want_up}));
  for (const auto& r : ipam.routes) {
    std::string gw = !r.gateway.empty() ? r.gateway : (r.dst.family == 6 ? gw6 : gw4);
    auto added = d_.addrs->AddRoute(pod, {.dst = r.dst, .gateway = gw, .ifindex = l.ifindex});
    if (!added && added.error().code() != ErrorCode::kAlreadyExists) return added;
  }
  return {};
}

CniResult<void> Plugin::AllocateAddresses(AttachPlan& plan, const Request& req, const NetConf& conf,
                                          const StateStore& store, const NetNs& pod) {
  AttachmentRecord& rec = plan.record;
  if (rec.ipam->type == kNodeAddressesIpam) return ApplyNodeAddresses(plan, pod);
  rec.ipam->requested = true;  // recorded before the call: a crash from here on still releases
  KUBERDMA_CNI_TRY(store.Save(rec), kStateFailure);
  auto doc = CallIpam(Command::kAdd, *rec.ipam, req, conf);
  if (!doc && doc.error().details == kIpamNotRun) {
    rec.ipam->requested = false;  // it never ran: there is nothing to release
    KUBERDMA_CNI_TRY(store.Save(rec), kStateFailure);
  }
  if (!doc) return tl::unexpected(doc.error());
  KUBERDMA_CNI_ASSIGN_OR_RETURN(IpamResult result, IpamResult::Parse(*doc, rec.ipam->type), 0);
  rec.ipam->result = result.ToJson();
  KUBERDMA_CNI_TRY(store.Save(rec), kStateFailure);
  auto configured = ConfigureInterface(rec, result, plan.want_up, pod);
  if (!configured) {
    return tl::unexpected(FromError(
        configured.error().Wrap("apply IPAM " + rec.ipam->type + "'s result"), kKernelRefused));
  }
  std::string ips;
  for (const auto& ip : result.ips) ips += (ips.empty() ? "" : ", ") + ip.address.Cidr();
  spdlog::info("IPAM {} gave {} {}", rec.ipam->type, req.ifname, ips);
  return {};
}

Result<void> Plugin::VerifyAddresses(const AttachmentRecord& rec, const NetNs& pod,
                                     int ifindex) const {
  if (!rec.ipam || !rec.ipam->result.is_object()) return {};
  auto ipam = IpamResult::Parse(rec.ipam->result, rec.ipam->type);
  if (!ipam) return Fail(ErrorCode::kInvalidArgument, ipam.error().msg);
  if (d_.addrs == nullptr) return Fail(ErrorCode::kInternal, "no address operations");
  KUBERDMA_ASSIGN_OR_RETURN(auto have, d_.addrs->ListAddresses(pod, ifindex));
  for (const auto& ip : ipam->ips) {
    if (!HasAddress(have, ip.address)) {
      return Fail(ErrorCode::kNotFound, rec.ifname + " lacks " + ip.address.Cidr() +
                                            ", which IPAM " + rec.ipam->type + " assigned");
    }
  }
  return {};
}

CniResult<void> Plugin::ApplyNodeAddresses(AttachPlan& plan, const NetNs& pod) {
  const AttachmentRecord& rec = plan.record;
  KUBERDMA_CNI_ASSIGN_OR_RETURN(IpamResult result, IpamResult::Parse(rec.ipam->result, "node"), 0);
  auto configured = ConfigureInterface(rec, result, plan.want_up, pod);
  if (!configured) {
    return tl::unexpected(
        FromError(configured.error().Wrap("apply the node's rail addresses"), kKernelRefused));
  }
  std::string ips;
  for (const auto& ip : result.ips) ips += (ips.empty() ? "" : ", ") + ip.address.Cidr();
  spdlog::info("{} keeps the node's rail addresses {} and {} route(s)", rec.ifname, ips,
               result.routes.size());
  return {};
}

Result<void> Plugin::RestoreNodeAddresses(const AttachmentRecord& rec, const NetNs& host) {
  if (!rec.ipam || rec.ipam->type != kNodeAddressesIpam) return {};
  auto result = IpamResult::Parse(rec.ipam->result, "node");
  if (!result) return Fail(ErrorCode::kInvalidArgument, result.error().msg);
  KUBERDMA_ASSIGN_OR_RETURN(LinkInfo l, link::FindByMac(d_.links, host, rec.mac));
  // The kernel flushed them when the netdev left; back on the node they are the rail's again.
  // Routes through a gateway need the link up: restored only when it is.
  IpamResult on_host = *result;
  if (!l.admin_up) on_host.routes.clear();
  AttachmentRecord as_host = rec;
  as_host.ifname = l.name;
  return ConfigureInterface(as_host, on_host, std::nullopt, host);
}

CniResult<void> Plugin::ReleaseAddresses(const IpamState& ipam, const Request& req,
                                         const NetConf& conf) {
  if (ipam.type == kNodeAddressesIpam) return {};  // they go back with the netdev (Restore)
  KUBERDMA_CNI_TRY(CallIpam(Command::kDel, ipam, req, conf), 0);
  spdlog::info("IPAM {} released {}/{}", ipam.type, req.container_id, req.ifname);
  return {};
}

CniResult<void> Plugin::CheckAddresses(const IpamState& ipam, const Request& req,
                                       const NetConf& conf) {
  if (ipam.type == kNodeAddressesIpam) return {};  // no plugin holds them: VerifyAddresses does
  KUBERDMA_CNI_TRY(CallIpam(Command::kCheck, ipam, req, conf), 0);
  return {};
}

CniResult<void> Plugin::CollectAddresses(const NetConf& conf, const Request& req) {
  IpamState ipam{.type = conf.ipam->type, .section = conf.ipam->section};
  if (d_.ipam == nullptr) return CniFail(kInvalidConfig, "ipam is configured but unavailable");
  auto versions = d_.ipam->Versions(ipam.type, ToDelegate(Command::kGc, req));
  bool has_gc =
      versions && std::find(versions->begin(), versions->end(), "1.1.0") != versions->end();
  if (!has_gc) {
    // Stale attachments were released one by one above; nothing more to ask.
    spdlog::info("IPAM {} has no GC (cniVersion 1.1.0): stale attachments were released by DEL",
                 ipam.type);
    return {};
  }
  KUBERDMA_CNI_TRY(CallIpam(Command::kGc, ipam, req, conf), 0);
  return {};
}

}  // namespace kuberdma::cni
