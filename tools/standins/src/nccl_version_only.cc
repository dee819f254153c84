// SPDX-License-Identifier: Apache-2.0
// NCCL's stand-in (nccl_standin): a library that says it is NCCL 2.28.3 and defines nothing
// else: what rdma-doctor reports, and what rdma-validate must refuse (exit 2 naming the missing
// entry points) rather than abort on.
extern "C" __attribute__((visibility("default"))) int ncclGetVersion(int* version) {
  *version = 22803;
  return 0;
}
