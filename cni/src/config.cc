// SPDX-License-Identifier: Apache-2.0
// Network configuration parsing. Every known field is type-checked before it is read, so a hostile
// or mistaken config ends in error 7 naming the field, never in an exception.
#include "kuberdma/cni/config.h"

#include <cstdlib>

#include "kuberdma/sysfs/hca.h"

namespace kuberdma::cni {

using nlohmann::json;

namespace {

std::string TypeName(const json& j) { return j.type_name(); }

CniError FieldError(std::string_view field, std::string_view want, const json& got) {
  return CniError{kInvalidConfig,
                  "invalid network config: field '" + std::string(field) + "' must be " +
                      std::string(want) + " (got " + TypeName(got) + ")",
                  ""};
}

// Reads an optional string field; error 7 if present with another type.
CniResult<std::optional<std::string>> OptString(const json& obj, const char* key,
                                                std::string_view path = "") {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<std::string>{};
  std::string field = path.empty() ? key : std::string(path) + "." + key;
  if (!it->is_string()) return tl::unexpected(FieldError(field, "a string", *it));
  return std::optional<std::string>(it->get<std::string>());
}

CniResult<void> ParseLinkState(const json& obj, NetConf* conf) {
  auto s = OptString(obj, "linkState");
  if (!s) return tl::unexpected(s.error());
  if (!*s || **s == "auto" || (*s)->empty()) return {};
  if (**s == "up") {
    conf->link_state = LinkState::kUp;
  } else if (**s == "down") {
    conf->link_state = LinkState::kDown;
  } else {
    return CniFail(kInvalidConfig, "invalid network config: linkState '" + **s +
                                       R"(' is not one of "up", "down", "auto")");
  }
  return {};
}

CniResult<void> ParseNumbers(const json& obj, NetConf* conf) {
  if (auto it = obj.find("mtu"); it != obj.end() && !it->is_null()) {
    if (!it->is_number_integer()) return tl::unexpected(FieldError("mtu", "an integer", *it));
    auto v = it->get<int64_t>();
    if (v < 68 || v > 65535) {
      return CniFail(kInvalidConfig,
                     "invalid network config: mtu " + std::to_string(v) + " is outside 68..65535");
    }
    conf->mtu = static_cast<uint32_t>(v);
  }
  if (auto it = obj.find("pkey"); it != obj.end() && !it->is_null()) {
    std::string text;
    if (it->is_string()) {
      text = it->get<std::string>();
    } else if (it->is_number_unsigned() || it->is_number_integer()) {
      text = std::to_string(it->get<int64_t>());
    } else {
      return tl::unexpected(FieldError("pkey", "a string such as \"0xffff\"", *it));
    }
    auto pk = sysfs::ParsePkey(text);
    if (!pk) return CniFail(kInvalidConfig, "invalid network config: " + pk.error().message());
    conf->pkey = *pk;
  }
  if (auto it = obj.find("lockTimeoutMs"); it != obj.end() && !it->is_null()) {
    if (!it->is_number_unsigned()) {
      return tl::unexpected(FieldError("lockTimeoutMs", "a non-negative integer", *it));
    }
    conf->lock_timeout_ms = static_cast<uint32_t>(std::min<uint64_t>(it->get<uint64_t>(), 600000));
  }
  return {};
}

CniResult<void> ParseSelectors(const json& obj, NetConf* conf) {
  json rc = json::object();
  if (auto it = obj.find("runtimeConfig"); it != obj.end() && !it->is_null()) {
    if (!it->is_object()) return tl::unexpected(FieldError("runtimeConfig", "an object", *it));
    rc = *it;
  }
  struct Source {
    SelectorKind kind;
    const json* obj;
    const char* key;
  };
  const Source sources[] = {
      {SelectorKind::kRuntimeDeviceId, &rc, "deviceID"},
      {SelectorKind::kDeviceId, &obj, "deviceID"},
      {SelectorKind::kPciBusId, &obj, "pciBusID"},
      {SelectorKind::kHca, &obj, "hca"},
      {SelectorKind::kNetdev, &obj, "device"},
      {SelectorKind::kMac, &obj, "mac"},
  };
  for (const auto& s : sources) {
    auto v = OptString(*s.obj, s.key, s.obj == &rc ? "runtimeConfig" : "");
    if (!v) return tl::unexpected(v.error());
    if (!*v || (*v)->empty()) continue;
    if (conf->selector.kind == SelectorKind::kAuto) {
      conf->selector = {s.kind, **v};
    } else {
      conf->other_selectors.push_back({s.kind, **v});
    }
  }
  auto info = OptString(rc, "CNIDeviceInfoFile", "runtimeConfig");
  if (!info) return tl::unexpected(info.error());
  if (*info) conf->device_info_file = **info;
  return {};
}

CniResult<void> ParseOptions(const json& obj, NetConf* conf) {
  auto policy = OptString(obj, "sharedNetnsPolicy");
  if (!policy) return tl::unexpected(policy.error());
  if (*policy) {
    if (**policy == "continue") {
      conf->shared_policy = SharedPolicy::kContinue;
    } else if (**policy == "error") {
      conf->shared_policy = SharedPolicy::kError;
    } else {
      return CniFail(kInvalidConfig, "invalid network config: sharedNetnsPolicy '" + **policy +
                                         R"(' is not "continue" or "error")");
    }
  }
  for (auto [key, dst] :
       {std::pair{"stateDir", &conf->state_dir}, std::pair{"logFile", &conf->log_file},
        std::pair{"logLevel", &conf->log_level}}) {
    auto v = OptString(obj, key);
    if (!v) return tl::unexpected(v.error());
    if (*v && !(*v)->empty()) *dst = **v;
  }
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
  bool level_ok = false;
  for (const char* l : kLevels) level_ok = level_ok || conf->log_level == l;
  if (!level_ok) {
    return CniFail(kInvalidConfig, "invalid network config: logLevel '" + conf->log_level +
                                       "' is not one of trace, debug, info, warn, error, off");
  }
  if (conf->state_dir.empty() || conf->state_dir[0] != '/') {
    return CniFail(kInvalidConfig, "invalid network config: stateDir must be an absolute path");
  }
  return {};
}

CniResult<void> ParseGc(const json& obj, NetConf* conf) {
  auto it = obj.find("cni.dev/valid-attachments");
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_array()) {
    return tl::unexpected(FieldError("cni.dev/valid-attachments", "an array", *it));
  }
  std::vector<Attachment> out;
  for (const auto& a : *it) {
    if (!a.is_object()) {
      return tl::unexpected(FieldError("cni.dev/valid-attachments[]", "an object", a));
    }
    auto cid = OptString(a, "containerID", "cni.dev/valid-attachments[]");
    auto ifn = OptString(a, "ifname", "cni.dev/valid-attachments[]");
    if (!cid) return tl::unexpected(cid.error());
    if (!ifn) return tl::unexpected(ifn.error());
    out.push_back({cid->value_or(""), ifn->value_or("")});
  }
  conf->valid_attachments = std::move(out);
  return {};
}

CniResult<void> ParseIpam(const json& obj, NetConf* conf) {
  auto it = obj.find("ipam");
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_object()) return tl::unexpected(FieldError("ipam", "an object", *it));
  // An empty ipam object is "no IPAM", as the reference plugins read it.
  if (it->empty()) return {};
  auto type = OptString(*it, "type", "ipam");
  if (!type) return tl::unexpected(type.error());
  if (!*type || (*type)->empty()) {
    return CniFail(kInvalidConfig,
                   "invalid network config: field 'ipam.type' is required (the IPAM plugin to run, "
                   "e.g. \"host-local\", \"static\" or \"whereabouts\")");
  }
  conf->ipam = IpamConf{**type, *it};
  return {};
}

