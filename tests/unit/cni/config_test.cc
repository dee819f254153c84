// SPDX-License-Identifier: Apache-2.0
// Network config parsing: the InfiniBand NAD, every field's type, hostile input, versions.
#include "kuberdma/cni/config.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "kuberdma/base/files.h"
#include "kuberdma/base/json.h"
#include "kuberdma/rails/node_config.h"
#include "temp_dir.h"

namespace kuberdma::cni {
namespace {

constexpr const char* kRdmaNet =
    R"({"cniVersion":"0.3.1","name":"rdma-net","type":"rdma","pkey":"0xffff","linkState":"up","mtu":9000})";

int CodeOf(std::string_view text, Command cmd = Command::kAdd) {
  auto r = ParseConfig(text, cmd);
  return r ? 0 : r.error().code;
}

TEST_CASE("The usual hand-written InfiniBand NAD config parses as written") {
  auto c = ParseConfig(kRdmaNet, Command::kAdd);
  REQUIRE(c);
  CHECK(c->cni_version == "0.3.1");
  CHECK(c->name == "rdma-net");
  CHECK(c->type == "rdma");
  CHECK(c->pkey == 0xffff);
  CHECK(c->link_state == LinkState::kUp);
  CHECK(c->mtu == 9000u);
  CHECK(c->selector.kind == SelectorKind::kAuto);
  CHECK(c->shared_policy == SharedPolicy::kContinue);
  CHECK(c->state_dir == "/run/kube-rdma/cni");
}

TEST_CASE("Unknown fields are ignored") {
  CHECK(
      CodeOf(
          R"({"cniVersion":"1.0.0","name":"n","ipam":{},"whatever":[1,2],"capabilities":{"x":true}})") ==
      0);
}

TEST_CASE("Known fields of the wrong type are error 7 naming the field") {
  struct Case {
    const char* json;
    const char* field;
  };
  for (auto [json, field] :
       {Case{R"({"cniVersion":"1.0.0","name":"n","mtu":"9000"})", "'mtu'"},
        Case{R"({"cniVersion":"1.0.0","name":"n","mtu":9000.5})", "'mtu'"},
        Case{R"({"cniVersion":"1.0.0","name":"n","pkey":true})", "'pkey'"},
        Case{R"({"cniVersion":"1.0.0","name":"n","linkState":1})", "'linkState'"},
        Case{R"({"cniVersion":"1.0.0","name":7})", "'name'"},
        Case{R"({"cniVersion":"1.0.0","name":"n","deviceID":3})", "'deviceID'"},
        Case{R"({"cniVersion":"1.0.0","name":"n","runtimeConfig":[]})", "'runtimeConfig'"},
        Case{R"({"cniVersion":"1.0.0","name":"n","runtimeConfig":{"deviceID":{}}})",
             "'runtimeConfig.deviceID'"},
        Case{R"({"cniVersion":"1.0.0","name":"n","prevResult":"x"})", "'prevResult'"},
        Case{R"({"cniVersion":"1.0.0","name":"n","lockTimeoutMs":-5})", "'lockTimeoutMs'"}}) {
    INFO(json);
    auto r = ParseConfig(json, Command::kAdd);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == kInvalidConfig);
    CHECK_THAT(r.error().msg, Catch::Contains(field));
  }
}

TEST_CASE("Out-of-range and unknown values are error 7 with the accepted values") {
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","mtu":67})") == kInvalidConfig);
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","mtu":65536})") == kInvalidConfig);
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","pkey":"0x1ffff"})") == kInvalidConfig);
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","linkState":"sideways"})") == kInvalidConfig);
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","sharedNetnsPolicy":"maybe"})") ==
        kInvalidConfig);
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","logLevel":"loud"})") == kInvalidConfig);
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","stateDir":"relative/dir"})") == kInvalidConfig);
  CHECK(CodeOf(R"({"cniVersion":"1.0.0"})") == kInvalidConfig);  // name is required
}

TEST_CASE("Malformed JSON is error 6") {
  for (const char* bad : {"", "{", "[1,2]", "\"str\"", "{\"a\":}", "nul", "{\"name\":\"\xff\"}"}) {
    INFO(bad);
    CHECK(CodeOf(bad) == kDecodeFailure);
  }
}

