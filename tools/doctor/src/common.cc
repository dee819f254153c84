// SPDX-License-Identifier: Apache-2.0
// The view type, host paths, the kubelet checkpoint, and the helpers every view uses.
#include <algorithm>

#include "internal.h"
#include "kuberdma/base/files.h"
#include "kuberdma/podenv/pod_env.h"

namespace kuberdma::doctor {

using nlohmann::json;

namespace internal {

std::string Env(const Inputs& in, const char* k) {
  const char* v = in.getenv ? in.getenv(k) : nullptr;
  return v == nullptr ? "" : v;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + std::string(1, sep)) {
    if (c == sep) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

std::string Join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

std::vector<std::string> Names(const std::vector<sysfs::Hca>& hcas) {
  std::vector<std::string> out;
  for (const auto& h : hcas) out.push_back(h.name);
  return out;
}

std::vector<std::string> Ours(const Inputs& in) {
  auto pod = podenv::Read([&in](const char* k) { return in.getenv ? in.getenv(k) : nullptr; });
  return pod ? pod->HcaNames() : std::vector<std::string>{};
}

const char* StatusName(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kWarn:
      return "warn";
    case Status::kFail:
      return "FAIL";
    case Status::kUnknown:
      break;
  }
  return "unknown";
}

}  // namespace internal

int View::ExitCode() const {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.status == Status::kFail; })
             ? 1
             : 0;
}

json View::ToJson() const {
  json f = json::array();
  for (const auto& x : findings) {
    f.push_back({{"check", x.check},
                 {"status", internal::StatusName(x.status)},
                 {"message", x.message},
                 {"fix", x.fix}});
  }
  return {{"view", name}, {"result", doc}, {"findings", f}, {"exitCode", ExitCode()}};
}

std::string HostPath(const Inputs& in, const std::string& path) {
  if (in.host_root.empty() || path.empty() || path.rfind("/proc/", 0) == 0) return path;
  std::string root = in.host_root;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  return root + (path.front() == '/' ? path : "/" + path);
}

namespace {

Allocation AllocationFrom(const json& e) {
  Allocation a{
      e.value("PodUID", ""), e.value("ContainerName", ""), e.value("ResourceName", ""), {}};
  const auto& ids = e.contains("DeviceIDs") ? e["DeviceIDs"] : json::array();
  if (ids.is_array()) {  // before Kubernetes 1.20: a plain list
    for (const auto& id : ids) a.device_ids.push_back(id.get<std::string>());
  } else if (ids.is_object()) {  // NUMA node -> IDs
    for (const auto& [numa, list] : ids.items()) {
      for (const auto& id : list) a.device_ids.push_back(id.get<std::string>());
    }
  }
  return a;
}

}  // namespace

Result<std::vector<Allocation>> ReadCheckpoint(const std::string& path) {
  KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object())
    return Fail(ErrorCode::kInvalidArgument, path + " is not a kubelet checkpoint");
  std::vector<Allocation> out;
  auto entries =
      doc.contains("Data") ? doc["Data"].value("PodDeviceEntries", json::array()) : json::array();
  for (const auto& e : entries) {
    if (e.value("ResourceName", "").rfind("rdma/", 0) != 0) continue;
    out.push_back(AllocationFrom(e));
  }
  return out;
}

}  // namespace kuberdma::doctor
