// SPDX-License-Identifier: Apache-2.0
// The `rdma` CNI binary: reads CNI_* and stdin, runs one verb, prints exactly one result or error
// document on stdout. Everything else (logs) goes to stderr and the optional log file.
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "kuberdma/base/files.h"
#include "kuberdma/cni/config.h"
#include "kuberdma/cni/plugin.h"
#include "kuberdma/cni/result.h"
#include "kuberdma/cni/timed_ops.h"
#include "kuberdma/link/netlink_addr_ops.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/rdma/netlink_rdma_ops.h"

namespace {

using namespace kuberdma::cni;  // NOLINT(google-build-using-namespace): a main() file

constexpr size_t kMaxConfigBytes = 16u << 20;

const char* GetEnv(const char* name) { return std::getenv(name); }

void Print(const nlohmann::json& j) {
  std::string out = j.dump();
  out += '\n';
  (void)kuberdma::WriteAll(1, out.data(), out.size());  // stdout gone: nobody is left to tell
}

int PrintError(const std::string& version, const CniError& err) {
  spdlog::error("{} (code {})", err.msg, err.code);
  Print(ErrorResult(version, err));
  return 1;
}

CniResult<std::string> ReadStdin() {
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n < 0) return CniFail(kIoFailure, "read network config from stdin failed");
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxConfigBytes) {
      return CniFail(kDecodeFailure, "network config on stdin exceeds 16 MiB");
    }
  }
  return text;
}

void SetUpLogging(const Request& req, const NetConf& conf) {
  std::vector<spdlog::sink_ptr> sinks{std::make_shared<spdlog::sinks::stderr_sink_st>()};
  std::string log_error;
  if (!conf.log_file.empty()) {
    try {
      sinks.push_back(std::make_shared<spdlog::sinks::basic_file_sink_st>(conf.log_file));
    } catch (const std::exception& e) {
      log_error = e.what();
    }
  }
  auto logger = std::make_shared<spdlog::logger>("rdma", sinks.begin(), sinks.end());
  std::string who = req.container_id.empty() ? "-" : req.container_id.substr(0, 12);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l rdma[" + std::to_string(::getpid()) + "] " + who +
                      (req.ifname.empty() ? "" : "/" + req.ifname) + " " + conf.name + ": %v");
  logger->set_level(spdlog::level::from_str(conf.log_level));
  spdlog::set_default_logger(logger);
  if (!log_error.empty()) spdlog::warn("cannot open log file {}: {}", conf.log_file, log_error);
}

// Until the config names a log file and level, log to stderr only: spdlog's own default logger
// writes to stdout, which belongs to the result document alone.
void SetUpEarlyLogging() {
  auto logger =
      std::make_shared<spdlog::logger>("rdma", std::make_shared<spdlog::sinks::stderr_sink_st>());
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %l rdma[" + std::to_string(::getpid()) + "]: %v");
  spdlog::set_default_logger(logger);
}

// Logs how long the verb took, and how much of it went to kernel link changes, when it ends.
class VerbTimer {
 public:
  explicit VerbTimer(const TimedLinkOps& links) : links_(links) {}
  VerbTimer(const VerbTimer&) = delete;
  VerbTimer& operator=(const VerbTimer&) = delete;
  ~VerbTimer() {
    double total =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
            .count();
    spdlog::debug("timing: {:.2f} ms in the verb, {:.2f} ms of it in kernel link changes", total,
                  links_.changing_ms());
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  const TimedLinkOps& links_;
};

// Runs one verb on the real kernel; its exit code, the result or error already printed.
int Dispatch(const Request& req, const NetConf& conf) {
  kuberdma::link::NetlinkLinkOps netlink_links;
  TimedLinkOps links(netlink_links);
  kuberdma::rdma::NetlinkRdmaOps rdma;
  kuberdma::netns::RealNamespaceOps namespaces;
  kuberdma::link::NetlinkAddrOps addrs;
  ExecIpam ipam;
  Plugin plugin({links, rdma, namespaces, kuberdma::sysfs::SysfsRoot::FromEnv(), &addrs, &ipam});
  VerbTimer timer(links);
  auto done = [&](const CniResult<void>& r) {
    return r ? 0 : PrintError(conf.cni_version, r.error());
  };
  switch (req.command) {
    case Command::kAdd: {
      auto r = plugin.Add(req, conf);
      if (!r) return PrintError(conf.cni_version, r.error());
      Print(*r);
      return 0;
    }
    case Command::kDel:
      return done(plugin.Del(req, conf));
    case Command::kCheck:
      return done(plugin.Check(req, conf));
    case Command::kStatus:
      return done(plugin.Status(conf));
    case Command::kGc:
      return done(plugin.Gc(conf, req));
    case Command::kVersion:
      break;
  }
  return 0;
}

int Run() {
  SetUpEarlyLogging();
  // An IPAM plugin that exits before reading its stdin must fail our write with EPIPE, not kill
  // us before the result (or the undo) is written.
  std::signal(SIGPIPE, SIG_IGN);
  auto req = ParseEnv(&GetEnv);
  if (!req) return PrintError("", req.error());
  if (req->command == Command::kVersion) {
    Print(VersionResult());  // no runtime to start: answer at once
    return 0;
  }
  auto text = ReadStdin();
  if (!text) return PrintError("", text.error());
  auto conf = ParseConfig(*text, req->command);
  if (!conf) return PrintError(ErrorVersion(*text), conf.error());
  SetUpLogging(*req, *conf);
  return Dispatch(*req, *conf);
}

// The last word when even building the error throws (out of memory): a fixed, valid error.
int ReportInternal(const char* what) noexcept {
  try {
    return PrintError("", CniError{kInternalError, std::string("internal error: ") + what, ""});
  } catch (...) {
    static constexpr char kLast[] = R"({"cniVersion":"1.1.0","code":199,"msg":"internal error"})"
                                    "\n";
    (void)kuberdma::WriteAll(1, kLast, sizeof kLast - 1);
    return 1;
  }
}

}  // namespace

int main() {
  // The one boundary where a stray exception becomes a well-formed CNI error.
  try {
    return Run();
  } catch (const std::exception& e) {
    return ReportInternal(e.what());
  } catch (...) {
    return ReportInternal("unknown exception");
  }
}
