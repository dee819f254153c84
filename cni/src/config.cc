// SPDX-License-Identifier: Apache-2.0
// Network configuration parsing. Every known field is type-checked before it is read, so a hostile
// or mistaken config ends in error 7 naming the field, never in an exception.
#include "kuberdma/cni/config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
#include "kuberdma/cni/vf.h"
#include "kuberdma/link/link_ops.h"
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

// A device named in a config is looked up under /sys by that name: it must be a plain name that
// cannot walk the tree ("../infiniband/mlx5_1"). PCI and auxiliary addresses, slot IDs, HCA and
// netdev names and MACs (IPoIB's are 59 characters) all fit.
bool PlainDeviceName(std::string_view v) {
  if (v.empty() || v.size() > 64 || v == "." || v == "..") return false;
  return std::all_of(v.begin(), v.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-' ||
           c == ':';
  });
}

std::string Quoted(std::string_view v) {
  return json(std::string(v)).dump(-1, ' ', true, json::error_handler_t::replace);
}

CniResult<void> CheckDeviceName(SelectorKind kind, const std::string& v) {
  if (PlainDeviceName(v)) return {};
  return CniFail(kInvalidConfig, "invalid network config: " + std::string(SelectorName(kind)) +
                                     " " + Quoted(v) +
                                     " is not a device name (1-64 letters, digits and . _ - :, "
                                     "no '/', not '.' or '..')");
}

std::string Joined(const std::vector<std::string>& roots) {
  std::string out;
  for (const auto& r : roots) out += (out.empty() ? "" : ", ") + r;
  return out;
}

// The root of `roots` that `path` lies under; error naming the field and the allowed roots.
CniResult<std::string> RootOf(std::string_view field, const std::string& path,
                              const std::vector<std::string>& roots) {
  for (const auto& r : roots) {
    if (IsCleanPathUnder(path, r)) return r;
  }
  return CniFail(kInvalidConfig, "invalid network config: " + std::string(field) + " " +
                                     Quoted(path) + " is not a clean path under " + Joined(roots) +
                                     " (the node's " + kNodePolicyPath + " can add roots)");
}

// Multus names the file; it must be directly in its device-info directory.
CniResult<void> CheckDeviceInfoPath(const std::string& path, const NodePolicy& policy) {
  auto slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
  std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  bool ok = !file.empty() && file != "." && file != ".." &&
            std::find(policy.device_info_dirs.begin(), policy.device_info_dirs.end(), dir) !=
                policy.device_info_dirs.end();
  if (ok) return {};
  return CniFail(kInvalidConfig, "invalid network config: runtimeConfig.CNIDeviceInfoFile " +
                                     Quoted(path) + " is not a file directly in " +
                                     Joined(policy.device_info_dirs) +
                                     " (where Multus keeps device-info files)");
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

CniResult<void> ParseMode(const json& obj, NetConf* conf) {
  auto s = OptString(obj, "mode");
  if (!s) return tl::unexpected(s.error());
  if (!*s || (*s)->empty()) return {};
  auto mode = ParseAttachMode(**s);
  if (!mode) {
    return CniFail(kInvalidConfig,
                   "invalid network config: mode '" + **s +
                       R"(' is not one of "move", "macvlan", "ipvlan", "vf", "ipoib")");
  }
  conf->mode = *mode;
  return {};
}

// "ipoibMode": an IPoIB child's transport, mode ipoib only.
CniResult<void> ParseIpoibMode(const json& obj, NetConf* conf) {
  auto s = OptString(obj, "ipoibMode");
  if (!s) return tl::unexpected(s.error());
  if (!*s) return {};
  if (conf->mode != AttachMode::kIpoib) {
    return CniFail(kInvalidConfig, R"(invalid network config: ipoibMode needs "mode": "ipoib")");
  }
  if (**s == "datagram") {
    conf->ipoib_mode = link::IpoibMode::kDatagram;
  } else if (**s == "connected") {
    conf->ipoib_mode = link::IpoibMode::kConnected;
  } else {
    return CniFail(kInvalidConfig, "invalid network config: ipoibMode " + Quoted(**s) +
                                       R"( is not one of "datagram", "connected")");
  }
  return {};
}

// A non-negative integer field no larger than `max`; nullopt when absent.
CniResult<std::optional<uint32_t>> OptUint(const json& obj, const char* key, uint32_t max) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<uint32_t>{};
  if (!it->is_number_integer()) return tl::unexpected(FieldError(key, "an integer", *it));
  auto v = it->get<int64_t>();
  if (v < 0 || v > max) {
    return CniFail(kInvalidConfig, "invalid network config: " + std::string(key) + " " +
                                       std::to_string(v) + " is outside 0.." + std::to_string(max));
  }
  return std::optional<uint32_t>(static_cast<uint32_t>(v));
}

