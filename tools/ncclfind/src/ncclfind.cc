// SPDX-License-Identifier: Apache-2.0
#include "kuberdma/ncclfind/ncclfind.h"

#include <dlfcn.h>
#include <glob.h>
#include <link.h>

#include <cstdlib>

namespace kuberdma::ncclfind {

namespace {

// Where pip's NCCL wheel (nvidia-nccl-cu*) puts the library: PyTorch images built from pip
// rather than NGC's debs.
const char* const kWheelGlobs[] = {
    "/usr/local/lib/python3*/dist-packages/nvidia/nccl/lib/libnccl.so.2",
    "/usr/local/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
    "/usr/lib/python3/dist-packages/nvidia/nccl/lib/libnccl.so.2",
    "/opt/conda/lib/python3*/site-packages/nvidia/nccl/lib/libnccl.so.2",
};

std::vector<std::string> WheelCandidates() {
  std::vector<std::string> out;
  for (const char* pattern : kWheelGlobs) {
    glob_t g{};
    if (glob(pattern, 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
    }
    globfree(&g);
  }
  return out;
}

std::string OpenedPath(void* handle, const std::string& fallback) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name[0] != '\0') {
    return map->l_name;
  }
  return fallback;
}

Library Find(const char* explicit_path) {
  Library l;
  if (explicit_path != nullptr && explicit_path[0] != '\0') {
    l.handle = dlopen(explicit_path, RTLD_NOW | RTLD_GLOBAL);
    if (l.handle == nullptr) {
      l.error =
          std::string("KUBERDMA_NCCL_LIBRARY=") + explicit_path + " cannot be loaded: " + dlerror();
    } else {
      l.path = OpenedPath(l.handle, explicit_path);
    }
    return l;
  }
  l.handle = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
  if (l.handle != nullptr) {
    l.path = OpenedPath(l.handle, "libnccl.so.2");
    return l;
  }
  std::string first = dlerror();
  for (const auto& c : WheelCandidates()) {
    l.handle = dlopen(c.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (l.handle != nullptr) {
      l.path = OpenedPath(l.handle, c);
      return l;
    }
  }
  const char* ldpath = std::getenv("LD_LIBRARY_PATH");
  l.error = "NCCL is not in this image: libnccl.so.2 was not found in LD_LIBRARY_PATH (" +
            std::string(ldpath != nullptr && ldpath[0] != '\0' ? ldpath : "unset") +
            "), the loader cache (ldconfig -p) or a pip wheel (nvidia/nccl/lib) [" + first +
            "]; run from the job's own image (NGC images keep NCCL in "
            "/usr/lib/x86_64-linux-gnu) or set KUBERDMA_NCCL_LIBRARY to the library's path";
  return l;
}

}  // namespace

std::string VersionString(int code) {
  return std::to_string(code / 10000) + "." + std::to_string((code / 100) % 100) + "." +
         std::to_string(code % 100);
}

Library Open(const char* explicit_path, const std::vector<std::string>& required) {
  Library l = Find(explicit_path);
  if (!l.found()) return l;
  for (const auto& name : required) {
    if (dlsym(l.handle, name.c_str()) == nullptr) l.missing.push_back(name);
  }
  using GetVersion = int (*)(int*);
  if (auto* fn = reinterpret_cast<GetVersion>(dlsym(l.handle, "ncclGetVersion")); fn != nullptr) {
    int code = 0;
    if (fn(&code) == 0 && code > 0) l.version = VersionString(code);
  }
  if (!l.missing.empty()) {
    std::string names;
    for (const auto& m : l.missing) names += (names.empty() ? "" : ", ") + m;
    l.error = l.path + " is not a usable NCCL: it does not define " + names +
              (l.version.empty() ? "" : " (it says it is NCCL " + l.version + ")") +
              "; point KUBERDMA_NCCL_LIBRARY at NCCL 2.19 or later, or unset it";
  }
  return l;
}

}  // namespace kuberdma::ncclfind
