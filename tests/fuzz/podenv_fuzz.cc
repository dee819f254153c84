// SPDX-License-Identifier: Apache-2.0
// Fuzz target for the pod-env codec (KUBERDMA_HCAS and NCCL_IB_HCA as a container may have had
// them overwritten): decoded or refused, and what encodes decodes to the same HCAs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "kuberdma/contract/pod_env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)kuberdma::contract::ParseIbHca(text);
  auto hcas = kuberdma::contract::DecodeHcas(text);
  if (!hcas) return 0;
  auto env = kuberdma::contract::Encode(*hcas);
  auto it = env.find(kuberdma::contract::kHcas);
  if (it == env.end()) return 0;
  auto back = kuberdma::contract::DecodeHcas(it->second);
  if (!back || back->size() != hcas->size()) std::abort();
  return 0;
}
