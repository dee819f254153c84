// SPDX-License-Identifier: Apache-2.0
// IPAM delegation, as the CNI specification defines it: the plugin named by `ipam.type` is run from
// CNI_PATH with the same CNI_* environment and the network config on stdin, and answers on stdout.
// `rdma` applies the addresses and routes an ADD returns to the pod interface, lists them in its
// own result, and calls DEL on every undo path so that no address leaks.
//
//   ExecIpam ipam;                                   // runs host-local, static, whereabouts, ...
//   DelegateRequest req{.command = Command::kAdd, .container_id = "c1", .netns = ns, ...};
//   KUBERDMA_CNI_ASSIGN_OR_RETURN(nlohmann::json doc, ipam.Run("host-local", req, conf_json), 0);
//   KUBERDMA_CNI_ASSIGN_OR_RETURN(IpamResult r, IpamResult::Parse(doc, "host-local"), 0);
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kuberdma/cni/types.h"
#include "kuberdma/link/addr_ops.h"

namespace kuberdma::cni {

// An IP the IPAM plugin handed out, with the gateway for its subnet (may be empty).
struct IpamIp {
  link::IpPrefix address;
  std::string gateway;
  bool operator==(const IpamIp&) const = default;
};

struct IpamRoute {
  link::IpPrefix dst;
  std::string gateway;  // empty: the gateway of the IP of the same family, if any
  bool operator==(const IpamRoute&) const = default;
};

// What an IPAM ADD returned, independent of the cniVersion it was written in.
struct IpamResult {
  std::vector<IpamIp> ips;
  std::vector<IpamRoute> routes;
  nlohmann::json dns = nlohmann::json::object();

  // Reads a result document of any supported version (0.3.0 .. 1.1.0). `type` names the plugin
  // in errors (code 106: the plugin's answer is not a usable result).
  static CniResult<IpamResult> Parse(const nlohmann::json& doc, const std::string& type);
  // The form kept in state records (1.0.0 terms: ips, routes, dns).
  nlohmann::json ToJson() const;
  bool operator==(const IpamResult&) const = default;
};

// The details of a failure where the IPAM plugin never ran (not in CNI_PATH, not executable):
// nothing can have been allocated by that call.
inline constexpr const char* kIpamNotRun = "the IPAM plugin was not run";

// The CNI_* environment a delegated call runs with.
struct DelegateRequest {
  Command command = Command::kAdd;
  std::string container_id;
  std::string netns;
  std::string ifname;
  std::string args;
  std::string path;  // CNI_PATH: where `type` is looked for
};

// The seam to the IPAM plugin (ExecIpam in production; fakes in unit tests).
class IpamPlugin {
 public:
  virtual ~IpamPlugin() = default;
  // Runs `type` for `req` with `config` on stdin. ADD answers the result document, the other
  // verbs null. A failure reported by the plugin keeps its code and message, the message
  // prefixed "IPAM <type>: "; a plugin that cannot be run or answers nonsense is error 106.
  virtual CniResult<nlohmann::json> Run(const std::string& type, const DelegateRequest& req,
                                        const nlohmann::json& config) = 0;
  // The cniVersions `type` supports (its VERSION answer).
  virtual CniResult<std::vector<std::string>> Versions(const std::string& type,
                                                       const DelegateRequest& req) = 0;
};

// Runs IPAM plugins as child processes, bounded by `timeout_ms` (then killed: error 106).
class ExecIpam final : public IpamPlugin {
 public:
  explicit ExecIpam(uint32_t timeout_ms = 60000) : timeout_ms_(timeout_ms) {}
  CniResult<nlohmann::json> Run(const std::string& type, const DelegateRequest& req,
                                const nlohmann::json& config) override;
  CniResult<std::vector<std::string>> Versions(const std::string& type,
                                               const DelegateRequest& req) override;

 private:
  uint32_t timeout_ms_;
};

// What a plugin process did: its exit status and what it wrote.
struct PluginRun {
  int exit_code = -1;  // 128+signal when killed; -1 when it could not be started
  bool timed_out = false;
  std::string out;
  std::string err;
  std::string start_error;  // why it could not be started
};

// Finds `type` in the colon-separated `cni_path`; kNotFound naming the directories tried.
Result<std::string> FindPlugin(const std::string& type, const std::string& cni_path);

// Runs `binary` as a CNI runtime would: this process's environment with `env` overriding it,
// `stdin_text` on stdin, stdout and stderr collected, killed after `timeout_ms`. The one exec
// helper of the plugin; tests run plugins with it too.
PluginRun RunPlugin(const std::string& binary, const std::vector<std::string>& env,
                    const std::string& stdin_text, uint32_t timeout_ms);

// The CNI_* assignments for `req` ("CNI_COMMAND=ADD", ...).
std::vector<std::string> CniEnvironment(const DelegateRequest& req);

}  // namespace kuberdma::cni
