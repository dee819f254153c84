// SPDX-License-Identifier: Apache-2.0
// Device plugin config parsing: every field type-checked, every error naming entry and field.
#include "kuberdma/deviceplugin/config.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

#include "kuberdma/base/json.h"

namespace kuberdma::deviceplugin {

using nlohmann::json;

namespace {

tl::unexpected<Error> Bad(const std::string& where, const std::string& what) {
  return Fail(ErrorCode::kInvalidArgument, "device plugin config: " + where + ": " + what);
}

Result<std::vector<std::string>> Strings(const json& obj, const char* key,
                                         const std::string& where) {
  std::vector<std::string> out;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return out;
  if (!it->is_array()) return Bad(where + "." + key, "must be an array of strings");
  for (const auto& v : *it) {
    if (!v.is_string())
      return Bad(where + "." + key,
                 "must be an array of strings (found " + std::string(v.type_name()) + ")");
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::string NormalizeHexId(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s.rfind("0x", 0) == 0) s = s.substr(2);
  return s;
}

bool ValidName(const std::string& n) {
  if (n.empty() || n.size() > 63) return false;
  for (char c : n) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '_' && c != '.')
      return false;
  }
  return std::isalnum(static_cast<unsigned char>(n.front())) != 0 &&
         std::isalnum(static_cast<unsigned char>(n.back())) != 0;
}

// The kubelet registers only extended resource names (IsExtendedResourceName): a prefix that is
// a DNS-1123 subdomain outside kubernetes.io, and "requests.<prefix>/<name>" a qualified name,
// so the prefix has at most 253 - 9 characters.
bool ValidPrefix(const std::string& p) {
  if (p.empty() || p.size() > 244) return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('.', start);
    if (end == std::string::npos) end = p.size();
    std::string_view label(p.data() + start, end - start);
    if (label.empty() || label.size() > 63) return false;
    for (char c : label) {
      if ((c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-') return false;
    }
    if (label.front() == '-' || label.back() == '-') return false;
    start = end + 1;
  }
  bool native = p == "kubernetes.io" ||
                (p.size() > 14 && p.compare(p.size() - 14, 14, ".kubernetes.io") == 0);
  return !native;
}

Result<void> CheckFunctions(const std::vector<std::string>& functions, const std::string& sw) {
  for (const auto& f : functions) {
    if (f != "pf" && f != "vf" && f != "sf") {
      return Bad(sw + ".functions", "'" + f + R"(' is not "pf", "vf" or "sf")");
    }
  }
  return {};
}

const std::vector<std::string> kSelectorKeys = {
    "vendors",  "deviceIDs", "drivers",     "ifNames",   "linkTypes", "pciAddresses",
    "hcaNames", "pfNames",   "rootDevices", "functions", "rails"};
const std::vector<std::string> kEntryKeys = {
    "resourceName", "resourcePrefix", "rdmaHcaMax", "selectors", "devices",       "policy",
    "injectMad",    "ncclEnv",        "extraEnv",   "cdi",       "commLibraries", "commInterface"};

// Unknown keys are errors: a misspelt key must not silently mean "no constraint".
Result<void> KnownKeys(const json& obj, const std::vector<std::string>& known,
                       const std::string& where, const std::string& why) {
  for (const auto& [key, value] : obj.items()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return Bad(where + "." + key, "unknown field (" + why + "; known: " + list + ")");
  }
  return {};
}

Result<std::vector<int>> Rails(const json& s, const std::string& sw) {
  std::vector<int> out;
  auto it = s.find("rails");
  if (it == s.end() || it->is_null()) return out;
  if (!it->is_array()) return Bad(sw + ".rails", "must be an array of rail numbers (1, 2, ...)");
  for (const auto& v : *it) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() < 1 || v.get<uint64_t>() > 64) {
      return Bad(sw + ".rails", "every entry must be a rail number 1..64");
    }
    out.push_back(static_cast<int>(v.get<uint64_t>()));
  }
  return out;
}

