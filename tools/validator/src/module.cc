// SPDX-License-Identifier: Apache-2.0
#include "kuberdma/validator/module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>

namespace kuberdma::validator {

namespace {

std::string ExeDir() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

}  // namespace

Result<void*> ModuleSymbol(const std::string& file, const char* symbol, const std::string& needs) {
  std::string where;
  std::string last;
  void* lib = nullptr;
  for (const std::string& p :
       {ExeDir() + "/" + file, ExeDir() + "/../lib/kube-rdma/" + file, file}) {
    lib = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
    where += (where.empty() ? "" : ", ") + p;
    if (const char* e = ::dlerror()) last = e;
  }
  if (lib == nullptr) {
    return Fail(ErrorCode::kUnsupported, "cannot load " + file + " (tried " + where +
                                             "; last: " + last + "; it needs " + needs + ")");
  }
  void* fn = ::dlsym(lib, symbol);
  if (fn == nullptr) return Fail(ErrorCode::kUnsupported, file + " has no " + symbol);
  return fn;
}

}  // namespace kuberdma::validator
