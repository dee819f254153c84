// SPDX-License-Identifier: Apache-2.0
// The `rdma` network configuration: parsing and validation of what Multus (or a runtime) sends on
// stdin. Accepts the seed article's NAD as written:
//
//   {"cniVersion":"0.3.1","name":"rdma-net","type":"rdma","pkey":"0xffff","linkState":"up","mtu":9000}
//
// plus device selection, the shared-mode policy and logging options (docs/cni.md). Unknown fields
// are ignored; known fields of the wrong type are error 7; malformed JSON is error 6.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/cni/types.h"

namespace kuberdma::cni {

enum class LinkState { kLeave, kUp, kDown };
enum class SharedPolicy { kContinue, kError };

// How the device to attach was named, in precedence order (the first one present wins).
enum class SelectorKind { kAuto, kRuntimeDeviceId, kDeviceId, kPciBusId, kHca, kNetdev, kMac };
std::string_view SelectorName(SelectorKind kind);

struct Selector {
  SelectorKind kind = SelectorKind::kAuto;
  std::string value;
};

struct Attachment {
  std::string container_id;
  std::string ifname;
};

// The `ipam` section: the IPAM plugin to delegate to and its own configuration.
struct IpamConf {
  std::string type;
  nlohmann::json section;  // the whole `ipam` object, as given
};

struct NetConf {
  std::string cni_version;
  std::string name;
  std::string type;
  std::optional<uint16_t> pkey;  // unset: the full-membership default
  LinkState link_state = LinkState::kLeave;
  std::optional<uint32_t> mtu;
  Selector selector;
  std::vector<Selector> other_selectors;  // also given, lower precedence (logged)
  std::string device_info_file;           // runtimeConfig.CNIDeviceInfoFile
  SharedPolicy shared_policy = SharedPolicy::kContinue;
  // Attachments do not survive a reboot (every device is back on the host then), so neither does
  // their state: /run is a tmpfs, cleared at boot, and fast.
  std::string state_dir = "/run/kube-rdma/cni";
  std::string log_file;
  std::string log_level = "info";
  uint32_t lock_timeout_ms = 10000;
  std::optional<nlohmann::json> prev_result;
  std::optional<std::vector<Attachment>> valid_attachments;  // GC: cni.dev/valid-attachments
  std::optional<IpamConf> ipam;                              // absent: no addresses (IB, RoCE v1)
  // The config as received: what a delegated IPAM plugin gets on stdin.
  nlohmann::json raw = nlohmann::json::object();
};

// Parses `text` as the configuration for `command`. Errors: 6 for bad JSON, 7 for a bad field,
// 1 for an unsupported cniVersion or a verb the version does not have (CHECK < 0.4.0,
// STATUS/GC < 1.1.0).
CniResult<NetConf> ParseConfig(std::string_view text, Command command);

// The cniVersion an error about `text` is written in: the config's own when it is JSON naming a
// version this plugin supports, else "" (the newest). A config that parses but has a bad field
// is answered in its own version.
std::string ErrorVersion(std::string_view text);

// The cniVersion values this plugin reads and answers in.
const std::vector<std::string>& SupportedVersions();

// Compares dotted versions ("0.4.0" < "1.0.0").
int CompareVersions(std::string_view a, std::string_view b);

}  // namespace kuberdma::cni