// "on" / "off", as sriov-cni spells spoofchk and trust; nullopt when absent.
CniResult<std::optional<bool>> OptOnOff(const json& obj, const char* key) {
  auto s = OptString(obj, key);
  if (!s) return tl::unexpected(s.error());
  if (!*s) return std::optional<bool>{};
  if (**s == "on" || **s == "off") return std::optional<bool>(**s == "on");
  return CniFail(kInvalidConfig, "invalid network config: " + std::string(key) + " " + Quoted(**s) +
                                     R"( is not "on" or "off")");
}

// The fields only mode vf reads (the PF sets them on the VF).
constexpr const char* kVfFields[] = {"vlan",       "vlanQoS",     "spoofchk",   "trust",
                                     "link_state", "min_tx_rate", "max_tx_rate"};

// A MAC a VF may be given: six octets, unicast, not zero.
CniResult<std::string> VfMac(const std::string& text, const char* field) {
  unsigned int b[6];
  char tail = 0;
  if (std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4],
                  &b[5], &tail) != 6 ||
      text.size() != 17) {
    return CniFail(kInvalidConfig, "invalid network config: " + std::string(field) + " " +
                                       Quoted(text) + " is not a MAC (aa:bb:cc:dd:ee:ff)");
  }
  bool zero = (b[0] | b[1] | b[2] | b[3] | b[4] | b[5]) == 0;
  if (zero || (b[0] & 1U) != 0) {
    return CniFail(kInvalidConfig, "invalid network config: " + std::string(field) + " " + text +
                                       " is " + (zero ? "all zero" : "a multicast address") +
                                       ": a VF needs a unicast MAC of its own");
  }
  return link::NormalizeMac(text);
}

CniResult<void> ParseVfRates(const json& obj, VfConf* vf) {
  KUBERDMA_CNI_ASSIGN_OR_RETURN(vf->min_tx_rate, OptUint(obj, "min_tx_rate", 10'000'000), 0);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(vf->max_tx_rate, OptUint(obj, "max_tx_rate", 10'000'000), 0);
  if (vf->min_tx_rate && vf->max_tx_rate && *vf->max_tx_rate != 0 &&
      *vf->min_tx_rate > *vf->max_tx_rate) {
    return CniFail(kInvalidConfig, "invalid network config: min_tx_rate " +
                                       std::to_string(*vf->min_tx_rate) + " is above max_tx_rate " +
                                       std::to_string(*vf->max_tx_rate) + " (Mbit/s)");
  }
  return {};
}

CniResult<void> ParseVfIdentity(const json& obj, VfConf* vf) {
  json rc = obj.contains("runtimeConfig") && obj["runtimeConfig"].is_object() ? obj["runtimeConfig"]
                                                                              : json::object();
  auto mac = OptString(rc, "mac", "runtimeConfig");
  if (!mac) return tl::unexpected(mac.error());
  if (*mac && !(*mac)->empty()) {
    KUBERDMA_CNI_ASSIGN_OR_RETURN(vf->mac, VfMac(**mac, "runtimeConfig.mac"), 0);
  }
  auto guid = OptString(rc, "infinibandGUID", "runtimeConfig");
  if (!guid) return tl::unexpected(guid.error());
  if (*guid && !(*guid)->empty()) {
    KUBERDMA_CNI_ASSIGN_OR_RETURN(vf->guid, CheckVfGuid(**guid, "runtimeConfig.infinibandGUID"), 0);
  }
  return {};
}

// The pkeys no pod can be given: the invalid pkey (0x0000, 0x8000: no partition at all) and the
// default partition's limited membership (0x7fff: its members cannot reach one another).
CniResult<void> CheckPartitionKey(uint16_t pkey) {
  if (sysfs::IsInvalidPkey(pkey)) {
    return CniFail(kInvalidConfig, "invalid network config: pkey " + sysfs::FormatPkey(pkey) +
                                       " is InfiniBand's invalid pkey (no partition); use the "
                                       "partition's pkey, e.g. \"0x8001\", or leave it unset");
  }
  if (sysfs::IsDefaultPartition(pkey) && (pkey & 0x8000) == 0) {
    return CniFail(kInvalidConfig,
                   "invalid network config: pkey 0x7fff is the default partition with limited "
                   "membership (limited members cannot reach one another); leave pkey unset "
                   "or \"0xffff\" for the default partition");
  }
  return {};
}

