// SPDX-License-Identifier: Apache-2.0
// SimNode: namespaces, veths and CNI invocations on a simulated node.
#include "kuberdma/sim/sim_node.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "kuberdma/base/files.h"
#include "kuberdma/sysfs/hca.h"

namespace kuberdma::sim {

namespace {

netns::NetNs MustCreate(const std::string& name) {
  auto ns = testing::CreateNamed(name);
  if (!ns) throw std::runtime_error("create netns " + name + ": " + ns.error().message());
  return std::move(*ns);
}

std::string MustTempDir() {
  char tmpl[] = "/tmp/krt-state-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

void Drain(int fd, std::string* out) {
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out->append(buf, static_cast<size_t>(n));
}

}  // namespace

SimNode::SimNode(std::string sysfs_root, const std::vector<std::string>& netdevs)
    : prefix_("krt-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand() % 100000)),
      sysfs_root_(std::move(sysfs_root)),
      state_dir_(MustTempDir()),
      node_(MustCreate(prefix_ + "-node")),
      fabric_(MustCreate(prefix_ + "-fab")) {
  names_ = {prefix_ + "-node", prefix_ + "-fab"};
  // A plugin may exit before reading its config (VERSION does): writing to its stdin must then fail
  // with EPIPE, not kill the test, benchmark or demo with SIGPIPE before it cleans up.
  std::signal(SIGPIPE, SIG_IGN);
  // The plugin confines stateDir and logFile to the node's roots; this node's are its own
  // temporary directory, named in a node policy file as a DaemonSet would install one.
  std::string policy = R"({"stateRoots":[")" + state_dir_ + R"("],"logRoots":[")" + state_dir_ +
                       R"("],"deviceInfoDirs":[")" + state_dir_ + R"(/devinfo"]})";
  if (!WriteFileAtomic(policy_path(), policy + "\n")) {
    throw std::runtime_error("write " + policy_path());
  }
  // No kubelet runs here unless a test or the demo starts one: attaching HCAs outside any
  // allocation is allowed until they write a node config of their own.
  if (!WriteFileAtomic(node_config_path(), R"({"allowUnallocated": true})"
                                           "\n")) {
    throw std::runtime_error("write " + node_config_path());
  }
  netdevs_ = netdevs;
  int i = 0;
  for (const auto& n : netdevs) {
    std::string port = "sw" + std::to_string(i++);
    auto r = net_.CreateVeth(node_, n, fabric_, port);
    // Both ends up, as a cabled NIC and its switch port are: the netdev has carrier.
    if (r) r = Up(fabric_, port);
    if (r) r = Up(node_, n);
    if (!r) throw std::runtime_error(r.error().message());
  }
}

Result<void> SimNode::Up(const netns::NetNs& ns, const std::string& name) {
  KUBERDMA_ASSIGN_OR_RETURN(link::LinkInfo l, links_.GetByName(ns, name));
  return links_.Change(ns, l.ifindex, {.up = true});
}

constexpr uint32_t kSwitchMtu = 9216;

Result<void> SimNode::Connect(const std::string& rail, const std::vector<std::string>& netdevs) {
  KUBERDMA_TRY(net_.CreateLink(fabric_, rail, "bridge"));
  std::vector<std::string> ports;
  for (const auto& n : netdevs) {
    auto it = std::find(netdevs_.begin(), netdevs_.end(), n);
    if (it == netdevs_.end())
      return Fail(ErrorCode::kNotFound, n + " is not a netdev of this node");
    ports.push_back("sw" + std::to_string(it - netdevs_.begin()));
  }
  for (const auto& p : ports) KUBERDMA_TRY(net_.SetMaster(fabric_, p, rail));
  ports.push_back(rail);
  for (const auto& p : ports) {
    KUBERDMA_ASSIGN_OR_RETURN(link::LinkInfo l, links_.GetByName(fabric_, p));
    // A switch takes jumbo frames: a veth drops what exceeds its peer's MTU, and pods run 9000.
    KUBERDMA_TRY(links_.Change(fabric_, l.ifindex, {.mtu = kSwitchMtu, .up = true}));
  }
  return {};
}

SimNode::~SimNode() {
  // Pods first, so the veths inside them die with them rather than bounce to the node.
  for (auto it = names_.rbegin(); it != names_.rend(); ++it) (void)testing::DeleteNamed(*it);
  std::filesystem::remove_all(state_dir_);
}

std::string SimNode::AddPod(const std::string& name) {
  std::string n = prefix_ + "-" + name;
  MustCreate(n);
  names_.push_back(n);
  return std::string(testing::kNamedNetnsDir) + "/" + n;
}

void SimNode::DeletePod(const std::string& path) {
  std::string n = path.substr(path.find_last_of('/') + 1);
  (void)testing::DeleteNamed(n);
}

netns::NetNs SimNode::Pod(const std::string& path) const {
  auto ns = netns::NetNs::Open(path);
  if (!ns) throw std::runtime_error(ns.error().message());
  return std::move(*ns);
}