TEST_CASE("Hostile input ends in an error, never a crash") {
  std::string deep(100000, '[');
  CHECK(CodeOf(deep) == kDecodeFailure);
  auto nested = [](int levels) {
    return R"({"cniVersion":"1.0.0","name":"n","x":)" + std::string(size_t(levels), '[') +
           std::string(size_t(levels), ']') + "}";
  };
  CHECK(CodeOf(nested(kMaxJsonDepth - 1)) == 0);  // the top-level object is one level
  CHECK(CodeOf(nested(kMaxJsonDepth)) == kDecodeFailure);
  CHECK(CodeOf(nested(5000)) == kDecodeFailure);
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","mtu":1e309})") != 0);
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","mtu":99999999999999999999999})") ==
        kInvalidConfig);
  // A raw NUL (like any control character) inside a JSON string is malformed JSON.
  CHECK(CodeOf(std::string("{\"cniVersion\":\"1.0.0\",\"name\":\"n\0x\"}", 32)) == kDecodeFailure);
}

TEST_CASE("Versions outside 0.3.0..1.1.0 are error 1, CHECK needs 0.4.0, STATUS and GC 1.1.0") {
  CHECK(CodeOf(R"({"cniVersion":"0.2.0","name":"n"})") == kIncompatibleVersion);
  CHECK(CodeOf(R"({"name":"n"})") == kIncompatibleVersion);
  CHECK(CodeOf(R"({"cniVersion":"2.0.0","name":"n"})") == kIncompatibleVersion);
  for (const auto& v : SupportedVersions()) {
    CHECK(CodeOf(R"({"cniVersion":")" + v + R"(","name":"n"})") == 0);
  }
  CHECK(CodeOf(kRdmaNet, Command::kCheck) == kIncompatibleVersion);
  CHECK(CodeOf(R"({"cniVersion":"0.4.0","name":"n"})", Command::kCheck) == 0);
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n"})", Command::kGc) == kIncompatibleVersion);
  CHECK(CodeOf(R"({"cniVersion":"1.1.0","name":"n"})", Command::kStatus) == 0);
}

TEST_CASE("Device selection follows the documented precedence") {
  auto c = ParseConfig(
      R"({"cniVersion":"1.0.0","name":"n","mac":"aa:bb:cc:dd:ee:ff","device":"ens1f0np0",
      "hca":"mlx5_2","pciBusID":"0000:1a:00.0","deviceID":"0000:3d:00.0",
      "runtimeConfig":{"deviceID":"mlx5_3-017"}})",
      Command::kAdd);
  REQUIRE(c);
  CHECK(c->selector.kind == SelectorKind::kRuntimeDeviceId);
  CHECK(c->selector.value == "mlx5_3-017");
  REQUIRE(c->other_selectors.size() == 5);
  CHECK(c->other_selectors[0].kind == SelectorKind::kDeviceId);
  CHECK(c->other_selectors[4].kind == SelectorKind::kMac);
  auto hca = ParseConfig(R"({"cniVersion":"1.0.0","name":"n","hca":"mlx5_2","device":"x"})",
                         Command::kAdd);
  CHECK(hca->selector.kind == SelectorKind::kHca);
}

TEST_CASE("runtimeConfig carries the device-info file, GC reads valid attachments") {
  auto c = ParseConfig(R"({"cniVersion":"1.1.0","name":"n",
      "runtimeConfig":{"CNIDeviceInfoFile":"/var/run/k8s.cni.cncf.io/devinfo/cni/x"},
      "cni.dev/valid-attachments":[{"containerID":"c1","ifname":"net1"}]})",
                       Command::kGc);
  REQUIRE(c);
  CHECK(c->device_info_file == "/var/run/k8s.cni.cncf.io/devinfo/cni/x");
  REQUIRE(c->valid_attachments);
  CHECK(c->valid_attachments->at(0).container_id == "c1");
  CHECK(CodeOf(R"({"cniVersion":"1.1.0","name":"n","cni.dev/valid-attachments":{}})",
               Command::kGc) == kInvalidConfig);
}

TEST_CASE("Errors about a config that parsed answer in the config's own cniVersion") {
  CHECK(ErrorVersion(R"({"cniVersion":"0.3.1","name":"x","mtu":"9000"})") == "0.3.1");
  CHECK(ErrorVersion(R"({"cniVersion":"1.0.0"})") == "1.0.0");
  CHECK(ErrorVersion(R"({"cniVersion":"0.2.0"})").empty());  // not ours: the newest answers
  CHECK(ErrorVersion("{not json").empty());
  CHECK(ErrorVersion(R"({"cniVersion":7})").empty());
}

TEST_CASE("Version comparison is numeric per component") {
  CHECK(CompareVersions("0.4.0", "1.0.0") < 0);
  CHECK(CompareVersions("1.10.0", "1.9.0") > 0);
  CHECK(CompareVersions("1.1.0", "1.1.0") == 0);
}

}  // namespace
}  // namespace kuberdma::cni

