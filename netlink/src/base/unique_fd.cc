// SPDX-License-Identifier: Apache-2.0
// UniqueFd's one out-of-line operation.
#include "kuberdma/base/unique_fd.h"

#include <unistd.h>

namespace kuberdma {

void UniqueFd::Reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

}  // namespace kuberdma
