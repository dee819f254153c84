// SPDX-License-Identifier: Apache-2.0
// rdma-validate runs inside the job's image (the chart copies it there), whose glibc may be older
// than the build machine's: Ubuntu 22.04 NGC images have glibc 2.35. Its one use of a newer glibc
// is the static libstdc++'s std::random_device, which on glibc 2.36 calls arc4random; defining it
// here (on getrandom, glibc 2.25) keeps the binary at GLIBC_2.34 (tests/images checks the symbol
// versions). No header that declares arc4random is included.
#include <sys/random.h>

#include <cstdint>

extern "C" uint32_t arc4random() noexcept {
  uint32_t v = 0;
  while (getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
  }
  return v;
}
