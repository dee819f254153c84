// SPDX-License-Identifier: Apache-2.0
// Fuzz target for CNI state records (a truncated or hand-edited file must not crash DEL): a
// record or an error, and a record read back writes itself out again.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "kuberdma/base/json.h"
#include "kuberdma/cni/state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto doc = kuberdma::ParseUntrustedJson(text, "state record");
  if (!doc) return 0;
  auto rec = kuberdma::cni::AttachmentRecord::FromJson(*doc);
  if (!rec) return 0;
  auto again = kuberdma::cni::AttachmentRecord::FromJson(rec->ToJson());
  if (!again || again->container_id != rec->container_id) std::abort();
  (void)kuberdma::DumpJson(rec->ToJson());
  return 0;
}
