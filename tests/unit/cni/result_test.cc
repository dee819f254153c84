// SPDX-License-Identifier: Apache-2.0
// Result documents per version, VERSION and error documents, and CNI_* parsing.
#include "kuberdma/cni/result.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>

#include "kuberdma/cni/config.h"

namespace kuberdma::cni {
namespace {

using nlohmann::json;

const Interface kIface{.name = "net1",
                       .mac = "b8:3f:d2:00:00:01",
                       .mtu = 9000,
                       .sandbox = "/var/run/netns/p",
                       .pci_id = "0000:1a:00.0"};

TEST_CASE("Results carry the requested version and only the fields that version defines") {
  for (const auto& v : SupportedVersions()) {
    INFO(v);
    json r = BuildResult(v, kIface, std::nullopt);
    CHECK(r["cniVersion"] == v);
    REQUIRE(r["interfaces"].size() == 1);
    CHECK(r["interfaces"][0]["name"] == "net1");
    CHECK(r["interfaces"][0]["mac"] == "b8:3f:d2:00:00:01");
    CHECK(r["interfaces"][0]["sandbox"] == "/var/run/netns/p");
    bool v11 = v == "1.1.0";
    CHECK(r["interfaces"][0].contains("mtu") == v11);
    CHECK(r["interfaces"][0].contains("pciID") == v11);
    CHECK(r.contains("ips") == (CompareVersions(v, "1.0.0") < 0));
  }
  CHECK(BuildResult("1.1.0", kIface, std::nullopt)["interfaces"][0]["pciID"] == "0000:1a:00.0");
}

TEST_CASE("prevResult passes through and our interface is appended once") {
  json prev = {{"cniVersion", "1.0.0"},
               {"interfaces", {{{"name", "eth0"}, {"sandbox", "/var/run/netns/p"}}}},
               {"ips", {{{"address", "10.0.0.2/24"}, {"interface", 0}}}}};
  json r = BuildResult("1.0.0", kIface, prev);
  CHECK(r["ips"] == prev["ips"]);
  CHECK(r["interfaces"].size() == 2);
  json again = BuildResult("1.0.0", kIface, r);
  CHECK(again["interfaces"].size() == 2);
  CHECK(PrevResultHasInterface(r, "net1", "/var/run/netns/p"));
  CHECK_FALSE(PrevResultHasInterface(r, "net1", "/var/run/netns/other"));
  CHECK_FALSE(PrevResultHasInterface(json{{"interfaces", "junk"}}, "net1", "x"));
}

TEST_CASE("VERSION lists every supported version, errors carry code and message") {
  json v = VersionResult();
  CHECK(v["supportedVersions"] == json(SupportedVersions()));
  json e = ErrorResult("0.3.1", {kInvalidConfig, "bad mtu", "details here"});
  CHECK(
      e ==
      json{{"cniVersion", "0.3.1"}, {"code", 7}, {"msg", "bad mtu"}, {"details", "details here"}});
}

std::map<std::string, std::string> g_env;
const char* FakeGetenv(const char* k) {
  auto it = g_env.find(k);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

TEST_CASE("CNI_* variables are validated per verb with error 4 naming the variable") {
  g_env = {{"CNI_COMMAND", "ADD"},
           {"CNI_CONTAINERID", "abc123"},
           {"CNI_NETNS", "/var/run/netns/p"},
           {"CNI_IFNAME", "net1"}};
  auto ok = ParseEnv(&FakeGetenv);
  REQUIRE(ok);
  CHECK(ok->command == Command::kAdd);
  CHECK(ok->ifname == "net1");

  struct Case {
    const char* key;
    const char* value;
    const char* mentions;
  };
  for (auto [key, value, mentions] :
       {Case{"CNI_COMMAND", "FROB", "CNI_COMMAND"}, Case{"CNI_CONTAINERID", "", "CNI_CONTAINERID"},
        Case{"CNI_CONTAINERID", "-bad", "CNI_CONTAINERID"}, Case{"CNI_IFNAME", "", "CNI_IFNAME"},
        Case{"CNI_IFNAME", "a/b", "CNI_IFNAME"},
        Case{"CNI_IFNAME", "sixteen-chars-xx", "CNI_IFNAME"},
        Case{"CNI_IFNAME", "..", "CNI_IFNAME"}, Case{"CNI_NETNS", "", "CNI_NETNS"}}) {
    auto env = g_env;
    g_env[key] = value;
    auto r = ParseEnv(&FakeGetenv);
    g_env = env;
    INFO(key << "=" << value);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == kInvalidEnv);
    CHECK_THAT(r.error().msg, Catch::Contains(mentions));
  }
  g_env = {{"CNI_COMMAND", "DEL"}, {"CNI_CONTAINERID", "abc"}, {"CNI_IFNAME", "net1"}};
  CHECK(ParseEnv(&FakeGetenv));  // DEL does not need CNI_NETNS
  g_env = {{"CNI_COMMAND", "VERSION"}};
  CHECK(ParseEnv(&FakeGetenv));
}

TEST_CASE("CNI_IFNAME is refused unless the kernel takes it literally") {
  g_env = {
      {"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", "abc123"}, {"CNI_NETNS", "/var/run/netns/p"}};
  // '%' is expanded by the kernel (net%d becomes net0); the others are not printable UTF-8.
  for (std::string bad : {std::string("net%d"), std::string("net\xa0"), std::string("net\x01"),
                          std::string("net\x7f"), std::string("net\xc0\xaf"),
                          std::string("net\xed\xa0\x80"), std::string("a\tb")}) {
    g_env["CNI_IFNAME"] = bad;
    auto r = ParseEnv(&FakeGetenv);
    INFO(bad);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == kInvalidEnv);
    // The message is printable ASCII, so the error document can always be written.
    CHECK(std::all_of(r.error().msg.begin(), r.error().msg.end(),
                      [](char c) { return c >= 0x20 && c < 0x7f; }));
  }
  for (std::string good :
       {std::string("net1"), std::string("rdma-0_a.b"), std::string("n\xc3\xa9t")}) {
    g_env["CNI_IFNAME"] = good;
    CHECK(ParseEnv(&FakeGetenv));
  }
}

TEST_CASE("A container ID ADD refuses is refused by ADD and leaves DEL nothing to undo") {
  std::string long_id(300, 'a');
  g_env = {{"CNI_COMMAND", "ADD"},
           {"CNI_CONTAINERID", long_id},
           {"CNI_NETNS", "/var/run/netns/p"},
           {"CNI_IFNAME", "net1"}};
  auto add = ParseEnv(&FakeGetenv);
  REQUIRE_FALSE(add);
  CHECK(add.error().code == kInvalidEnv);
  CHECK_THAT(add.error().msg, Catch::Contains("(300 bytes)"));
  g_env["CNI_CONTAINERID"] = std::string(kMaxContainerIdBytes, 'a');
  CHECK(ParseEnv(&FakeGetenv));
  for (auto [id, ifname] : {std::pair{long_id, std::string("net1")},
                            std::pair{std::string("-bad"), std::string("net1")},
                            std::pair{std::string("abc"), std::string("net%d")}}) {
    g_env = {{"CNI_COMMAND", "DEL"}, {"CNI_CONTAINERID", id}, {"CNI_IFNAME", ifname}};
    auto del = ParseEnv(&FakeGetenv);
    REQUIRE(del);
    CHECK_FALSE(del->unrecordable.empty());
  }
  g_env = {{"CNI_COMMAND", "DEL"}, {"CNI_CONTAINERID", "abc"}, {"CNI_IFNAME", "net1"}};
  CHECK(ParseEnv(&FakeGetenv)->unrecordable.empty());
}

}  // namespace
}  // namespace kuberdma::cni