CniResult<void> CheckVersion(const NetConf& conf, Command command) {
  const auto& v = SupportedVersions();
  if (std::find(v.begin(), v.end(), conf.cni_version) == v.end()) {
    return CniFail(kIncompatibleVersion, "incompatible CNI version " + conf.cni_version +
                                             " (supported: 0.3.0, 0.3.1, "
                                             "0.4.0, 1.0.0, 1.1.0)");
  }
  if (command == Command::kCheck && CompareVersions(conf.cni_version, "0.4.0") < 0) {
    return CniFail(kIncompatibleVersion,
                   "CHECK needs cniVersion 0.4.0 or later (config has " + conf.cni_version + ")");
  }
  if ((command == Command::kStatus || command == Command::kGc) &&
      CompareVersions(conf.cni_version, "1.1.0") < 0) {
    return CniFail(kIncompatibleVersion,
                   "STATUS and GC need cniVersion 1.1.0 (config has " + conf.cni_version + ")");
  }
  return {};
}

}  // namespace

std::string_view SelectorName(SelectorKind kind) {
  switch (kind) {
    case SelectorKind::kAuto:
      return "automatic (first free HCA)";
    case SelectorKind::kRuntimeDeviceId:
      return "runtimeConfig.deviceID";
    case SelectorKind::kDeviceId:
      return "deviceID";
    case SelectorKind::kPciBusId:
      return "pciBusID";
    case SelectorKind::kHca:
      return "hca";
    case SelectorKind::kNetdev:
      return "device";
    case SelectorKind::kMac:
      return "mac";
  }
  return "?";
}

