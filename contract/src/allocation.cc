// SPDX-License-Identifier: Apache-2.0
// Allocation records: one JSON file per slot, written by the device plugin, read by the CNI.
#include "kuberdma/contract/allocation.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/sock/stream.h"

namespace kuberdma::contract {

using nlohmann::json;

namespace {

// A slot ID is a file name here: no separators, no dot files, bounded.
bool PlainName(const std::string& s) {
  if (s.empty() || s.size() > 128 || s[0] == '.') return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == ':';
  });
}

Result<std::vector<std::string>> Names(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array() || it->size() > kMaxAllocationSlots) {
    return Fail(ErrorCode::kInvalidArgument, std::string("allocation record: '") + key +
                                                 "' must be an array of at most " +
                                                 std::to_string(kMaxAllocationSlots) + " names");
  }
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string() || !PlainName(v.get<std::string>())) {
      return Fail(ErrorCode::kInvalidArgument,
                  std::string("allocation record: every entry of '") + key + "' must be a name");
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

std::string AllocationsDir() {
  const char* env = std::getenv(kAllocationsDirEnv);
  return env != nullptr && *env != '\0' ? env : kAllocationsDir;
}

std::string EncodeAllocation(const AllocationGroup& group) {
  return json{{"resource", group.resource}, {"slots", group.slots}, {"hcas", group.hcas}}.dump() +
         "\n";
}

Result<AllocationGroup> DecodeAllocation(std::string_view text) {
  KUBERDMA_ASSIGN_OR_RETURN(json j, ParseUntrustedJson(text, "allocation record"));
  if (!j.is_object() || !j.contains("resource") || !j["resource"].is_string()) {
    return Fail(ErrorCode::kInvalidArgument, "allocation record: not an object with a resource");
  }
  AllocationGroup g{.resource = j["resource"].get<std::string>()};
  KUBERDMA_ASSIGN_OR_RETURN(g.slots, Names(j, "slots"));
  KUBERDMA_ASSIGN_OR_RETURN(g.hcas, Names(j, "hcas"));
  if (g.slots.size() != g.hcas.size()) {
    return Fail(ErrorCode::kInvalidArgument, "allocation record: slots and hcas differ in length");
  }
  return g;
}

Result<void> RecordAllocation(const std::string& dir, const AllocationGroup& group) {
  for (const auto& slot : group.slots) {
    if (!PlainName(slot)) {
      return Fail(ErrorCode::kInvalidArgument, "slot ID '" + slot + "' is not a plain name");
    }
  }
  KUBERDMA_TRY(MakeDirs(dir));
  std::string text = EncodeAllocation(group);
  for (const auto& slot : group.slots) KUBERDMA_TRY(WriteFileAtomic(dir + "/" + slot, text));
  return {};
}

Result<std::optional<AllocationGroup>> FindAllocation(const std::string& dir,
                                                      const std::string& slot) {
  if (!PlainName(slot)) return std::optional<AllocationGroup>{};
  std::string path = dir + "/" + slot;
  auto text = ReadRegularFile(path);
  if (!text && text.error().code() == ErrorCode::kNotFound) return std::optional<AllocationGroup>{};
  if (!text) return Fail(text.error().Wrap("read allocation record " + path));
  auto group = DecodeAllocation(*text);
  if (!group) return Fail(group.error().Wrap(path));
  return std::optional<AllocationGroup>(std::move(*group));
}

namespace {

std::string ClaimPath(const std::string& dir, const std::string& uid) {
  return dir + "/claims/" + uid + ".json";
}

std::string String(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

std::vector<std::string> Strings(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || !j[key].is_array()) return out;
  for (const auto& v : j[key]) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace

Result<void> RecordClaim(const std::string& dir, const ClaimRecord& rec) {
  if (!PlainName(rec.uid)) {
    return Fail(ErrorCode::kInvalidArgument, "claim uid '" + rec.uid + "' is not a plain name");
  }
  KUBERDMA_TRY(MakeDirs(dir + "/claims"));
  json j{{"claim", rec.claim}, {"uid", rec.uid}, {"pods", rec.pods}, {"hcas", rec.hcas}};
  return WriteFileAtomic(ClaimPath(dir, rec.uid), j.dump() + "\n");
}

Result<void> RemoveClaim(const std::string& dir, const std::string& uid) {
  if (!PlainName(uid)) {
    return Fail(ErrorCode::kInvalidArgument, "claim uid '" + uid + "' is not a plain name");
  }
  if (::unlink(ClaimPath(dir, uid).c_str()) != 0 && errno != ENOENT) {
    return FailErrno(errno, "remove " + ClaimPath(dir, uid));
  }
  return {};
}

std::vector<ClaimRecord> ListClaims(const std::string& dir, std::vector<std::string>* skipped) {
  std::vector<ClaimRecord> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/claims", ec)) {
    std::string path = e.path().string();
    if (!path.ends_with(".json")) continue;
    auto text = ReadRegularFile(path);
    auto j = text ? ParseUntrustedJson(*text, path) : Result<json>(Fail(text.error()));
    if (!j || !j->is_object()) {
      if (skipped != nullptr) skipped->push_back(path);
      continue;
    }
    out.push_back({.claim = String(*j, "claim"),
                   .uid = String(*j, "uid"),
                   .pods = Strings(*j, "pods"),
                   .hcas = Strings(*j, "hcas")});
  }
  std::sort(out.begin(), out.end(),
            [](const ClaimRecord& a, const ClaimRecord& b) { return a.claim < b.claim; });
  return out;
}

std::vector<ClaimRecord> ClaimsOfPod(const std::string& dir, const std::string& ns,
                                     const std::string& name, std::vector<std::string>* skipped) {
  std::string pod = ns + "/" + name;
  std::vector<ClaimRecord> out;
  for (auto& r : ListClaims(dir, skipped)) {
    if (std::find(r.pods.begin(), r.pods.end(), pod) != r.pods.end()) out.push_back(std::move(r));
  }
  return out;
}

Result<void> RecordTaints(const std::string& dir, const std::vector<TaintRecord>& taints) {
  json list = json::array();
  for (const auto& t : taints) {
    list.push_back({{"device", t.device},
                    {"hca", t.hca},
                    {"key", t.key},
                    {"value", t.value},
                    {"effect", t.effect}});
  }
  KUBERDMA_TRY(MakeDirs(dir));
  return WriteFileAtomic(dir + "/dra-taints.json", json{{"taints", list}}.dump() + "\n");
}

Result<std::vector<TaintRecord>> ListTaints(const std::string& dir) {
  const std::string path = dir + "/dra-taints.json";
  KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path));
  KUBERDMA_ASSIGN_OR_RETURN(json j, ParseUntrustedJson(text, path));
  const json list = j.is_object() ? j.value("taints", json()) : json();
  if (!list.is_array() || list.size() > kMaxAllocationSlots) {
    return Fail(ErrorCode::kInvalidArgument, path + ": 'taints' must be an array");
  }
  std::vector<TaintRecord> out;
  for (const auto& t : list) {
    if (!t.is_object()) return Fail(ErrorCode::kInvalidArgument, path + ": a taint is no object");
    out.push_back({.device = String(t, "device"),
                   .hca = String(t, "hca"),
                   .key = String(t, "key"),
                   .value = String(t, "value"),
                   .effect = String(t, "effect")});
  }
  return out;
}

