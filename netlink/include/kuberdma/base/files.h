// SPDX-License-Identifier: Apache-2.0
// Small file helpers with Result errors: read a whole file, write one atomically.
//
//   KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadFile("/etc/x.json"));
//   KUBERDMA_TRY(WriteFileAtomic("/var/lib/x/state.json", text));
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "kuberdma/base/error.h"

namespace kuberdma {

// Returns the whole content of `path`; kNotFound when it does not exist.
Result<std::string> ReadFile(const std::string& path);

// Writes `content` to a temporary file beside `path` and renames it over `path`, so a reader
// sees the old or the new content, never a torn one. Creates missing parent directories
// (mode 0755). The temporary file has an unpredictable name and is created with O_EXCL (mkostemp),
// so a link planted beside `path` is never written through; the rename replaces the directory
// entry at `path` (a symbolic link there is replaced, not followed). No fsync: a record only has
// to survive a crashed process, not a crashed node (after a reboot every device is back in the
// host namespace anyway).
Result<void> WriteFileAtomic(const std::string& path, const std::string& content,
                             unsigned mode = 0644);

// Whole content of `path`, refusing to follow a symbolic link in its last component and
// anything but a regular file (kInvalidArgument); kNotFound when it does not exist.
Result<std::string> ReadRegularFile(const std::string& path);

// The whole of `path` when it holds at most head + tail bytes; otherwise its first `head` and
// last `tail` bytes joined by a newline, with the number of bytes left out in `*skipped`. For
// logs of any size whose beginning and end matter.
Result<std::string> ReadFileHeadTail(const std::string& path, size_t head, size_t tail,
                                     size_t* skipped);

// Whether `path` is absolute, has no empty, "." or ".." component, and lies under `root`
// (component-wise: "/run/kube-rdmax" is not under "/run/kube-rdma").
bool IsCleanPathUnder(std::string_view path, std::string_view root);

// Whether `path` may serve as a root other paths are confined under: absolute, clean (as above),
// not "/" itself, no NUL and at most 4096 bytes. The node config's stateRoots, logRoots and
// deviceInfoDirs and the deprecated cni-node.json are held to this one rule.
bool IsCleanRoot(std::string_view path);

// Creates `dir` (which must be `root` or under it) for private use: missing directories from
// `root` down are made with mode 0700, and every component below `root` must be a real
// directory, not a symbolic link (kPermissionDenied naming it; kInvalidArgument when `dir` is
// not a clean path under `root`). `root` itself and its parents are
// the node's (created 0700 where missing, links there allowed: /var/run is one).
Result<void> MakePrivateDirs(const std::string& root, const std::string& dir);

// Creates `dir` and its parents if missing (mode 0755).
Result<void> MakeDirs(const std::string& dir);

// Writes all `len` bytes to `fd` (a pipe or socket may take them in parts), retrying EINTR.
// Callers that only do their best (a wakeup, a result whose reader may be gone) drop the Result
// with (void) and say why.
Result<void> WriteAll(int fd, const void* data, size_t len);

// Reads `fd` (a socket or pipe) until a newline, end of file or `deadline`, and returns what came
// before the newline. kTimeout when nothing completes the line in time, kInvalidArgument past
// `max` bytes, an errno error otherwise. What follows the newline in the same read is dropped: for
// protocols of one line per connection.
Result<std::string> ReadLineBefore(int fd, std::chrono::steady_clock::time_point deadline,
                                   size_t max);

}  // namespace kuberdma