pid_t SimNode::Start(const std::string& binary, const CniCall& call, int out[2], int err[2]) const {
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  std::vector<std::string> env = {"CNI_COMMAND=" + call.command,
                                  "CNI_CONTAINERID=" + call.container_id,
                                  "CNI_NETNS=" + call.netns,
                                  "CNI_IFNAME=" + call.ifname,
                                  "CNI_PATH=" + call.cni_path,
                                  "KUBERDMA_SYSFS_ROOT=" + sysfs_root_,
                                  "KUBERDMA_CNI_NODE_CONFIG=" + policy_path(),
                                  "KUBERDMA_NODE_CONFIG=" + node_config_path(),
                                  "KUBERDMA_ALLOCATIONS_DIR=" + allocations_dir(),
                                  "PATH=/usr/sbin:/usr/bin:/sbin:/bin"};
  if (!call.args.empty()) env.push_back("CNI_ARGS=" + call.args);
  auto pid = testing::SpawnIn(node_, {binary}, env, in[0], out[1], err[1]);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  if (!pid) throw std::runtime_error(pid.error().message());
  (void)WriteAll(in[1], call.config.data(),
                 call.config.size());  // EPIPE: the plugin did not read it
  ::close(in[1]);
  return *pid;
}

CniRun SimNode::Run(const std::string& binary, const CniCall& call) const {
  return RunAll(binary, {call}).front();
}

std::vector<CniRun> SimNode::RunAll(const std::string& binary,
                                    const std::vector<CniCall>& calls) const {
  std::vector<pid_t> pids;
  std::vector<std::pair<int, int>> fds;
  for (const auto& c : calls) {
    int out[2];
    int err[2];
    pids.push_back(Start(binary, c, out, err));
    fds.emplace_back(out[0], err[0]);
  }
  std::vector<CniRun> runs(calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    Drain(fds[i].first, &runs[i].out);
    Drain(fds[i].second, &runs[i].err);
    ::close(fds[i].first);
    ::close(fds[i].second);
    int status = 0;
    ::waitpid(pids[i], &status, 0);
    runs[i].exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return runs;
}

std::string WriteMiniNode(const std::string& dir, int n, const std::string& netdev_prefix) {
  namespace fs = std::filesystem;
  auto write = [&](const std::string& rel, const std::string& text) {
    if (!WriteFileAtomic(dir + "/" + rel, text + "\n")) throw std::runtime_error("write " + rel);
  };
  auto link = [&](const std::string& rel, const std::string& target) {
    fs::path at = fs::path(dir) / rel;
    fs::create_directories(at.parent_path());
    fs::create_symlink(fs::path(dir).append(target).lexically_relative(at.parent_path()), at);
  };
  for (int i = 0; i < n; ++i) {
    char bdf[32];
    std::snprintf(bdf, sizeof bdf, "0000:%02x:00.0", 0x20 + i);
    std::string dev = "sys/devices/pci0000:00/" + std::string(bdf);
    std::string name = "mlx5_" + std::to_string(i);
    std::string nd = netdev_prefix + std::to_string(i);
    write(dev + "/vendor", "0x15b3");
    write(dev + "/device", "0x1021");
    write(dev + "/numa_node", std::to_string(i % 2));
    write(dev + "/net/" + nd + "/ifindex", std::to_string(i + 10));
    write(dev + "/infiniband/" + name + "/node_guid",
          "b83f:d203:0000:000" + std::to_string(i % 10));
    std::string port = dev + "/infiniband/" + name + "/ports/1";
    write(port + "/state", "4: ACTIVE");
    write(port + "/phys_state", "5: LinkUp");
    write(port + "/rate", "400 Gb/sec (4X NDR)");
    write(port + "/link_layer", "Ethernet");
    write(dev + "/infiniband_verbs/uverbs" + std::to_string(i) + "/ibdev", name);
    link(dev + "/infiniband/" + name + "/device", dev);
    link("sys/class/infiniband/" + name, dev + "/infiniband/" + name);
    link("sys/class/net/" + nd, dev + "/net/" + nd);
    link(dev + "/net/" + nd + "/device", dev);
  }
  return dir;
}

Result<link::LinkInfo> FindByBusAddress(link::LinkOps& ops, const netns::NetNs& ns,
                                        const sysfs::SysfsRoot& root, const std::string& address) {
  KUBERDMA_ASSIGN_OR_RETURN(auto names, sysfs::NetdevsAtAddress(root, address));
  for (const auto& n : names) {
    if (auto l = ops.GetByName(ns, n)) return l;
  }
  return Fail(ErrorCode::kNotFound, "no netdev of " + address + " in netns " + ns.path());
}

void RemoveStaleNamespaces() {
  DIR* d = ::opendir(testing::kNamedNetnsDir);
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (const dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n.rfind("krt-", 0) != 0) continue;
    auto owner = static_cast<pid_t>(std::atoi(n.c_str() + 4));
    if (owner > 0 && ::kill(owner, 0) != 0) stale.push_back(n);
  }
  ::closedir(d);
  for (const auto& n : stale) (void)testing::DeleteNamed(n);
}

}  // namespace kuberdma::sim