Result<void> RecordVerdicts(const std::string& dir, const std::vector<VerdictRecord>& verdicts) {
  json list = json::array();
  for (const auto& v : verdicts) {
    list.push_back({{"hca", v.hca}, {"why", v.why}, {"effect", v.effect}});
  }
  KUBERDMA_TRY(MakeDirs(dir));
  return WriteFileAtomic(dir + "/acceptance-verdicts.json", json{{"verdicts", list}}.dump() + "\n");
}

Result<std::vector<VerdictRecord>> ListVerdicts(const std::string& dir) {
  const std::string path = dir + "/acceptance-verdicts.json";
  KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path));
  KUBERDMA_ASSIGN_OR_RETURN(json j, ParseUntrustedJson(text, path));
  const json list = j.is_object() ? j.value("verdicts", json()) : json();
  if (!list.is_array() || list.size() > kMaxAllocationSlots) {
    return Fail(ErrorCode::kInvalidArgument, path + ": 'verdicts' must be an array");
  }
  std::vector<VerdictRecord> out;
  for (const auto& v : list) {
    std::string effect = v.is_object() ? String(v, "effect") : "";
    if (!v.is_object() || !PlainName(String(v, "hca")) ||
        (effect != "NoSchedule" && effect != "None")) {
      return Fail(ErrorCode::kInvalidArgument,
                  path + ": a verdict needs an HCA name and an effect NoSchedule or None");
    }
    out.push_back({.hca = String(v, "hca"), .why = String(v, "why"), .effect = effect});
  }
  return out;
}