namespace kuberdma::cni {
namespace {

std::string MsgOf(std::string_view text) {
  auto r = ParseConfig(text, Command::kAdd);
  return r ? "" : r.error().msg;
}

TEST_CASE("200,000 levels inside ipam or prevResult are refused as error 6, not a crash") {
  std::string deep = std::string(200000, '[') + std::string(200000, ']');
  for (const char* field : {"ipam", "prevResult", "runtimeConfig", "args"}) {
    std::string text = R"({"cniVersion":"1.0.0","name":"n",")" + std::string(field) +
                       R"(":{"type":"host-local","x":)" + deep + "}}";
    CHECK(CodeOf(text) == kDecodeFailure);
    CHECK_THAT(MsgOf(text), Catch::Contains("nesting deeper than 64"));
  }
  CHECK(ErrorVersion(R"({"cniVersion":"1.0.0","x":)" + deep + "}").empty());
}

TEST_CASE("stateDir and logFile must lie under kube-rdma's own roots") {
  auto with = [](const std::string& extra) {
    return R"({"cniVersion":"1.0.0","name":"n")" + extra + "}";
  };
  CHECK(CodeOf(with(R"(,"stateDir":"/etc")")) == kInvalidConfig);
  CHECK_THAT(MsgOf(with(R"(,"stateDir":"/etc")")), Catch::Contains("/run/kube-rdma"));
  CHECK(CodeOf(with(R"(,"stateDir":"/run/kube-rdma/../../etc")")) == kInvalidConfig);
  CHECK(CodeOf(with(R"(,"stateDir":"/run/kube-rdmax")")) == kInvalidConfig);
  CHECK(CodeOf(with(R"(,"stateDir":"/run/kube-rdma/./cni")")) == kInvalidConfig);
  CHECK(CodeOf(with(R"(,"stateDir":"/var/lib/kube-rdma/cni")")) == 0);
  CHECK(CodeOf(with(R"(,"logFile":"/etc/cron.d/x")")) == kInvalidConfig);
  CHECK(CodeOf(with(R"(,"logFile":"/tmp/rdma.log")")) == kInvalidConfig);
  auto ok = ParseConfig(with(R"(,"logFile":"/var/log/kube-rdma/rdma.log")"), Command::kAdd);
  REQUIRE(ok);
  CHECK(ok->log_root == "/var/log/kube-rdma");
  CHECK(ok->state_root == "/run/kube-rdma");
  // The node's own policy may widen the roots; the NAD never can.
  NodePolicy wide;
  wide.state_roots.emplace_back("/srv/rdma");
  CHECK(ParseConfig(with(R"(,"stateDir":"/srv/rdma/cni")"), Command::kAdd, wide));
}

TEST_CASE("A device-info file is only written where Multus keeps them") {
  auto with = [](const std::string& path) {
    return R"({"cniVersion":"1.0.0","name":"n","runtimeConfig":{"CNIDeviceInfoFile":")" + path +
           "\"}}";
  };
  CHECK(CodeOf(with("/etc/passwd")) == kInvalidConfig);
  CHECK_THAT(MsgOf(with("/etc/passwd")), Catch::Contains("devinfo/cni"));
  CHECK(CodeOf(with("/var/run/k8s.cni.cncf.io/devinfo/cni/../../../etc/passwd")) == kInvalidConfig);
  CHECK(CodeOf(with("/var/run/k8s.cni.cncf.io/devinfo/cni/sub/x.json")) == kInvalidConfig);
  CHECK(CodeOf(with("/var/run/k8s.cni.cncf.io/devinfo/cni/ns-net-cid-net1.json")) == 0);
  CHECK(CodeOf(with("/run/k8s.cni.cncf.io/devinfo/cni/x")) == 0);
}

TEST_CASE("Device names cannot walk sysfs") {
  for (const char* field : {"hca", "device", "deviceID", "pciBusID", "mac"}) {
    for (const char* bad : {"../infiniband/mlx5_1", "..", ".", "mlx5_0/../mlx5_1", "a b"}) {
      std::string text =
          R"({"cniVersion":"1.0.0","name":"n",")" + std::string(field) + R"(":")" + bad + "\"}";
      CHECK(CodeOf(text) == kInvalidConfig);
    }
  }
  CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","runtimeConfig":{"deviceID":"../x"}})") ==
        kInvalidConfig);
  for (const char* good : {"mlx5_3", "0000:3b:00.0", "mlx5_core.sf.2", "mlx5_3-017", "shared-017",
                           "b8:3f:d2:00:00:01"}) {
    CHECK(CodeOf(R"({"cniVersion":"1.0.0","name":"n","deviceID":")" + std::string(good) + "\"}") ==
          0);
  }
}

