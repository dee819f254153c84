// SPDX-License-Identifier: Apache-2.0
// This host's name (host.h).
#include "kuberdma/base/host.h"

#include <unistd.h>

namespace kuberdma {

std::string HostName() {
  char buf[256] = {};
  // gethostname(2) may leave a cut name unterminated: the last byte stays 0.
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

}  // namespace kuberdma