Result<void> RecordCabling(const std::string& dir, const std::vector<CablingRecord>& rails) {
  json list = json::array();
  for (const auto& r : rails) {
    list.push_back({{"hca", r.hca},
                    {"netdev", r.netdev},
                    {"rail", r.rail},
                    {"switch", r.switch_name},
                    {"port", r.port},
                    {"chassisId", r.chassis_id},
                    {"heardAt", r.heard_at},
                    {"expiresAt", r.expires_at}});
  }
  KUBERDMA_TRY(MakeDirs(dir));
  return WriteFileAtomic(dir + "/cabling.json", json{{"rails", list}}.dump() + "\n");
}

namespace {

bool Printable(const std::string& s) {
  return s.size() <= 2048 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

}  // namespace

Result<std::vector<CablingRecord>> ListCabling(const std::string& dir) {
  const std::string path = dir + "/cabling.json";
  KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadRegularFile(path));
  // An empty file is what a pod's hostPath mount (FileOrCreate) leaves before the first round.
  if (text.empty()) return Fail(ErrorCode::kNotFound, path + ": nothing recorded yet");
  KUBERDMA_ASSIGN_OR_RETURN(json j, ParseUntrustedJson(text, path));
  const json list = j.is_object() ? j.value("rails", json()) : json();
  if (!list.is_array() || list.size() > kMaxAllocationSlots) {
    return Fail(ErrorCode::kInvalidArgument, path + ": 'rails' must be an array");
  }
  std::vector<CablingRecord> out;
  for (const auto& v : list) {
    if (!v.is_object() || !PlainName(String(v, "hca"))) {
      return Fail(ErrorCode::kInvalidArgument, path + ": every rail needs an HCA name");
    }
    CablingRecord r{.hca = String(v, "hca"),
                    .netdev = String(v, "netdev"),
                    .switch_name = String(v, "switch"),
                    .port = String(v, "port"),
                    .chassis_id = String(v, "chassisId")};
    if (v.contains("rail") && v["rail"].is_number_integer()) r.rail = v["rail"].get<int>();
    if (v.contains("heardAt") && v["heardAt"].is_number_integer())
      r.heard_at = v["heardAt"].get<int64_t>();
    if (v.contains("expiresAt") && v["expiresAt"].is_number_integer()) {
      r.expires_at = v["expiresAt"].get<int64_t>();
    } else if (r.heard_at > 0) {
      r.expires_at = r.heard_at + kDefaultLldpTtl;  // written before withdrawals existed
    }
    for (const std::string* s : {&r.netdev, &r.switch_name, &r.port, &r.chassis_id}) {
      if (!Printable(*s))
        return Fail(ErrorCode::kInvalidArgument, path + ": a name that is not printable");
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string EncodePodQuery(const PodQuery& q) {
  return json{{"namespace", q.ns}, {"name", q.name}}.dump() + "\n";
}

Result<PodQuery> DecodePodQuery(std::string_view line) {
  KUBERDMA_ASSIGN_OR_RETURN(json j, ParseUntrustedJson(line, "pod query"));
  if (!j.is_object() || !j.contains("namespace") || !j["namespace"].is_string() ||
      !j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty() ||
      j["name"].get<std::string>().size() > 253 || j["namespace"].get<std::string>().size() > 63) {
    return Fail(ErrorCode::kInvalidArgument, R"(pod query: want {"namespace":..,"name":..})");
  }
  return PodQuery{.ns = j["namespace"].get<std::string>(), .name = j["name"].get<std::string>()};
}

std::string EncodePodAnswer(const PodAnswer& a) {
  json j = {{"known", a.known}, {"hcas", a.hcas}, {"slots", a.slots}};
  if (!a.claims.empty()) j["claims"] = a.claims;
  if (!a.error.empty()) j["error"] = a.error;
  return j.dump() + "\n";
}

Result<PodAnswer> DecodePodAnswer(std::string_view line) {
  KUBERDMA_ASSIGN_OR_RETURN(json j, ParseUntrustedJson(line, "device plugin answer"));
  if (!j.is_object() || !j.value("known", json()).is_boolean()) {
    return Fail(ErrorCode::kInvalidArgument, "device plugin answer: not an answer object");
  }
  PodAnswer a{.known = j["known"].get<bool>()};
  KUBERDMA_ASSIGN_OR_RETURN(a.hcas, Names(j, "hcas"));
  KUBERDMA_ASSIGN_OR_RETURN(a.slots, Names(j, "slots"));
  if (auto e = j.find("error"); e != j.end() && e->is_string()) a.error = e->get<std::string>();
  if (auto c = j.find("claims"); c != j.end() && c->is_object()) {
    if (c->size() > kMaxAllocationSlots) {
      return Fail(ErrorCode::kInvalidArgument, "device plugin answer: too many claims");
    }
    for (const auto& [uid, hcas] : c->items()) {
      KUBERDMA_ASSIGN_OR_RETURN(a.claims[uid], Names(*c, uid.c_str()));
    }
  }
  return a;
}

Result<PodAnswer> AskPodHcas(const std::string& socket, const PodQuery& query,
                             std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  KUBERDMA_ASSIGN_OR_RETURN(UniqueFd fd, sock::ConnectUnix(socket));
  std::string q = EncodePodQuery(query);
  KUBERDMA_TRY(WriteAll(fd.get(), q.data(), q.size()));
  auto line = ReadLineBefore(fd.get(), deadline, 64u << 10);
  if (!line) return Fail(line.error().Wrap("ask " + socket + " for the pod's HCAs"));
  return DecodePodAnswer(*line);
}

std::vector<rails::RailNeighbor> RailNeighbors(const std::vector<CablingRecord>& recs) {
  std::vector<rails::RailNeighbor> out;
  for (const auto& r : recs) {
    out.push_back(
        {.rail = r.rail,
         .hca = r.hca,
         .netdev = r.netdev,
         .neighbor = lldp::Neighbor{
             .chassis_id = r.chassis_id, .port_id = r.port, .system_name = r.switch_name}});
  }
  return out;
}

CablingRecord CablingRecordOf(const rails::RailNeighbor& rail, const lldp::Neighbor& heard,
                              int64_t heard_at) {
  return {.hca = rail.hca,
          .netdev = rail.netdev,
          .rail = rail.rail,
          .switch_name = heard.Switch(),
          .port = heard.Port(),
          .chassis_id = heard.chassis_id,
          .heard_at = heard_at,
          .expires_at = rail.infiniband ? 0 : heard_at + heard.ttl_s};
}

}  // namespace kuberdma::contract
