// SPDX-License-Identifier: Apache-2.0
// The one CDI spec writer: the shape the container runtime reads (cdiVersion, kind, the spec's
// and each device's containerEdits), and the file written whole.
#include "kuberdma/contract/cdi.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "kuberdma/base/files.h"
#include "temp_dir.h"

namespace kuberdma::contract {
namespace {

using nlohmann::json;

CdiSpec Claim() {
  return {.kind = "kube-rdma.io/claim",
          .devices = {{"uid_0000:1a:00.0",
                       {.device_nodes = {{"/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0"}}}}},
          .edits = {.device_nodes = {{"/dev/infiniband/rdma_cm", "/host/dev/infiniband/rdma_cm"}},
                    .env = {"KUBERDMA_CLAIM=team-a/pairs"}}};
}

TEST_CASE("A CDI spec has the version, the kind, common edits and each device's own nodes") {
  json j = json::parse(EncodeCdiSpec(Claim()));
  CHECK(j["cdiVersion"] == kCdiVersion);
  CHECK(j["kind"] == "kube-rdma.io/claim");
  CHECK(j["containerEdits"]["deviceNodes"][0]["hostPath"] == "/host/dev/infiniband/rdma_cm");
  CHECK(j["containerEdits"]["env"][0] == "KUBERDMA_CLAIM=team-a/pairs");
  REQUIRE(j["devices"].size() == 1);
  CHECK(j["devices"][0]["name"] == "uid_0000:1a:00.0");
  CHECK(j["devices"][0]["containerEdits"]["deviceNodes"][0]["path"] == "/dev/infiniband/uverbs0");
  // No variables: no env key at all (a runtime reads an empty one the same, a reader need not).
  CHECK_FALSE(j["devices"][0]["containerEdits"].contains("env"));
}

TEST_CASE("WriteCdiSpec replaces a spec whole, and names the path it cannot write") {
  testing::TempDir dir;
  std::string path = dir.path + "/kube-rdma-claim-uid.json";
  REQUIRE(WriteFileAtomic(path, "{not a spec"));
  REQUIRE(WriteCdiSpec(path, Claim()));
  auto text = ReadFile(path);
  REQUIRE(text);
  CHECK(json::parse(*text)["kind"] == "kube-rdma.io/claim");
  REQUIRE(WriteFileAtomic(dir.path + "/file", "x"));
  auto bad = WriteCdiSpec(dir.path + "/file/spec.json", Claim());
  REQUIRE_FALSE(bad);
  CHECK_THAT(bad.error().message(), Catch::Contains(dir.path + "/file"));
}

}  // namespace
}  // namespace kuberdma::contract
