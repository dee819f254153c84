// SPDX-License-Identifier: Apache-2.0
// The view type, host paths, the kubelet checkpoint, and the helpers every view uses.
#include <algorithm>

#include "internal.h"
#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
#include "kuberdma/contract/pod_env.h"

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

std::vector<sysfs::Gpu> PodGpus(const Inputs& in) {
  auto all = sysfs::DiscoverGpus(in.root);
  std::vector<sysfs::Gpu> out;
  for (const auto& g : all ? *all : std::vector<sysfs::Gpu>{}) {
    if (in.gpus.empty() || std::find(in.gpus.begin(), in.gpus.end(), g.address) != in.gpus.end()) {
      out.push_back(g);
    }
  }
  return out;
}

std::vector<std::string> Ours(const Inputs& in) {
  auto pod = contract::Read([&in](const char* k) { return in.getenv ? in.getenv(k) : nullptr; });
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

std::string Text(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// IDs from a plain list (before Kubernetes 1.20) or a NUMA node -> list map; false when any
// is not a string.
bool ReadIds(const json& ids, std::vector<std::string>* out) {
  auto add_list = [out](const json& list) {
    if (!list.is_array()) return false;
    for (const auto& id : list) {
      if (!id.is_string()) return false;
      out->push_back(id.get<std::string>());
    }
    return true;
  };
  if (ids.is_null()) return true;
  if (!ids.is_object()) return add_list(ids);
  return std::all_of(ids.begin(), ids.end(), add_list);
}

}  // namespace

Result<std::vector<Allocation>> ReadCheckpoint(const std::string& path,
                                               std::vector<std::string>* problems) {
  KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseCheckpoint(text, path, problems);
}

Result<std::vector<Allocation>> ParseCheckpoint(std::string_view text, const std::string& path,
                                                std::vector<std::string>* problems) {
  auto doc = ParseUntrustedJson(text, path);
  if (!doc || !doc->is_object()) {
    return Fail(ErrorCode::kInvalidArgument,
                path + " is not a kubelet checkpoint" + (doc ? "" : ": " + doc.error().message()));
  }
  auto note = [&](const std::string& what) {
    if (problems != nullptr) problems->push_back(path + ": " + what);
  };
  std::vector<Allocation> out;
  auto data = doc->find("Data");
  if (data == doc->end() || !data->is_object()) {
    note("Data is not an object");
    return out;
  }
  auto entries = data->find("PodDeviceEntries");
  if (entries == data->end() || !entries->is_array()) {
    if (entries != data->end() && !entries->is_null()) note("PodDeviceEntries is not a list");
    return out;
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    const json& e = (*entries)[i];
    if (!e.is_object()) {
      note("entry " + std::to_string(i) + " is not an object");
      continue;
    }
    if (Text(e, "ResourceName").rfind("rdma/", 0) != 0) continue;
    Allocation a{Text(e, "PodUID"), Text(e, "ContainerName"), Text(e, "ResourceName"), {}};
    auto ids = e.find("DeviceIDs");
    if (ids != e.end() && !ReadIds(*ids, &a.device_ids)) {
      note("entry " + std::to_string(i) + " (" + a.resource + ", pod " + a.pod_uid +
           "): DeviceIDs holds something other than strings");
      continue;
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace kuberdma::doctor
