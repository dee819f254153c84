// SPDX-License-Identifier: Apache-2.0
// Fuzz target for NCCL's log as rdma-validate reads it: any bytes (cut lines, binary garbage)
// parse without a crash or exception, and the warnings stay bounded.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kuberdma/validator/nccl_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  kuberdma::validator::NcclLog log;
  log.AddText(text);
  if (log.warnings().size() > kuberdma::validator::kMaxWarnings) std::abort();
  (void)log.devices();
  (void)log.bypasses();
  for (const auto& [dev, gid] : log.gids()) (void)gid.Address();
  return 0;
}