Result<void> ParseSelectors(const json& entry, const std::string& where, Selectors* sel) {
  json s = json::object();
  if (auto it = entry.find("selectors"); it != entry.end() && !it->is_null()) {
    if (!it->is_object()) return Bad(where + ".selectors", "must be an object");
    s = *it;
  }
  std::string sw = where + ".selectors";
  KUBERDMA_TRY(
      KnownKeys(s, kSelectorKeys, sw, "a misspelt selector would select every HCA of the node"));
  KUBERDMA_ASSIGN_OR_RETURN(sel->rails, Rails(s, sw));
  struct Field {
    const char* key;
    std::vector<std::string>* dst;
  };
  for (auto [key, dst] :
       {Field{"vendors", &sel->vendors}, Field{"deviceIDs", &sel->device_ids},
        Field{"drivers", &sel->drivers}, Field{"ifNames", &sel->if_names},
        Field{"linkTypes", &sel->link_types}, Field{"pciAddresses", &sel->pci_addresses},
        Field{"hcaNames", &sel->hca_names}, Field{"pfNames", &sel->pf_names},
        Field{"rootDevices", &sel->root_devices}, Field{"functions", &sel->functions}}) {
    KUBERDMA_ASSIGN_OR_RETURN(*dst, Strings(s, key, sw));
  }
  // The shared plugin's deprecated top-level "devices" lists netdev names.
  KUBERDMA_ASSIGN_OR_RETURN(auto devices, Strings(entry, "devices", where));
  sel->if_names.insert(sel->if_names.end(), devices.begin(), devices.end());
  KUBERDMA_TRY(CheckFunctions(sel->functions, sw));
  for (auto& v : sel->vendors) v = NormalizeHexId(v);
  for (auto& v : sel->device_ids) v = NormalizeHexId(v);
  for (auto& t : sel->link_types) {
    std::string l = t;
    for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == "ether" || l == "ethernet" || l == "eth") {
      t = "ether";
    } else if (l == "infiniband" || l == "ib") {
      t = "infiniband";
    } else {
      return Bad(sw + ".linkTypes", "'" + t + R"(' is not "ether" or "infiniband")");
    }
  }
  return {};
}

// commLibraries: a list of library names, or "all" (the default); [] or "none" for none.
// commInterface: the pod's control interface the libraries are told.
Result<void> ParseComm(const json& e, const std::string& where, ResourceConfig* rc) {
  if (auto it = e.find("commLibraries"); it != e.end() && !it->is_null()) {
    std::string list;
    if (it->is_string()) {
      list = it->get<std::string>();
    } else if (it->is_array()) {
      for (const auto& v : *it) {
        if (!v.is_string()) return Bad(where + ".commLibraries", "must be names (strings)");
        list += (list.empty() ? "" : ",") + v.get<std::string>();
      }
    } else {
      return Bad(where + ".commLibraries", R"(must be a list of names or "all")");
    }
    if (list.empty() || list == "none") {
      rc->comm_libraries.clear();
    } else {
      auto libs = contract::ParseLibraries(list);
      if (!libs) return Bad(where + ".commLibraries", libs.error().message());
      rc->comm_libraries = *libs;
    }
  }
  if (auto it = e.find("commInterface"); it != e.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty() ||
        it->get<std::string>().find_first_of(",= ") != std::string::npos) {
      return Bad(where + ".commInterface", "must be one interface name (eth0)");
    }
    rc->comm_interface = it->get<std::string>();
  }
  return {};
}

Result<void> ParseOurs(const json& e, const std::string& where, ResourceConfig* rc) {
  if (auto it = e.find("policy"); it != e.end() && !it->is_null()) {
    if (!it->is_string()) return Bad(where + ".policy", R"(must be "pool" or "per-hca")");
    std::string p = it->get<std::string>();
    if (p == "pool") {
      rc->policy = Policy::kPool;
    } else if (p == "per-hca") {
      rc->policy = Policy::kPerHca;
    } else {
      return Bad(where + ".policy", "'" + p + R"(' is not "pool" or "per-hca")");
    }
  }
  for (auto [key, dst] : {std::pair{"injectMad", &rc->inject_mad},
                          std::pair{"ncclEnv", &rc->nccl_env}, std::pair{"cdi", &rc->cdi}}) {
    if (auto it = e.find(key); it != e.end() && !it->is_null()) {
      if (!it->is_boolean()) return Bad(where + "." + key, "must be true or false");
      *dst = it->get<bool>();
    }
  }
  KUBERDMA_TRY(ParseComm(e, where, rc));
  if (auto it = e.find("extraEnv"); it != e.end() && !it->is_null()) {
    if (!it->is_object()) return Bad(where + ".extraEnv", "must be an object of strings");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) return Bad(where + ".extraEnv." + k, "must be a string");
      rc->extra_env[k] = v.get<std::string>();
    }
  }
  return {};
}

