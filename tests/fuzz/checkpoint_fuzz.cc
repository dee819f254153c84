// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the kubelet's device-manager checkpoint as rdma-doctor reads it: allocations
// and named problems, never a crash or exception.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kuberdma/doctor/doctor.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> problems;
  auto a = kuberdma::doctor::ParseCheckpoint(text, "checkpoint", &problems);
  if (!a && a.error().message().empty()) std::abort();
  return 0;
}
