// SPDX-License-Identifier: Apache-2.0
// This host's name, as the CNI tells the partition hook, the doctor names the node, and the
// validator names its rank and its NCCL host ID: one reading of gethostname(2) for all of them.
//
//   std::string node = !flag.empty() ? flag : HostName();
#pragma once

#include <string>

namespace kuberdma {

// The name of the UTS namespace the calling thread is in; "" when it cannot be read. A name of
// 255 bytes or more is cut at 255 (HOST_NAME_MAX is 64 on Linux, so a real name never is).
std::string HostName();

}  // namespace kuberdma