TEST_CASE("The node's policy file adds roots and is checked like any input") {
  char tmpl[] = "/tmp/krt-policy-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  std::string dir = tmpl;
  struct Cleanup {
    std::string d;
    ~Cleanup() { std::filesystem::remove_all(d); }
  } cleanup{dir};
  auto missing = LoadNodePolicy(dir + "/none.json");
  REQUIRE(missing);
  CHECK(missing->state_roots == NodePolicy{}.state_roots);
  REQUIRE(WriteFileAtomic(dir + "/p.json", R"({"stateRoots":["/srv/rdma"]})"));
  auto p = LoadNodePolicy(dir + "/p.json");
  REQUIRE(p);
  CHECK(p->state_roots.back() == "/srv/rdma");
  CHECK(p->state_roots.front() == "/run/kube-rdma");
  for (const char* bad :
       {R"({"stateRoots":"/srv"})", R"({"logRoots":["relative"]})", R"({"stateRoots":["/"]})",
        R"({"deviceInfoDirs":["/a/../b"]})", "[", "5"}) {
    REQUIRE(WriteFileAtomic(dir + "/bad.json", bad));
    auto b = LoadNodePolicy(dir + "/bad.json");
    REQUIRE_FALSE(b);
    CHECK(b.error().code == kInvalidConfig);
    CHECK_THAT(b.error().msg, Catch::Contains(dir + "/bad.json"));
  }
}

TEST_CASE("node.json and the deprecated cni-node.json hold a root to one rule") {
  testing::TempDir dir("krt-roots");
  const std::string file = dir.path + "/cni-node.json";
  // Each path and whether it may be a root: absolute, clean, not / (a trailing slash is clean).
  const std::vector<std::pair<std::string, bool>> paths = {{"/srv/rdma", true},
                                                           {"/srv/rdma/", true},
                                                           {"/srv/.rdma", true},
                                                           {"/", false},
                                                           {"//", false},
                                                           {"/srv//rdma", false},
                                                           {"/srv/./rdma", false},
                                                           {"/srv/..", false},
                                                           {"/srv/.", false},
                                                           {"srv/rdma", false},
                                                           {"", false},
                                                           {"/srv/rdma\\u0000x", false},
                                                           {"/" + std::string(4100, 'a'), false}};
  for (const auto& [path, ok] : paths) {
    INFO("root '" << path.substr(0, 40) << "'");
    const std::string doc = R"({"stateRoots":[")" + path + R"("]})";
    auto node = rails::ParseNodeConfig(doc, "");
    REQUIRE(WriteFileAtomic(file, doc));
    auto cni = LoadNodePolicy(file);
    CHECK(node.has_value() == ok);
    CHECK(cni.has_value() == ok);
    if (ok) CHECK(cni->state_roots.back() == node->state_roots.back());
    if (!ok) CHECK_THAT(cni.error().msg, Catch::Contains(file));
  }
}

TEST_CASE("DEL salvages the name and state directory of a config that does not parse") {
  auto c = SalvageForDel(R"({"cniVersion":"1.0.0","name":"rdma-net","mtu":"abc"})");
  CHECK(c.name == "rdma-net");
  CHECK(c.state_dir == "/run/kube-rdma/cni");
  auto outside = SalvageForDel(R"({"name":"x","stateDir":"/etc","mtu":"abc"})");
  CHECK(outside.state_dir == "/run/kube-rdma/cni");
  auto garbage = SalvageForDel("not json");
  CHECK(garbage.name.empty());
  CHECK(garbage.state_dir == "/run/kube-rdma/cni");
}

}  // namespace
}  // namespace kuberdma::cni

namespace kuberdma::cni {
namespace {

TEST_CASE("The node config's roots widen where a NAD's stateDir and logFile may lie") {
  rails::NodeConfig node;
  node.state_roots = {"/srv/kube-rdma"};
  node.log_roots = {"/srv/log"};
  NodePolicy policy = NodePolicyOf(node);
  CHECK(policy.state_roots.front() == "/run/kube-rdma");  // never removed, only added to
  const std::string conf = R"({"cniVersion":"1.0.0","name":"n","stateDir":"/srv/kube-rdma/x",
                               "logFile":"/srv/log/rdma.log"})";
  CHECK(ParseConfig(conf, Command::kAdd, policy));
  auto narrow = ParseConfig(conf, Command::kAdd);
  REQUIRE_FALSE(narrow);
  CHECK(narrow.error().code == kInvalidConfig);
}

}  // namespace
}  // namespace kuberdma::cni
