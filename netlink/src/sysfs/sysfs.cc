// SPDX-License-Identifier: Apache-2.0
// SysfsRoot: the one function family through which kube-rdma reads /sys.
#include "kuberdma/sysfs/sysfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "kuberdma/base/files.h"

namespace kuberdma::sysfs {

SysfsRoot::SysfsRoot(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  if (root_.empty()) root_ = "/";
}

SysfsRoot SysfsRoot::FromEnv() {
  const char* env = std::getenv(kSysfsRootEnv);
  return SysfsRoot(env != nullptr && *env != '\0' ? env : "/");
}

std::string SysfsRoot::Sys(std::string_view rel) const {
  std::string out = root_ == "/" ? "" : root_;
  out += "/sys/";
  out += rel;
  return out;
}

std::string SysfsRoot::Dev(std::string_view rel) const {
  std::string out = root_ == "/" ? "" : root_;
  out += "/dev/";
  out += rel;
  return out;
}

Result<std::string> SysfsRoot::ReadAttr(std::string_view rel) const {
  KUBERDMA_ASSIGN_OR_RETURN(std::string text, ReadFile(Sys(rel)));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())) != 0)
    text.pop_back();
  return text;
}

Result<void> SysfsRoot::WriteAttr(std::string_view rel, std::string_view value) const {
  std::string path = Sys(rel);
  // No O_CREAT: a sysfs attribute exists or the kernel has no such setting.
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) return FailErrno(errno, "write " + path);
  ssize_t n = ::write(fd, value.data(), value.size());
  int err = errno;
  ::close(fd);
  if (n < 0) return FailErrno(err, "write '" + std::string(value) + "' to " + path);
  if (static_cast<size_t>(n) != value.size()) {
    return Fail(ErrorCode::kIo, "write '" + std::string(value) + "' to " + path + ": short write");
  }
  return {};
}

std::string SysfsRoot::ReadAttrOr(std::string_view rel, std::string_view fallback) const {
  auto r = ReadAttr(rel);
  return r ? *r : std::string(fallback);
}

Result<std::vector<std::string>> SysfsRoot::ListDir(std::string_view rel) const {
  std::string path = Sys(rel);
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return FailErrno(errno, "list " + path);
  std::vector<std::string> out;
  while (const dirent* e = ::readdir(dir)) {
    std::string_view n(e->d_name);
    if (n != "." && n != "..") out.emplace_back(n);
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return NaturalLess(a, b); });
  return out;
}

bool SysfsRoot::Exists(std::string_view rel) const {
  struct stat st {};
  return ::stat(Sys(rel).c_str(), &st) == 0;
}

Result<std::string> SysfsRoot::Resolve(std::string_view rel) const {
  std::error_code ec;
  auto abs = std::filesystem::canonical(Sys(rel), ec);
  if (ec) return Fail(ErrorCode::kNotFound, "resolve " + Sys(rel) + ": " + ec.message());
  auto base = std::filesystem::canonical(Sys(""), ec);
  if (ec) return Fail(ErrorCode::kNotFound, "resolve " + Sys("") + ": " + ec.message());
  auto relpath = abs.lexically_relative(base).string();
  if (relpath.rfind("..", 0) == 0) {
    return Fail(ErrorCode::kInvalidArgument, Sys(rel) + " points outside " + Sys(""));
  }
  return relpath;
}

bool NaturalLess(std::string_view a, std::string_view b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      size_t ei = i;
      size_t ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei])) != 0) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej])) != 0) ++ej;
      // Compare digit runs by value: strip leading zeros, then length, then text.
      std::string_view ra = a.substr(i, ei - i);
      std::string_view rb = b.substr(j, ej - j);
      while (ra.size() > 1 && ra.front() == '0') ra.remove_prefix(1);
      while (rb.size() > 1 && rb.front() == '0') rb.remove_prefix(1);
      if (ra.size() != rb.size()) return ra.size() < rb.size();
      if (ra != rb) return ra < rb;
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return (a.size() - i) < (b.size() - j);
}

}  // namespace kuberdma::sysfs
