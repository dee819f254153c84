// SPDX-License-Identifier: Apache-2.0
// A private directory under /tmp for one test, removed with everything in it when the test ends
// (passed or failed).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace kuberdma::testing {

struct TempDir {
  explicit TempDir(const std::string& prefix = "kuberdma-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

}  // namespace kuberdma::testing
