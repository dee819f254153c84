// SPDX-License-Identifier: Apache-2.0
// Slot IDs (slot_id.cc): what the device plugin writes, the CNI reads back.
#include "kuberdma/contract/slot_id.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "kuberdma/base/files.h"

namespace kuberdma::contract {
namespace {

TEST_CASE("Slot IDs: what the device plugin writes, the CNI reads back, per HCA and pool") {
  for (uint32_t max : {1u, 8u, 100u, 1000u, 10000u}) {
    for (uint32_t i : {0u, max - 1}) {
      for (const Slot& s :
           {Slot{SlotKind::kPerHca, "mlx5_3", i}, Slot{SlotKind::kPool, "shared", i},
            Slot{SlotKind::kPerHca, "mlx5-bond_0", i}}) {
        std::string id = FormatSlot(s, max);
        INFO(id);
        CHECK(ParseSlot(id) == s);
      }
    }
  }
  CHECK(FormatSlot({SlotKind::kPerHca, "mlx5_3", 17}, 1000) == "mlx5_3-017");
  CHECK(FormatSlot({SlotKind::kPool, "shared", 17}, 1000) == "pool-shared-017");
  // Not slot IDs: addresses, names, a dash with no number.
  for (const char* id : {"0000:3b:00.0", "mlx5_3", "mlx5_core.sf.2", "-017", "mlx5_3-", "pool--1",
                         "mlx5_3-0x1", "mlx5_3-123456"}) {
    INFO(id);
    CHECK_FALSE(ParseSlot(id));
  }
}

}  // namespace
}  // namespace kuberdma::contract
