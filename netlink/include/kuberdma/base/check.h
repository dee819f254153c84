// SPDX-License-Identifier: Apache-2.0
// KUBERDMA_CHECK: aborts with a message on a broken invariant, in every build type.
// Never use it on what the kernel, the config or the user controls: those are Errors.
#pragma once

namespace kuberdma::internal {
[[noreturn]] void CheckFailed(const char* expr, const char* file, int line);
}  // namespace kuberdma::internal

#define KUBERDMA_CHECK(cond) \
  ((cond) ? static_cast<void>(0) : ::kuberdma::internal::CheckFailed(#cond, __FILE__, __LINE__))
