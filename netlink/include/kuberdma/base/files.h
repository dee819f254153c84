// SPDX-License-Identifier: Apache-2.0
// Small file helpers with Result errors: read a whole file, write one atomically.
//
//   KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadFile("/etc/x.json"));
//   KUBERDMA_TRY(WriteFileAtomic("/var/lib/x/state.json", text));
#pragma once

#include <cstddef>
#include <string>

#include "kuberdma/base/error.h"

namespace kuberdma {

// Returns the whole content of `path`; kNotFound when it does not exist.
Result<std::string> ReadFile(const std::string& path);

// Writes `content` to a temporary file beside `path` and renames it over `path`, so a reader
// sees the old or the new content, never a torn one. Creates missing parent directories
// (mode 0755). No fsync: a record only has to survive a crashed process, not a crashed node
// (after a reboot every device is back in the host namespace anyway).
Result<void> WriteFileAtomic(const std::string& path, const std::string& content);

// Creates `dir` and its parents if missing (mode 0755).
Result<void> MakeDirs(const std::string& dir);

// Writes all `len` bytes to `fd` (a pipe or socket may take them in parts), retrying EINTR.
// Callers that only do their best (a wakeup, a result whose reader may be gone) drop the Result
// with (void) and say why.
Result<void> WriteAll(int fd, const void* data, size_t len);

}  // namespace kuberdma
