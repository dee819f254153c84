// SPDX-License-Identifier: Apache-2.0
// CNI result and error documents, in the version the config asked for.
//
//   Interface iface{.name = "net1", .mac = "...", .mtu = 9000, .sandbox = ns, .pci_id =
//   "0000:1a:00.0"}; nlohmann::json out = BuildResult("0.3.1", iface, conf.prev_result);
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kuberdma/cni/ipam.h"
#include "kuberdma/cni/types.h"

namespace kuberdma::cni {

struct Interface {
  std::string name;
  std::string mac;
  uint32_t mtu = 0;
  std::string sandbox;
  std::string pci_id;
};

// The ADD result: `prev` (if any) passed through with `iface` appended unless an interface of the
// same name and sandbox is already listed, and `ipam`'s addresses (each naming `iface`'s index in
// "interfaces"), routes and DNS (unless `prev` has DNS) added. Fields a version does not define
// are left out (mtu and pciID appear from 1.1.0); results for 0.3.x/0.4.0 carry "version" on IP
// entries and always an ips list.
nlohmann::json BuildResult(const std::string& version, const Interface& iface,
                           const std::optional<nlohmann::json>& prev,
                           const IpamResult* ipam = nullptr);

// The VERSION answer.
nlohmann::json VersionResult();

// The error document: {"cniVersion", "code", "msg", "details"}.
nlohmann::json ErrorResult(const std::string& version, const CniError& err);

// True when `prev` lists an interface named `ifname` inside `sandbox` (the netdev is already in
// the pod: another plugin of the chain put it there).
bool PrevResultHasInterface(const nlohmann::json& prev, const std::string& ifname,
                            const std::string& sandbox);

}  // namespace kuberdma::cni