std::string ErrorVersion(std::string_view text) {
  json obj = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!obj.is_object()) return "";
  auto it = obj.find("cniVersion");
  if (it == obj.end() || !it->is_string()) return "";
  const auto& v = SupportedVersions();
  auto version = it->get<std::string>();
  return std::find(v.begin(), v.end(), version) != v.end() ? version : "";
}

const std::vector<std::string>& SupportedVersions() {
  static const std::vector<std::string> kVersions = {"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"};
  return kVersions;
}

int CompareVersions(std::string_view a, std::string_view b) {
  auto next = [](std::string_view& s) {
    long v = std::strtol(std::string(s.substr(0, s.find('.'))).c_str(), nullptr, 10);
    auto dot = s.find('.');
    s = dot == std::string_view::npos ? std::string_view() : s.substr(dot + 1);
    return v;
  };
  for (int i = 0; i < 3; ++i) {
    long x = next(a);
    long y = next(b);
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

CniResult<NetConf> ParseConfig(std::string_view text, Command command) {
  json obj = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded()) {
    return CniFail(kDecodeFailure, "failed to decode network config: not valid JSON");
  }
  if (!obj.is_object()) {
    return CniFail(kDecodeFailure, "failed to decode network config: top level is " +
                                       TypeName(obj) + ", not an object");
  }
  NetConf conf;
  for (auto [key, dst] : {std::pair{"cniVersion", &conf.cni_version}, std::pair{"name", &conf.name},
                          std::pair{"type", &conf.type}}) {
    auto v = OptString(obj, key);
    if (!v) return tl::unexpected(v.error());
    if (*v) *dst = **v;
  }
  if (conf.cni_version.empty()) conf.cni_version = "0.1.0";  // the spec's meaning of "absent"
  if (command != Command::kVersion && conf.name.empty()) {
    return CniFail(kInvalidConfig, "invalid network config: field 'name' is required");
  }
  for (auto step :
       {&ParseLinkState, &ParseNumbers, &ParseSelectors, &ParseOptions, &ParseGc, &ParseIpam}) {
    auto r = step(obj, &conf);
    if (!r) return tl::unexpected(r.error());
  }
  if (auto it = obj.find("prevResult"); it != obj.end() && !it->is_null()) {
    if (!it->is_object()) return tl::unexpected(FieldError("prevResult", "an object", *it));
    conf.prev_result = *it;
  }
  if (command != Command::kVersion) {
    auto r = CheckVersion(conf, command);
    if (!r) return tl::unexpected(r.error());
  }
  conf.raw = std::move(obj);
  return conf;
}

}  // namespace kuberdma::cni
