// SPDX-License-Identifier: Apache-2.0
// State records and the node lock.
#include "kuberdma/cni/state.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "kuberdma/base/files.h"
#include "temp_dir.h"

namespace kuberdma::cni {
namespace {

using testing::TempDir;

AttachmentRecord Sample() {
  return {.network = "rdma-net",
          .container_id = "c1",
          .ifname = "net1",
          .netns = "/var/run/netns/p",
          .done = true,
          .hca = "mlx5_0",
          .hca_address = "0000:1a:00.0",
          .link_layer = "Ethernet",
          .netdev_moved = true,
          .host_name = "ens1f0np0",
          .host_ifindex = 12,
          .mac = "b8:3f:d2:00:00:01",
          .host_mtu = 1500,
          .host_admin_up = true,
          .netns_mode = rdma::NetnsMode::kExclusive,
          .rdma_moved = true,
          .pkey = 0xffff,
          .pkey_index = -1};
}

TEST_CASE("A record round-trips through the store and is listed per network") {
  TempDir dir;
  StateStore store(dir.path);
  REQUIRE(store.Save(Sample()));
  auto loaded = store.Load("rdma-net", "c1", "net1");
  REQUIRE(loaded);
  REQUIRE(*loaded);
  CHECK((*loaded)->ToJson() == Sample().ToJson());
  auto other = Sample();
  other.network = "other/net";
  other.container_id = "c2";
  REQUIRE(store.Save(other));
  CHECK(store.List("rdma-net")->size() == 1);
  CHECK(store.List()->size() == 2);
  REQUIRE(store.Remove("rdma-net", "c1", "net1"));
  REQUIRE(store.Remove("rdma-net", "c1", "net1"));  // idempotent
  CHECK_FALSE(*store.Load("rdma-net", "c1", "net1"));
}

TEST_CASE("A record from a newer version or a corrupt file is an error, not a guess") {
  TempDir dir;
  StateStore store(dir.path);
  REQUIRE(WriteFileAtomic(dir.path + "/rdma-net/c1:net1.json", R"({"version": 99})"));
  auto r = store.Load("rdma-net", "c1", "net1");
  REQUIRE_FALSE(r);
  CHECK_THAT(r.error().message(), Catch::Contains("version 99"));
  REQUIRE(WriteFileAtomic(dir.path + "/rdma-net/c1:net1.json", "{trunc"));
  CHECK_FALSE(store.Load("rdma-net", "c1", "net1"));
}

TEST_CASE("A record keeps its mode, an older record without one moved, an unknown one is refused") {
  AttachmentRecord child{
      .network = "rail1", .container_id = "c", .ifname = "net1", .mode = AttachMode::kIpvlan};
  auto back = AttachmentRecord::FromJson(child.ToJson());
  REQUIRE(back);
  CHECK(back->mode == AttachMode::kIpvlan);
  nlohmann::json old = child.ToJson();
  old.erase("mode");
  CHECK(AttachmentRecord::FromJson(old)->mode == AttachMode::kMove);
  old["mode"] = "tap";
  auto unknown = AttachmentRecord::FromJson(old);
  REQUIRE_FALSE(unknown);
  CHECK_THAT(unknown.error().message(), Catch::Contains("'tap'"));
}

TEST_CASE("Network names are escaped into one safe path component") {
  CHECK(EscapeName("rdma-net") == "rdma-net");
  CHECK(EscapeName("../etc") == "%2E.%2Fetc");
  CHECK(EscapeName("") == "%00");
}

TEST_CASE("The node lock is exclusive and a second taker gets kBusy after its bounded wait") {
  TempDir dir;
  auto first = NodeLock::Acquire(dir.path, 1000);
  REQUIRE(first);
  auto second = NodeLock::Acquire(dir.path, 50);
  REQUIRE_FALSE(second);
  CHECK(second.error().code() == ErrorCode::kBusy);
  { auto released = std::move(*first); }
  CHECK(NodeLock::Acquire(dir.path, 50));
}

}  // namespace
}  // namespace kuberdma::cni
