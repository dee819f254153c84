// SPDX-License-Identifier: Apache-2.0
// The `kube-rdma` CNI binary: reads CNI_* and stdin, runs one verb, prints exactly one result or
// error document on stdout. Everything else (logs) goes to stderr and the optional log file.
#include <fcntl.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "kuberdma/base/files.h"
#include "kuberdma/base/host.h"
#include "kuberdma/base/json.h"
#include "kuberdma/base/version.h"
#include "kuberdma/cni/config.h"
#include "kuberdma/cni/install.h"
#include "kuberdma/cni/plugin.h"
#include "kuberdma/cni/result.h"
#include "kuberdma/cni/timed_ops.h"
#include "kuberdma/contract/allocation.h"
#include "kuberdma/link/netlink_addr_ops.h"
#include "kuberdma/link/netlink_link_ops.h"
#include "kuberdma/link/netlink_vf_ops.h"
#include "kuberdma/rdma/netlink_rdma_ops.h"

namespace {

using namespace kuberdma::cni;  // NOLINT(google-build-using-namespace): a main() file

constexpr size_t kMaxConfigBytes = 16u << 20;

const char* GetEnv(const char* name) { return std::getenv(name); }

// Everything on stdout goes through here: a runtime reads one document from it.
void PrintText(const std::string& out) {
  (void)kuberdma::WriteAll(1, out.data(), out.size());  // stdout gone: nobody is left to tell
}

void Print(const nlohmann::json& j) {
  PrintText(kuberdma::DumpJson(j) + "\n");  // a message may quote a name an outsider chose
}

constexpr char kUsage[] =
    "kube-rdma: the kube-rdma CNI plugin. A container runtime (through Multus) runs it, with the\n"
    "verb in CNI_COMMAND (ADD, DEL, CHECK, STATUS, GC, VERSION), the attachment in\n"
    "CNI_CONTAINERID, CNI_NETNS and CNI_IFNAME, and the network config on stdin.\n"
    "By hand, for example:\n"
    "  CNI_COMMAND=VERSION kube-rdma </dev/null\n"
    "  CNI_COMMAND=ADD CNI_CONTAINERID=c1 CNI_NETNS=/var/run/netns/p CNI_IFNAME=net1 \\\n"
    "    kube-rdma <<<'{\"cniVersion\":\"1.0.0\",\"name\":\"ib\",\"type\":\"kube-rdma\"}'\n"
    "Config reference, error codes and state: docs/cni.md; rdma-doctor node shows what it did.\n"
    "  kube-rdma --help | --version\n"
    "  kube-rdma --check-config < config.json   a NAD's config through ADD's parser: 0, or 2\n"
    "                             and the error ADD would give\n"
    "  kube-rdma --install DEST   copy this binary to DEST (e.g. /opt/cni/bin/kube-rdma), never "
    "over\n"
    "                             another plugin's file (exit 1 naming it)\n";

int CheckConfig();

// `kube-rdma --help`, `kube-rdma --version`, or a person at a terminal without CNI_COMMAND: text,
// not an error document. Returns the exit code, or -1 when this is a runtime's call.
int ByHand(int argc, char** argv) {
  std::string arg = argc > 1 ? argv[1] : "";
  if (arg == "--version" || arg == "-v") {
    PrintText(std::string(kuberdma::kVersionLine) + "\n" + std::string(kCniBinaryMarker) + "\n");
    return 0;
  }
  if (arg == "--install" || arg.rfind("--install=", 0) == 0) {
    std::string dest = arg == "--install" ? (argc > 2 ? argv[2] : "") : arg.substr(10);
    if (dest.empty() || dest[0] != '/') {
      constexpr std::string_view kNeedsPath =
          "kube-rdma --install: give the absolute destination path\n";
      (void)kuberdma::WriteAll(2, kNeedsPath.data(), kNeedsPath.size());
      return 2;
    }
    auto r = InstallCniBinary("/proc/self/exe", dest);
    std::string line = (r ? *r : "kube-rdma --install: " + r.error().message()) + "\n";
    (void)kuberdma::WriteAll(r ? 1 : 2, line.data(), line.size());
    return r ? 0 : 1;
  }
  if (arg == "--help" || arg == "-h") {
    PrintText(kUsage);
    return 0;
  }
  if (arg == "--check-config") return CheckConfig();
  if (GetEnv("CNI_COMMAND") == nullptr && ::isatty(0) == 1) {
    (void)kuberdma::WriteAll(2, kUsage, sizeof kUsage - 1);
    return 2;
  }
  return -1;
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

// `kube-rdma --check-config < config.json`: a NAD's config (its spec.config) through the parser ADD
// uses, without touching the node: 0 and what it would do, or 2 and the error ADD would return.
int CheckConfig() {
  auto refused = [](const CniError& e) {
    PrintText("kube-rdma --check-config: error " + std::to_string(e.code) + ": " + e.msg + "\n");
    return 2;
  };
  auto text = ReadStdin();
  if (!text) return refused(text.error());
  auto conf = ParseConfig(*text, Command::kAdd);
  if (!conf) return refused(conf.error());
  PrintText("kube-rdma --check-config: " + conf->name + ": a valid " + conf->cni_version +
            " config\n");
  return 0;
}

// The attachment a log line is about ("rdma[pid] <container>/<ifname> <network>"), appended by
// the `%*` flag: names from the runtime and the NAD never become part of the pattern itself,
// where a '%' in them would be read as a flag. Control characters are escaped (no forged lines).
class ContextFlag final : public spdlog::custom_flag_formatter {
 public:
  explicit ContextFlag(std::string text) : text_(std::move(text)) {}
  void format(const spdlog::details::log_msg& /*msg*/, const std::tm& /*tm*/,
              spdlog::memory_buf_t& dest) override {
    dest.append(text_.data(), text_.data() + text_.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<ContextFlag>(text_);
  }

 private:
  std::string text_;
};

std::string Escaped(std::string_view v) {
  std::string out;
  for (char c : v) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x" + std::string(1, "0123456789abcdef"[u >> 4]) + "0123456789abcdef"[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

// Appends formatted lines to a descriptor we opened ourselves (O_NOFOLLOW, O_APPEND).
class FdSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  explicit FdSink(kuberdma::UniqueFd fd) : fd_(std::move(fd)) {}

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t buf;
    formatter_->format(msg, buf);
    (void)kuberdma::WriteAll(fd_.get(), buf.data(), buf.size());  // a log line is best effort
  }
  void flush_() override {}

 private:
  kuberdma::UniqueFd fd_;
};

// The NAD's logFile, under a log root (ParseConfig checked it): directories 0700 without links
// below the root, the file opened without following a link and only appended to.
kuberdma::Result<kuberdma::UniqueFd> OpenLogFile(const NetConf& conf) {
  auto slash = conf.log_file.find_last_of('/');
  std::string dir = conf.log_file.substr(0, slash);
  if (dir.size() >= conf.log_root.size()) {
    KUBERDMA_TRY(kuberdma::MakePrivateDirs(conf.log_root, dir));
  }
  kuberdma::UniqueFd fd(
      ::open(conf.log_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return kuberdma::FailErrno(errno, "open " + conf.log_file);
  return fd;
}

void SetUpLogging(const Request& req, const NetConf& conf) {
  std::vector<spdlog::sink_ptr> sinks{std::make_shared<spdlog::sinks::stderr_sink_st>()};
  std::string log_error;
  if (!conf.log_file.empty()) {
    if (auto fd = OpenLogFile(conf)) {
      sinks.push_back(std::make_shared<FdSink>(std::move(*fd)));
    } else {
      log_error = fd.error().message();
    }
  }
  auto logger = std::make_shared<spdlog::logger>("rdma", sinks.begin(), sinks.end());
  std::string who = req.container_id.empty() ? "-" : req.container_id.substr(0, 12);
  std::string context = "rdma[" + std::to_string(::getpid()) + "] " + Escaped(who) +
                        (req.ifname.empty() ? "" : "/" + Escaped(req.ifname)) + " " +
                        Escaped(conf.name);
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<ContextFlag>('*', context).set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %*: %v");
  logger->set_formatter(std::move(formatter));
  logger->set_level(spdlog::level::from_str(conf.log_level));
  spdlog::set_default_logger(logger);
  if (!log_error.empty()) spdlog::warn("cannot open log file: {}", log_error);
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

// The node config as the DaemonSet resolved it for this node. Error 7 when it does not parse on
// ADD; the other verbs must work whatever the file holds, and use what parses (DEL tells the
// partition hook).
CniResult<kuberdma::rails::NodeConfig> NodeConfigFor(Command command) {
  auto loaded = kuberdma::rails::LoadNodeConfig(kuberdma::rails::NodeConfigPath(), "");
  if (!loaded && command != Command::kAdd) {
    spdlog::warn("node config: {}; going on without it", loaded.error().message());
    return kuberdma::rails::NodeConfig{};
  }
  if (!loaded) {
    return CniFail(kInvalidConfig, loaded.error().message() +
                                       ": fix the node config (docs/install.md); nothing was "
                                       "changed");
  }
  return std::move(*loaded);
}

int RunVerb(Plugin& plugin, const Request& req, const NetConf& conf);

// Runs one verb on the real kernel; its exit code, the result or error already printed.
int Dispatch(const Request& req, const NetConf& conf,
             const CniResult<kuberdma::rails::NodeConfig>& node) {
  kuberdma::link::NetlinkLinkOps netlink_links;
  TimedLinkOps links(netlink_links);
  kuberdma::rdma::NetlinkRdmaOps rdma;
  kuberdma::netns::RealNamespaceOps namespaces;
  kuberdma::link::NetlinkAddrOps addrs;
  kuberdma::link::NetlinkVfOps vfs;
  ExecIpam ipam;
  if (!node) return PrintError(conf.cni_version, node.error());
  // A slow device plugin or kubelet is an error in bounded time, never a hang.
  DevicePluginAllocations allocations(
      kuberdma::contract::AllocationsDir() + "/" + kuberdma::contract::kPodsSocket,
      std::chrono::milliseconds(3000));
  std::optional<kuberdma::cni::ExecPartitionHook> hook;
  if (!node->partition_hook.empty())
    hook.emplace(node->partition_hook, kuberdma::HostName());  // the node's UTS namespace
  Plugin plugin({links, rdma, namespaces, kuberdma::sysfs::SysfsRoot::FromEnv(), &addrs, &ipam,
                 *node, kuberdma::contract::AllocationsDir(), &allocations, &vfs,
                 std::chrono::milliseconds(15000), hook ? &*hook : nullptr});
  VerbTimer timer(links);
  return RunVerb(plugin, req, conf);
}

// The verb itself; its exit code, the result or error printed.
int RunVerb(Plugin& plugin, const Request& req, const NetConf& conf) {
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
  if (!req->unrecordable.empty()) {
    spdlog::info("DEL: nothing to undo: {} (ADD refuses it, so nothing was attached)",
                 req->unrecordable);
    return 0;
  }
  // The node config first: its roots confine what the NAD may name. Its error on ADD is told
  // after the NAD's own (Dispatch), with the NAD's CNI version.
  auto node = NodeConfigFor(req->command);
  const char* policy_path = GetEnv(kNodePolicyEnv);
  auto policy = LoadNodePolicy(policy_path != nullptr ? policy_path : kNodePolicyPath,
                               node ? NodePolicyOf(*node) : NodePolicy{});
  if (!policy) return PrintError("", policy.error());
  auto text = ReadStdin();
  if (!text) return PrintError("", text.error());
  auto conf = ParseConfig(*text, req->command, *policy);
  if (!conf && req->command == Command::kDel) {
    // The runtime's DEL after a failed ADD re-sends the config that failed: find the record by
    // what can still be read, and succeed when there is none.
    spdlog::warn("DEL with a config that does not parse ({}): looking for its record anyway",
                 conf.error().msg);
    conf = SalvageForDel(*text, *policy);
  }
  if (!conf) return PrintError(ErrorVersion(*text), conf.error());
  SetUpLogging(*req, *conf);
  return Dispatch(*req, *conf, node);
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

int main(int argc, char** argv) {
  // The one boundary where a stray exception becomes a well-formed CNI error.
  try {
    if (int code = ByHand(argc, argv); code >= 0) return code;
    return Run();
  } catch (const std::exception& e) {
    return ReportInternal(e.what());
  } catch (...) {
    return ReportInternal("unknown exception");
  }
}
