// SPDX-License-Identifier: Apache-2.0
// Installing the CNI binary: never over another plugin's file.
#include "kuberdma/cni/install.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "kuberdma/base/files.h"
#include "temp_dir.h"

namespace kuberdma::cni {
namespace {

using testing::TempDir;

std::string Ours(const std::string& version) {
  return "\x7f"
         "ELF...." +
         std::string(kCniBinaryMarker) + "...." + version;
}

TEST_CASE("the CNI binary is installed where nothing is, mode 0755") {
  TempDir d;
  REQUIRE(WriteFileAtomic(d.path + "/src", Ours("v1")));
  auto r = InstallCniBinary(d.path + "/src", d.path + "/bin/kube-rdma");
  REQUIRE(r);
  CHECK_THAT(*r, Catch::Contains("installed " + d.path + "/bin/kube-rdma"));
  CHECK(*ReadFile(d.path + "/bin/kube-rdma") == Ours("v1"));
  struct stat st {};
  REQUIRE(::stat((d.path + "/bin/kube-rdma").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0755);
  CHECK(*CniBinaryOwner(d.path + "/bin/kube-rdma") == BinaryOwner::kOurs);
}

TEST_CASE("an older kube-rdma binary is replaced, the same one is left alone") {
  TempDir d;
  REQUIRE(WriteFileAtomic(d.path + "/src", Ours("v2")));
  REQUIRE(WriteFileAtomic(d.path + "/rdma", Ours("v1"), 0755));
  auto r = InstallCniBinary(d.path + "/src", d.path + "/rdma");
  REQUIRE(r);
  CHECK_THAT(*r, Catch::StartsWith("replaced"));
  CHECK(*ReadFile(d.path + "/rdma") == Ours("v2"));
  r = InstallCniBinary(d.path + "/src", d.path + "/rdma");
  REQUIRE(r);
  CHECK_THAT(*r, Catch::StartsWith("unchanged"));
}

TEST_CASE("another plugin's binary is never overwritten, and the error says whose name it is") {
  TempDir d;
  REQUIRE(WriteFileAtomic(d.path + "/src", Ours("v1")));
  std::string theirs =
      "\x7f"
      "ELF rdma-cni (github.com/k8snetworkplumbingwg/rdma-cni)";
  REQUIRE(WriteFileAtomic(d.path + "/rdma", theirs, 0755));
  auto r = InstallCniBinary(d.path + "/src", d.path + "/rdma");
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kAlreadyExists);
  CHECK_THAT(r.error().message(), Catch::Contains("belongs to another CNI plugin"));
  CHECK_THAT(r.error().message(), Catch::Contains("rdma-cni"));
  CHECK_THAT(r.error().message(), Catch::Contains("cni.binaryName"));
  CHECK(*ReadFile(d.path + "/rdma") == theirs);
  CHECK(*CniBinaryOwner(d.path + "/rdma") == BinaryOwner::kForeign);
  CHECK(std::filesystem::directory_iterator(d.path) != std::filesystem::directory_iterator());
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(d.path)) ++files;
  CHECK(files == 2);  // no temporary left beside it
}

TEST_CASE("a symbolic link or a directory at the destination is another's") {
  TempDir d;
  REQUIRE(WriteFileAtomic(d.path + "/src", Ours("v1")));
  REQUIRE(WriteFileAtomic(d.path + "/target", Ours("v0")));
  REQUIRE(::symlink((d.path + "/target").c_str(), (d.path + "/link").c_str()) == 0);
  CHECK(*CniBinaryOwner(d.path + "/link") == BinaryOwner::kForeign);
  CHECK_FALSE(InstallCniBinary(d.path + "/src", d.path + "/link"));
  CHECK(std::filesystem::is_symlink(d.path + "/link"));
  REQUIRE(MakeDirs(d.path + "/dir"));
  CHECK(*CniBinaryOwner(d.path + "/dir") == BinaryOwner::kForeign);
  CHECK(*CniBinaryOwner(d.path + "/absent") == BinaryOwner::kAbsent);
}

TEST_CASE("only kube-rdma's binary is installed") {
  TempDir d;
  REQUIRE(WriteFileAtomic(d.path + "/src", "#!/bin/sh\necho not ours\n"));
  auto r = InstallCniBinary(d.path + "/src", d.path + "/kube-rdma");
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kInvalidArgument);
  CHECK_FALSE(std::filesystem::exists(d.path + "/kube-rdma"));
}

}  // namespace
}  // namespace kuberdma::cni