Result<ResourceConfig> ParseEntry(const json& e, const std::string& where) {
  if (!e.is_object()) return Bad(where, "must be an object");
  KUBERDMA_TRY(KnownKeys(e, kEntryKeys, where, "a misspelt field would be ignored"));
  ResourceConfig rc;
  auto name = e.find("resourceName");
  if (name == e.end() || !name->is_string())
    return Bad(where + ".resourceName", "is required (a string)");
  rc.resource_name = name->get<std::string>();
  if (!ValidName(rc.resource_name)) {
    return Bad(where + ".resourceName",
               "'" + rc.resource_name +
                   "' must be 1-63 of [A-Za-z0-9_.-], starting and ending alphanumeric");
  }
  if (auto it = e.find("resourcePrefix"); it != e.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty())
      return Bad(where + ".resourcePrefix", "must be a non-empty string");
    rc.resource_prefix = it->get<std::string>();
  }
  if (!ValidPrefix(rc.resource_prefix)) {
    return Bad(where + ".resourcePrefix",
               "'" + rc.resource_prefix +
                   "' must be a DNS subdomain (lower-case letters, digits, '-' and '.', at most "
                   "244 characters) outside kubernetes.io, as the kubelet requires");
  }
  auto max = e.find("rdmaHcaMax");
  if (max == e.end() || !max->is_number_unsigned() || max->get<uint64_t>() == 0 ||
      max->get<uint64_t>() > kMaxSlots) {
    return Bad(where + ".rdmaHcaMax", "is required: the number of slots, 1.." +
                                          std::to_string(kMaxSlots) +
                                          " (ListAndWatch must fit the kubelet's 4 MiB gRPC "
                                          "message limit)");
  }
  rc.rdma_hca_max = static_cast<uint32_t>(max->get<uint64_t>());
  KUBERDMA_TRY(ParseSelectors(e, where, &rc.selectors));
  KUBERDMA_TRY(ParseOurs(e, where, &rc));
  return rc;
}

// periodicUpdateInterval, healthPollMs, cdiSpecDir.
Result<void> ParseTopLevel(const json& j, Config* cfg) {
  if (auto it = j.find("periodicUpdateInterval"); it != j.end() && !it->is_null()) {
    if (!it->is_number_unsigned())
      return Bad("periodicUpdateInterval", "must be a non-negative integer (seconds)");
    cfg->periodic_update_interval_s =
        static_cast<uint32_t>(std::min<uint64_t>(it->get<uint64_t>(), 86400));
  }
  if (auto it = j.find("healthPollMs"); it != j.end() && !it->is_null()) {
    if (!it->is_number_unsigned() || it->get<uint64_t>() < 50)
      return Bad("healthPollMs", "must be an integer >= 50");
    cfg->health_poll_ms = static_cast<uint32_t>(std::min<uint64_t>(it->get<uint64_t>(), 60000));
  }
  if (auto it = j.find("cdiSpecDir"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return Bad("cdiSpecDir", "must be a string");
    cfg->cdi_dir = it->get<std::string>();
  }
  return {};
}

}  // namespace

Result<Config> ParseConfig(std::string_view text) {
  auto parsed = ParseUntrustedJson(text, "device plugin config");
  if (!parsed) return Bad("(top level)", parsed.error().message());
  json j = std::move(*parsed);
  if (!j.is_object()) return Bad("(top level)", "must be an object");
  KUBERDMA_TRY(KnownKeys(j, {"periodicUpdateInterval", "healthPollMs", "cdiSpecDir", "configList"},
                         "(top level)", "a misspelt field would be ignored"));
  Config cfg;
  KUBERDMA_TRY(ParseTopLevel(j, &cfg));
  auto list = j.find("configList");
  if (list == j.end() || !list->is_array() || list->empty()) {
    return Bad("configList", "is required: a non-empty array of resources");
  }
  if (list->size() > kMaxResources) {
    return Bad("configList", "has " + std::to_string(list->size()) + " resources; at most " +
                                 std::to_string(kMaxResources) +
                                 " (each is a gRPC server and a kubelet registration)");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < list->size(); ++i) {
    std::string where = "configList[" + std::to_string(i) + "]";
    KUBERDMA_ASSIGN_OR_RETURN(ResourceConfig rc, ParseEntry((*list)[i], where));
    if (!names.insert(rc.FullName()).second)
      return Bad(where + ".resourceName", rc.FullName() + " is configured twice");
    cfg.resources.push_back(std::move(rc));
  }
  return cfg;
}

}  // namespace kuberdma::deviceplugin