// Mode vf's fields; any of them under another mode is an error (the NAD meant a VF).
CniResult<void> ParseVf(const json& obj, NetConf* conf) {
  if (conf->mode != AttachMode::kVf) {
    for (const char* f : kVfFields) {
      if (obj.contains(f) && !obj[f].is_null()) {
        return CniFail(kInvalidConfig,
                       "invalid network config: " + std::string(f) +
                           R"( is set through an SR-IOV VF's PF: it needs "mode": "vf")");
      }
    }
    return {};
  }
  VfConf vf;
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto vlan, OptUint(obj, "vlan", 4094), 0);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto qos, OptUint(obj, "vlanQoS", 7), 0);
  if (qos && *qos != 0 && vlan.value_or(0) == 0) {
    return CniFail(kInvalidConfig,
                   "invalid network config: vlanQoS " + std::to_string(*qos) +
                       " is the priority of a VLAN's frames, and no vlan (1..4094) is set");
  }
  if (vlan) vf.vlan = static_cast<uint16_t>(*vlan);
  vf.qos = static_cast<uint8_t>(qos.value_or(0));
  KUBERDMA_CNI_ASSIGN_OR_RETURN(auto spoof, OptOnOff(obj, "spoofchk"), 0);
  vf.spoofchk = spoof.value_or(true);
  KUBERDMA_CNI_ASSIGN_OR_RETURN(vf.trust, OptOnOff(obj, "trust"), 0);
  auto ls = OptString(obj, "link_state");
  if (!ls) return tl::unexpected(ls.error());
  if (*ls) {
    vf.link_state = link::ParseVfLinkState(**ls);
    if (!vf.link_state) {
      return CniFail(kInvalidConfig, "invalid network config: link_state " + Quoted(**ls) +
                                         R"( is not one of "auto", "enable", "disable")");
    }
  }
  KUBERDMA_CNI_TRY(ParseVfRates(obj, &vf), 0);
  KUBERDMA_CNI_TRY(ParseVfIdentity(obj, &vf), 0);
  conf->vf = std::move(vf);
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
    KUBERDMA_CNI_TRY(CheckPartitionKey(*pk), 0);
    conf->pkey = *pk;
  }
  if (auto it = obj.find("rail"); it != obj.end() && !it->is_null()) {
    if (!it->is_number_integer()) return tl::unexpected(FieldError("rail", "an integer", *it));
    auto v = it->get<int64_t>();
    if (v < 1 || v > static_cast<int64_t>(rails::kMaxRails)) {
      return CniFail(kInvalidConfig, "invalid network config: rail " + std::to_string(v) +
                                         " is outside 1.." + std::to_string(rails::kMaxRails));
    }
    conf->rail = static_cast<int>(v);
  }
  if (auto it = obj.find("lockTimeoutMs"); it != obj.end() && !it->is_null()) {
    if (!it->is_number_unsigned()) {
      return tl::unexpected(FieldError("lockTimeoutMs", "a non-negative integer", *it));
    }
    conf->lock_timeout_ms = static_cast<uint32_t>(std::min<uint64_t>(it->get<uint64_t>(), 600000));
  }
  return {};
}

CniResult<void> ParseSelectors(const json& obj, const NodePolicy& policy, NetConf* conf) {
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
    KUBERDMA_CNI_TRY(CheckDeviceName(s.kind, **v), kInvalidConfig);
    if (conf->selector.kind == SelectorKind::kAuto) {
      conf->selector = {s.kind, **v};
    } else {
      conf->other_selectors.push_back({s.kind, **v});
    }
  }
  auto info = OptString(rc, "CNIDeviceInfoFile", "runtimeConfig");
  if (!info) return tl::unexpected(info.error());
  if (*info && !(*info)->empty()) {
    KUBERDMA_CNI_TRY(CheckDeviceInfoPath(**info, policy), kInvalidConfig);
    conf->device_info_file = **info;
  }
  return {};
}

