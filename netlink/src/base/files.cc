// SPDX-License-Identifier: Apache-2.0
// Whole-file reads and atomic writes (temp file + rename).
#include "kuberdma/base/files.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <vector>

#include "kuberdma/base/unique_fd.h"

namespace kuberdma {

namespace {

Result<std::string> ReadAll(int fd, const std::string& path) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FailErrno(errno, "read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return FailErrno(errno, "open " + path);
  return ReadAll(fd.get(), path);
}

Result<void> MakeDirs(const std::string& dir) {
  if (dir.empty()) return {};
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return {};
    return Fail(ErrorCode::kAlreadyExists, dir + " exists and is not a directory");
  }
  auto slash = dir.find_last_of('/');
  if (slash != std::string::npos && slash > 0) KUBERDMA_TRY(MakeDirs(dir.substr(0, slash)));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return FailErrno(errno, "mkdir " + dir);
  return {};
}

Result<void> WriteFileAtomic(const std::string& path, const std::string& content, unsigned mode) {
  auto slash = path.find_last_of('/');
  if (slash != std::string::npos) KUBERDMA_TRY(MakeDirs(path.substr(0, slash)));
  // mkostemp: O_CREAT|O_EXCL with a random suffix, so nobody can plant the temporary name.
  std::string tmp = path + ".tmp.XXXXXX";
  UniqueFd fd(::mkostemp(tmp.data(), O_CLOEXEC));
  if (!fd.valid()) return FailErrno(errno, "create a temporary file beside " + path);
  auto fail = [&](int err, const std::string& what) {
    ::unlink(tmp.c_str());
    return FailErrno(err, what);
  };
  if (::fchmod(fd.get(), static_cast<mode_t>(mode)) != 0) return fail(errno, "chmod " + tmp);
  if (auto w = WriteAll(fd.get(), content.data(), content.size()); !w) {
    return fail(w.error().sys_errno(), "write " + tmp);
  }
  fd.Reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return fail(errno, "rename " + tmp + " to " + path);
  }
  return {};
}

Result<std::string> ReadRegularFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    if (errno == ELOOP) {
      return Fail(ErrorCode::kInvalidArgument, path + " is a symbolic link; refusing to follow it");
    }
    return FailErrno(errno, "open " + path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return FailErrno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) {
    return Fail(ErrorCode::kInvalidArgument, path + " is not a regular file");
  }
  return ReadAll(fd.get(), path);
}

Result<std::string> ReadFileHeadTail(const std::string& path, size_t head, size_t tail,
                                     size_t* skipped) {
  *skipped = 0;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return FailErrno(errno, "open " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return FailErrno(errno, "stat " + path);
  auto size = static_cast<size_t>(st.st_size);
  if (!S_ISREG(st.st_mode) || size <= head + tail) return ReadAll(fd.get(), path);
  std::string out(head + 1 + tail, '\n');
  auto read_at = [&](char* dst, size_t len, off_t at) -> Result<void> {
    size_t done = 0;
    while (done < len) {
      ssize_t n = ::pread(fd.get(), dst + done, len - done, at + static_cast<off_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return FailErrno(errno, "read " + path);
      if (n == 0) break;  // truncated while we read: keep what there is
      done += static_cast<size_t>(n);
    }
    return {};
  };
  KUBERDMA_TRY(read_at(out.data(), head, 0));
  KUBERDMA_TRY(read_at(out.data() + head + 1, tail, static_cast<off_t>(size - tail)));
  *skipped = size - head - tail;
  return out;
}

namespace {

// The components of an absolute path ("/a/b/" -> a, b); nullopt when one is empty (a "//"), "."
// or "..", or the path is not absolute.
std::optional<std::vector<std::string_view>> CleanComponents(std::string_view path) {
  if (path.empty() || path[0] != '/') return std::nullopt;
  std::vector<std::string_view> out;
  for (size_t pos = 1; pos <= path.size();) {
    size_t end = std::min(path.find('/', pos), path.size());
    std::string_view part = path.substr(pos, end - pos);
    if ((part.empty() && end != path.size()) || part == "." || part == "..") return std::nullopt;
    if (!part.empty()) out.push_back(part);
    pos = end + 1;
  }
  return out;
}

}  // namespace

bool IsCleanPathUnder(std::string_view path, std::string_view root) {
  auto p = CleanComponents(path);
  auto r = CleanComponents(root);
  return p && r && p->size() >= r->size() && std::equal(r->begin(), r->end(), p->begin());
}

bool IsCleanRoot(std::string_view path) {
  auto parts = CleanComponents(path);
  return parts && !parts->empty() && path.size() <= 4096 &&
         path.find('\0') == std::string_view::npos;
}

Result<void> MakePrivateDirs(const std::string& root, const std::string& dir) {
  if (!IsCleanPathUnder(dir, root)) {
    return Fail(ErrorCode::kInvalidArgument, dir + " is not a clean path under " + root);
  }
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) {
    auto slash = root.find_last_of('/');
    if (slash != std::string::npos && slash > 0) KUBERDMA_TRY(MakeDirs(root.substr(0, slash)));
    if (::mkdir(root.c_str(), 0700) != 0 && errno != EEXIST) {
      return FailErrno(errno, "mkdir " + root);
    }
  } else if (!S_ISDIR(st.st_mode)) {
    return Fail(ErrorCode::kAlreadyExists, root + " exists and is not a directory");
  }
  auto parts = *CleanComponents(dir);
  const size_t roots = CleanComponents(root)->size();
  std::string at;
  for (size_t i = 0; i < parts.size(); ++i) {
    at += "/" + std::string(parts[i]);
    if (i < roots) continue;  // the root's own components: the node's, links allowed
    if (::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST) return FailErrno(errno, "mkdir " + at);
    if (::lstat(at.c_str(), &st) != 0) return FailErrno(errno, "stat " + at);
    if (S_ISLNK(st.st_mode)) {
      return Fail(ErrorCode::kPermissionDenied,
                  at + " is a symbolic link; kube-rdma does not follow links below " + root +
                      " (remove it)");
    }
    if (!S_ISDIR(st.st_mode)) {
      return Fail(ErrorCode::kAlreadyExists, at + " exists and is not a directory");
    }
  }
  return {};
}

Result<void> WriteAll(int fd, const void* data, size_t len) {
  const auto* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno(errno, "write to fd " + std::to_string(fd));
    p += n;
    len -= static_cast<size_t>(n);
  }
  return {};
}

Result<std::string> ReadLineBefore(int fd, std::chrono::steady_clock::time_point deadline,
                                   size_t max) {
  std::string line;
  char buf[4096];
  while (line.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{.fd = fd, .events = POLLIN};
    int ready = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return Fail(ErrorCode::kTimeout, "no whole line in time");
    if (ready < 0) return FailErrno(errno, "wait for a line");
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return FailErrno(errno, "read a line");
    if (n == 0) break;
    line.append(buf, static_cast<size_t>(n));
    if (line.size() > max) {
      return Fail(ErrorCode::kInvalidArgument,
                  "a line longer than " + std::to_string(max) + " bytes");
    }
  }
  return line.substr(0, line.find('\n'));
}

}  // namespace kuberdma
