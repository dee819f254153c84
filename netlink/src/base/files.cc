// SPDX-License-Identifier: Apache-2.0
// Whole-file reads and atomic writes (temp file + rename).
#include "kuberdma/base/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "kuberdma/base/unique_fd.h"

namespace kuberdma {

Result<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return FailErrno(errno, "open " + path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FailErrno(errno, "read " + path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
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

Result<void> WriteFileAtomic(const std::string& path, const std::string& content) {
  auto slash = path.find_last_of('/');
  if (slash != std::string::npos) KUBERDMA_TRY(MakeDirs(path.substr(0, slash)));
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) return FailErrno(errno, "create " + tmp);
    size_t off = 0;
    while (off < content.size()) {
      ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        int err = errno;
        ::unlink(tmp.c_str());
        return FailErrno(err, "write " + tmp);
      }
      off += static_cast<size_t>(n);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return FailErrno(err, "rename " + tmp + " to " + path);
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

}  // namespace kuberdma