CniResult<void> ParseOptions(const json& obj, const NodePolicy& policy, NetConf* conf) {
  auto shared = OptString(obj, "sharedNetnsPolicy");
  if (!shared) return tl::unexpected(shared.error());
  if (*shared) {
    if (**shared == "continue") {
      conf->shared_policy = SharedPolicy::kContinue;
    } else if (**shared == "error") {
      conf->shared_policy = SharedPolicy::kError;
    } else {
      return CniFail(kInvalidConfig, "invalid network config: sharedNetnsPolicy '" + **shared +
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
  KUBERDMA_CNI_ASSIGN_OR_RETURN(
      conf->state_root, RootOf("stateDir", conf->state_dir, policy.state_roots), kInvalidConfig);
  if (!conf->log_file.empty()) {
    KUBERDMA_CNI_ASSIGN_OR_RETURN(
        conf->log_root, RootOf("logFile", conf->log_file, policy.log_roots), kInvalidConfig);
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
  if (**type == kNodeAddressesIpam) {
    return CniFail(kInvalidConfig, "invalid network config: ipam.type '" + **type +
                                       R"(' is reserved: set "addresses": "node" instead)");
  }
  conf->ipam = IpamConf{**type, *it};
  return {};
}

// "addresses": "node" (routed rails): the netdev's own addresses and routes on the node go into
// the pod with it and come back on DEL; they are the rail's, configured on the host.
CniResult<void> ParseAddresses(const json& obj, NetConf* conf) {
  auto v = OptString(obj, "addresses");
  if (!v) return tl::unexpected(v.error());
  if (!*v || (*v)->empty()) return {};
  if (**v != "node") {
    return CniFail(kInvalidConfig, "invalid network config: addresses '" + **v +
                                       R"(' is not "node" (leave it unset to use ipam))");
  }
  if (conf->ipam) {
    return CniFail(kInvalidConfig,
                   "invalid network config: addresses \"node\" and ipam both give the interface "
                   "its addresses: keep one");
  }
  if (IsChildMode(conf->mode)) {
    return CniFail(kInvalidConfig,
                   "invalid network config: addresses \"node\" moves the netdev's own addresses "
                   "into the pod, and mode " +
                       std::string(AttachModeName(conf->mode)) +
                       " leaves the netdev on the node: use ipam for children");
  }
  conf->node_addresses = true;
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
  auto parsed = ParseUntrustedJson(text, "network config");
  if (!parsed || !parsed->is_object()) return "";
  const json& obj = *parsed;
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

CniResult<NetConf> ParseConfig(std::string_view text, Command command, const NodePolicy& policy) {
  auto parsed = ParseUntrustedJson(text, "network config");
  if (!parsed) return CniFail(kDecodeFailure, "failed to decode " + parsed.error().message());
  json obj = std::move(*parsed);
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
  for (auto step : {&ParseLinkState, &ParseMode, &ParseIpoibMode, &ParseVf, &ParseNumbers, &ParseGc,
                    &ParseIpam, &ParseAddresses}) {
    auto r = step(obj, &conf);
    if (!r) return tl::unexpected(r.error());
  }
  KUBERDMA_CNI_TRY(ParseSelectors(obj, policy, &conf), kInvalidConfig);
  KUBERDMA_CNI_TRY(ParseOptions(obj, policy, &conf), kInvalidConfig);
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

NetConf SalvageForDel(std::string_view text, const NodePolicy& policy) {
  NetConf conf;
  auto parsed = ParseUntrustedJson(text, "network config");
  if (!parsed || !parsed->is_object()) return conf;
  const json& obj = *parsed;
  auto str = [&](const char* key) {
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  conf.name = str("name");
  // The config's own version where this plugin speaks it (DEL prints nothing on success).
  const auto& supported = SupportedVersions();
  std::string version = str("cniVersion");
  bool known = std::find(supported.begin(), supported.end(), version) != supported.end();
  conf.cni_version = known ? version : "1.0.0";
  std::string dir = str("stateDir");
  if (!dir.empty()) {
    if (auto root = RootOf("stateDir", dir, policy.state_roots)) {
      conf.state_dir = dir;
      conf.state_root = *root;
    }
  }
  conf.raw = obj;
  return conf;
}

NodePolicy NodePolicyOf(const rails::NodeConfig& node, NodePolicy policy) {
  auto add = [](std::vector<std::string>& to, const std::vector<std::string>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  add(policy.state_roots, node.state_roots);
  add(policy.log_roots, node.log_roots);
  add(policy.device_info_dirs, node.device_info_dirs);
  return policy;
}

CniResult<NodePolicy> LoadNodePolicy(const std::string& path, NodePolicy policy) {
  auto text = ReadRegularFile(path);
  if (!text && text.error().code() == ErrorCode::kNotFound) return policy;
  if (!text) return CniFail(kInvalidConfig, "node config: " + text.error().message());
  auto roots = rails::ParseCniRoots(*text);
  if (!roots) return CniFail(kInvalidConfig, roots.error().Wrap(path).message());
  return NodePolicyOf(*roots, std::move(policy));
}

}  // namespace kuberdma::cni
