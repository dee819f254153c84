// SPDX-License-Identifier: Apache-2.0
// Tests for the base types: Error, file helpers.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "kuberdma/base/error.h"
#include "kuberdma/base/files.h"
#include "kuberdma/base/unique_fd.h"

namespace kuberdma {
namespace {

Result<int> Twice(Result<int> in) {
  KUBERDMA_ASSIGN_OR_RETURN(int v, std::move(in));
  return v * 2;
}

TEST_CASE("Error from errno chooses the code and keeps errno and the cause") {
  Error e = Error::FromErrno(ENOENT, "open /x");
  CHECK(e.code() == ErrorCode::kNotFound);
  CHECK(e.sys_errno() == ENOENT);
  CHECK(e.message() == "open /x: No such file or directory");
  CHECK(Error::FromErrno(EBUSY, "x").code() == ErrorCode::kBusy);
  CHECK(Error::FromErrno(EPROTONOSUPPORT, "x").code() == ErrorCode::kUnsupported);
}

TEST_CASE("Wrap prepends context and keeps code and errno") {
  Error e = Error::FromErrno(EEXIST, "rename").Wrap("attach mlx5_0");
  CHECK(e.message() == "attach mlx5_0: rename: File exists");
  CHECK(e.code() == ErrorCode::kAlreadyExists);
  CHECK(e.sys_errno() == EEXIST);
}

TEST_CASE("ASSIGN_OR_RETURN propagates the error and unwraps the value") {
  CHECK(*Twice(21) == 42);
  auto r = Twice(Fail(ErrorCode::kTimeout, "late"));
  REQUIRE_FALSE(r);
  CHECK(r.error().code() == ErrorCode::kTimeout);
}

TEST_CASE("Clean paths are judged component by component") {
  CHECK(IsCleanPathUnder("/run/kube-rdma/cni", "/run/kube-rdma"));
  CHECK(IsCleanPathUnder("/run/kube-rdma", "/run/kube-rdma/"));
  CHECK(IsCleanPathUnder("/run/kube-rdma/cni/", "/run/kube-rdma"));
  CHECK_FALSE(IsCleanPathUnder("/run/kube-rdmax", "/run/kube-rdma"));
  CHECK_FALSE(IsCleanPathUnder("/run/kube-rdma/../etc", "/run/kube-rdma"));
  CHECK_FALSE(IsCleanPathUnder("/run/kube-rdma/./cni", "/run/kube-rdma"));
  CHECK_FALSE(IsCleanPathUnder("/run/kube-rdma//cni", "/run/kube-rdma"));
  CHECK_FALSE(IsCleanPathUnder("run/kube-rdma", "/run"));
  CHECK_FALSE(IsCleanPathUnder("/run", "/run/kube-rdma"));
  CHECK(IsCleanPathUnder("/anything", "/"));
}

TEST_CASE("MakePrivateDirs makes 0700 directories and refuses a link below the root") {
  char tmpl[] = "/tmp/kuberdma-private-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  struct RemoveDir {
    std::string d;
    ~RemoveDir() { std::filesystem::remove_all(d); }
  } cleanup{tmpl};
  std::string root = std::string(tmpl) + "/root";
  REQUIRE(MakePrivateDirs(root, root + "/a/b"));
  auto perms = std::filesystem::status(root + "/a/b").permissions() & std::filesystem::perms::all;
  CHECK(perms == std::filesystem::perms::owner_all);
  std::filesystem::create_directory_symlink(tmpl, root + "/link");
  auto linked = MakePrivateDirs(root, root + "/link/x");
  REQUIRE_FALSE(linked);
  CHECK(linked.error().code() == ErrorCode::kPermissionDenied);
  CHECK_FALSE(std::filesystem::exists(std::string(tmpl) + "/x"));
  CHECK(MakePrivateDirs(root, "/etc").error().code() == ErrorCode::kInvalidArgument);
  // The root itself may be reached through a link (the node's /var/run is one).
  std::filesystem::create_directory_symlink(root, std::string(tmpl) + "/alias");
  CHECK(MakePrivateDirs(std::string(tmpl) + "/alias", std::string(tmpl) + "/alias/c"));
}

TEST_CASE("WriteFileAtomic creates parents and ReadFile reads it back") {
  char tmpl[] = "/tmp/kuberdma-files-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  struct RemoveDir {
    std::string d;
    ~RemoveDir() { std::filesystem::remove_all(d); }
  } cleanup{tmpl};
  std::string path = std::string(tmpl) + "/a/b/c.json";
  REQUIRE(WriteFileAtomic(path, "{\"x\":1}\n"));
  auto text = ReadFile(path);
  REQUIRE(text);
  CHECK(*text == "{\"x\":1}\n");
  REQUIRE(WriteFileAtomic(path, "second"));
  CHECK(*ReadFile(path) == "second");
  auto missing = ReadFile(std::string(tmpl) + "/nope");
  REQUIRE_FALSE(missing);
  CHECK(missing.error().code() == ErrorCode::kNotFound);
}

}  // namespace
}  // namespace kuberdma

TEST_CASE("A line is read whole, bounded in length and in time") {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  kuberdma::UniqueFd r(p[0]), w(p[1]);
  auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::milliseconds(200); };
  REQUIRE(kuberdma::WriteAll(w.get(), "one\n", 4));
  CHECK(*kuberdma::ReadLineBefore(r.get(), soon(), 100) == "one");
  REQUIRE(kuberdma::WriteAll(w.get(), "two", 3));
  auto late = kuberdma::ReadLineBefore(r.get(), soon(), 100);  // "two" never ends
  REQUIRE_FALSE(late);
  CHECK(late.error().code() == kuberdma::ErrorCode::kTimeout);
  REQUIRE(kuberdma::WriteAll(w.get(), std::string(300, 'x').data(), 300));
  auto big = kuberdma::ReadLineBefore(r.get(), soon(), 100);
  REQUIRE_FALSE(big);
  CHECK(big.error().code() == kuberdma::ErrorCode::kInvalidArgument);
}
