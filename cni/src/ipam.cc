// SPDX-License-Identifier: Apache-2.0
// IPAM results in every supported version, and running a delegated plugin.
#include "kuberdma/cni/ipam.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <map>

#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
#include "kuberdma/base/unique_fd.h"
#include "kuberdma/cni/config.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): POSIX declares it nowhere

namespace kuberdma::cni {

using nlohmann::json;

namespace {

CniError Bad(const std::string& type, const std::string& what) {
  return {kIpamFailed, "IPAM " + type + ": " + what, ""};
}

CniResult<IpamIp> IpFrom(const json& j, const std::string& type) {
  if (!j.is_object() || !j.contains("address") || !j["address"].is_string()) {
    return tl::unexpected(Bad(type, "result has an ips entry without an address"));
  }
  auto addr = link::ParsePrefix(j["address"].get<std::string>());
  if (!addr) return tl::unexpected(Bad(type, "result address: " + addr.error().message()));
  IpamIp ip{.address = *addr};
  if (j.contains("gateway") && j["gateway"].is_string()) ip.gateway = j["gateway"];
  return ip;
}

CniResult<IpamRoute> RouteFrom(const json& j, const std::string& type) {
  if (!j.is_object() || !j.contains("dst") || !j["dst"].is_string()) {
    return tl::unexpected(Bad(type, "result has a route without dst"));
  }
  auto dst = link::ParsePrefix(j["dst"].get<std::string>());
  if (!dst) return tl::unexpected(Bad(type, "result route: " + dst.error().message()));
  IpamRoute r{.dst = *dst};
  if (j.contains("gw") && j["gw"].is_string()) r.gateway = j["gw"];
  return r;
}

// Reads whatever the child writes to `out` and `err` until both close or `deadline` passes.
bool Collect(int out_fd, int err_fd, std::chrono::steady_clock::time_point deadline,
             PluginRun* run) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&run->out, &run->err};
  int open = 2;
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buf[8192];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open;
      }
    }
  }
  return true;
}

std::vector<std::string> MergedEnvironment(const std::vector<std::string>& env) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    merged[kv.substr(0, kv.find('='))] = kv;
  }
  for (const auto& kv : env) merged[kv.substr(0, kv.find('='))] = kv;
  std::vector<std::string> out;
  for (auto& [k, kv] : merged) out.push_back(std::move(kv));
  return out;
}

// Starts `binary` with pipes on all three descriptors; the child's pid, or an error saying why
// it could not run.
Result<pid_t> Start(const std::string& binary, const std::vector<std::string>& env, int in[2],
                    int out[2], int err[2]) {
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  char* argv[] = {const_cast<char*>(binary.c_str()), nullptr};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return Fail(ErrorCode::kIo, "cannot run " + binary + ": " + std::strerror(rc), rc);
  return pid;
}

}  // namespace

CniResult<IpamResult> IpamResult::Parse(const json& doc, const std::string& type) {
  if (!doc.is_object()) return tl::unexpected(Bad(type, "ADD answered no result object"));
  IpamResult r;
  if (auto it = doc.find("ips"); it != doc.end() && it->is_array()) {
    for (const auto& j : *it) {
      KUBERDMA_CNI_ASSIGN_OR_RETURN(IpamIp ip, IpFrom(j, type), kIpamFailed);
      r.ips.push_back(std::move(ip));
    }
  }
  if (auto it = doc.find("routes"); it != doc.end() && it->is_array()) {
    for (const auto& j : *it) {
      KUBERDMA_CNI_ASSIGN_OR_RETURN(IpamRoute route, RouteFrom(j, type), kIpamFailed);
      r.routes.push_back(std::move(route));
    }
  }
  if (auto it = doc.find("dns"); it != doc.end() && it->is_object()) r.dns = *it;
  if (r.ips.empty()) return tl::unexpected(Bad(type, "ADD returned no IP address"));
  return r;
}

json IpamResult::ToJson() const {
  json ip_list = json::array();
  for (const auto& ip : ips) {
    json j = {{"address", ip.address.Cidr()}};
    if (!ip.gateway.empty()) j["gateway"] = ip.gateway;
    ip_list.push_back(j);
  }
  json route_list = json::array();
  for (const auto& r : routes) {
    json j = {{"dst", r.dst.Cidr()}};
    if (!r.gateway.empty()) j["gw"] = r.gateway;
    route_list.push_back(j);
  }
  return {{"ips", ip_list}, {"routes", route_list}, {"dns", dns}};
}

std::vector<std::string> CniEnvironment(const DelegateRequest& req) {
  return {"CNI_COMMAND=" + CommandName(req.command),
          "CNI_CONTAINERID=" + req.container_id,
          "CNI_NETNS=" + req.netns,
          "CNI_IFNAME=" + req.ifname,
          "CNI_ARGS=" + req.args,
          "CNI_PATH=" + req.path};
}

