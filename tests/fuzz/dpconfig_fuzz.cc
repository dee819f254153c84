// SPDX-License-Identifier: Apache-2.0
// Fuzz target for rdma-device-plugin's config (a ConfigMap anyone with edit rights in the
// namespace can change): a config within its limits or an error naming the field.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kuberdma/deviceplugin/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto cfg = kuberdma::deviceplugin::ParseConfig(text);
  if (!cfg) {
    if (cfg.error().message().empty()) std::abort();
    return 0;
  }
  if (cfg->resources.empty() || cfg->resources.size() > kuberdma::deviceplugin::kMaxResources) {
    std::abort();
  }
  return 0;
}
