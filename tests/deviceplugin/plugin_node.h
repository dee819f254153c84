// SPDX-License-Identifier: Apache-2.0
// What the device plugin's tests share: a node (a copy of the roce8 fixture, a device-plugin
// directory, the config, the plugin's event loop on a thread, all removed when it goes), a plain
// HTTP GET against the metrics port, and a kubelet pod-resources service answering with a pod.
#pragma once

#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "api.grpc.pb.h"
#include "kuberdma/base/files.h"
#include "kuberdma/deviceplugin/manager.h"
#include "kuberdma/standins/kubelet.h"
#include "podresources.grpc.pb.h"

namespace kuberdma::deviceplugin::testing {

// What every test file of the device plugin says, said once.
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;  // NOLINT(google-build-using-namespace): tests only
using standins::KubeletStandIn;

inline constexpr const char* kConfig = R"({"configList":[
  {"resourceName":"shared","rdmaHcaMax":1000,"selectors":{"vendors":["15b3"]}},
  {"resourceName":"hca","rdmaHcaMax":8,"policy":"per-hca","selectors":{"linkTypes":["ether"]}}]})";

// A node: a copy of the roce8 fixture, a device-plugin directory, the config file, and the
// plugin's event loop on a thread. Everything is stopped and removed by the destructor.
struct Node {
  Node() {
    char tmpl[] = "/tmp/krt-dp-XXXXXX";
    dir = mkdtemp(tmpl);
    std::filesystem::copy(
        std::string(KUBERDMA_FIXTURES) + "/sysfs/roce8", dir + "/root",
        std::filesystem::copy_options::recursive | std::filesystem::copy_options::copy_symlinks);
    std::filesystem::create_directories(dir + "/plugins");
    std::filesystem::create_directories(dir + "/etc");
    REQUIRE(WriteFileAtomic(dir + "/etc/config.json", kConfig));
  }
  void Start(std::set<std::string> dra_resources = {}) {
    Options o;
    o.dra_resources = std::move(dra_resources);
    o.on_rescan = [this](const auto& resources, const rails::NodeRoles*) {
      std::lock_guard l(seen_mu);
      seen.clear();
      for (const auto& [name, shared] : resources) seen.push_back(name);
    };
    o.config_path = dir + "/etc/config.json";
    o.plugin_dir = dir + "/plugins";
    o.sysfs = sysfs::SysfsRoot(dir + "/root");
    o.metrics_port = 0;
    o.kernel_events = false;
    o.allocations_dir = dir + "/allocations";
    if (!pod_resources.empty()) o.pod_resources = pod_resources;
    auto cfg = ParseConfig(kConfig);
    auto m = Manager::Create(o, std::move(*cfg));
    REQUIRE(m);
    mgr = std::move(*m);
    loop = std::thread([this] { (void)mgr->Run(false); });
  }
  ~Node() {
    if (mgr) mgr->Stop();
    if (loop.joinable()) loop.join();
    kubelet.reset();
    mgr.reset();
    std::filesystem::remove_all(dir);
  }
  std::unique_ptr<v1beta1::DevicePlugin::Stub> Stub(const std::string& res) {
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + mgr->SocketPath(res), grpc::InsecureChannelCredentials()));
  }
  std::string dir;
  std::string pod_resources;  // the kubelet's pod-resources socket; "" the default
  std::unique_ptr<KubeletStandIn> kubelet;
  std::unique_ptr<Manager> mgr;
  std::thread loop;
  std::mutex seen_mu;
  std::vector<std::string> seen;  // the resources the last on_rescan was given
};

// GET `path` from 127.0.0.1:`port`: the status line and the body.
inline std::pair<std::string, std::string> HttpGet(uint16_t port, const std::string& path) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string text;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    std::string req = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    (void)!::write(fd, req.data(), req.size());
    char buf[8192];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  auto eol = text.find("\r\n");
  auto body = text.find("\r\n\r\n");
  return {text.substr(0, eol), body == std::string::npos ? "" : text.substr(body + 4)};
}

// The kubelet's pod-resources service, answering with two pods.
class FakePodResources final : public ::v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const ::v1::ListPodResourcesRequest*,
                    ::v1::ListPodResourcesResponse* resp) override {
    auto* pod = resp->add_pod_resources();
    pod->set_name("llm-trainer-0");
    pod->set_namespace_("default");
    auto* c = pod->add_containers();
    c->set_name("trainer");
    auto* d = c->add_devices();
    d->set_resource_name("rdma/shared");
    d->add_device_ids("pool-shared-007");
    auto* g = c->add_devices();
    g->set_resource_name("nvidia.com/gpu");
    g->add_device_ids("GPU-1");
    return grpc::Status::OK;
  }
};

}  // namespace kuberdma::deviceplugin::testing
