// SPDX-License-Identifier: Apache-2.0
// Fuzz target for an IPAM plugin's answer on stdout, in any cniVersion: a result or a CNI error
// with a code, never a crash or exception.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kuberdma/base/json.h"
#include "kuberdma/cni/ipam.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto doc = kuberdma::ParseUntrustedJson(text, "IPAM answer");
  if (!doc) return 0;
  auto r = kuberdma::cni::IpamResult::Parse(*doc, "fuzz");
  if (!r && (r.error().code <= 0 || r.error().msg.empty())) std::abort();
  return 0;
}