Result<std::string> FindPlugin(const std::string& type, const std::string& cni_path) {
  if (type.empty() || type.find('/') != std::string::npos) {
    return Fail(ErrorCode::kInvalidArgument, "plugin type '" + type + "' is not a plugin name");
  }
  size_t pos = 0;
  while (pos <= cni_path.size()) {
    size_t end = cni_path.find(':', pos);
    std::string dir =
        cni_path.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + type;
    if (!dir.empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    if (end == std::string::npos) break;
    pos = end + 1;
  }
  return Fail(ErrorCode::kNotFound,
              "failed to find plugin \"" + type + "\" in CNI_PATH [" + cni_path + "]");
}

namespace {

void WriteIgnoringPipe(int fd, const std::string& text) {
  sigset_t pipe_only;
  sigset_t old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  auto written = WriteAll(fd, text.data(), text.size());
  if (!written && written.error().sys_errno() == EPIPE) {
    const timespec now{};
    while (sigtimedwait(&pipe_only, nullptr, &now) == SIGPIPE) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace

PluginRun RunPlugin(const std::string& binary, const std::vector<std::string>& env,
                    const std::string& stdin_text, uint32_t timeout_ms) {
  PluginRun run;
  int in[2];
  int out[2];
  int err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    run.start_error = std::string("pipe: ") + std::strerror(errno);
    return run;
  }
  auto started = Start(binary, MergedEnvironment(env), in, out, err);
  if (!started) run.start_error = started.error().message();
  pid_t pid = started ? *started : -1;
  for (int fd : {in[0], out[1], err[1]}) ::close(fd);
  UniqueFd to_child(in[1]);
  UniqueFd from_out(out[0]);
  UniqueFd from_err(err[0]);
  if (pid < 0) return run;
  // A plugin (or partition hook) that exits before reading stdin makes this write fail with
  // EPIPE, which is its business, not ours: SIGPIPE is held back for this thread during the write
  // and a pending one taken, so no caller's process dies of it, whatever its disposition.
  WriteIgnoringPipe(to_child.get(), stdin_text);
  to_child.Reset();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  run.timed_out = !Collect(from_out.get(), from_err.get(), deadline, &run);
  if (run.timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

CniResult<json> ExecIpam::Run(const std::string& type, const DelegateRequest& req,
                              const json& config) {
  auto binary = FindPlugin(type, req.path);
  if (!binary)
    return CniFail(kIpamFailed, "IPAM " + type + ": " + binary.error().message(), kIpamNotRun);
  PluginRun run = RunPlugin(*binary, CniEnvironment(req), config.dump(), timeout_ms_);
  if (!run.start_error.empty()) {
    return CniFail(kIpamFailed, "IPAM " + type + ": " + run.start_error, kIpamNotRun);
  }
  if (run.timed_out) {
    return tl::unexpected(Bad(type, CommandName(req.command) + " did not answer within " +
                                        std::to_string(timeout_ms_) + " ms (killed)"));
  }
  // An IPAM plugin's stdout is outside input too: bounded, and a deep document is no answer.
  json doc = ParseUntrustedJson(run.out, "IPAM answer").value_or(json());
  std::string err_tail = run.err.substr(run.err.size() > 300 ? run.err.size() - 300 : 0);
  if (run.exit_code != 0) {
    if (doc.is_object() && doc.contains("code") && doc["code"].is_number_integer()) {
      return CniFail(doc["code"].get<int>(), "IPAM " + type + ": " + doc.value("msg", ""),
                     doc.value("details", ""));
    }
    return tl::unexpected(Bad(type, CommandName(req.command) + " exited " +
                                        std::to_string(run.exit_code) + " without a CNI error" +
                                        (err_tail.empty() ? "" : ": " + err_tail)));
  }
  if (req.command != Command::kAdd && req.command != Command::kVersion) return json(nullptr);
  if (doc.is_null()) return tl::unexpected(Bad(type, "answered no usable JSON on stdout"));
  return doc;
}

CniResult<std::vector<std::string>> ExecIpam::Versions(const std::string& type,
                                                       const DelegateRequest& req) {
  DelegateRequest v = req;
  v.command = Command::kVersion;
  KUBERDMA_CNI_ASSIGN_OR_RETURN(json doc, Run(type, v, json{{"cniVersion", "1.1.0"}}), 0);
  std::vector<std::string> out;
  if (doc.is_object() && doc.contains("supportedVersions") && doc["supportedVersions"].is_array()) {
    for (const auto& s : doc["supportedVersions"]) {
      if (s.is_string()) out.push_back(s.get<std::string>());
    }
  }
  return out;
}

}  // namespace kuberdma::cni
