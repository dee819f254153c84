// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the network-config parser (with ipam, prevResult, runtimeConfig and args) and
// what DEL salvages of a config it refused: any bytes must end in a config or a CNI error with a
// code from the documented set, never a crash, hang or exception.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kuberdma/cni/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kuberdma::cni::Command;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (auto cmd : {Command::kAdd, Command::kDel, Command::kGc}) {
    auto r = kuberdma::cni::ParseConfig(text, cmd);
    if (!r) {
      int c = r.error().code;
      if (c != 1 && c != 6 && c != 7) std::abort();
      if (r.error().msg.empty()) std::abort();
    }
  }
  auto salvaged = kuberdma::cni::SalvageForDel(text);
  if (salvaged.state_dir.empty() || salvaged.state_dir[0] != '/') std::abort();
  (void)kuberdma::cni::ErrorVersion(text);
  return 0;
}
