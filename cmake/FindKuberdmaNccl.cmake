# SPDX-License-Identifier: Apache-2.0
# Finds the CUDA runtime and NCCL headers and libraries without FindCUDAToolkit (which, in CMake
# 3.25, can fail the whole configure with CUDA 13) and without nvcc: the validator only calls the
# runtime and NCCL APIs. Sets KUBERDMA_HAVE_NCCL and two targets: kuberdma::nccl_api (headers and
# the static CUDA runtime: rdma-validate, which opens libnccl.so.2 itself) and kuberdma::nccl (also
# links libnccl: the benchmark's bare peer).
option(KUBERDMA_WITH_NCCL "Build rdma-validate's NCCL runner when CUDA and NCCL are found" ON)
set(_cuda_roots $ENV{CUDA_HOME} /usr/local/cuda /usr)
if(NOT KUBERDMA_WITH_NCCL)
  set(_cuda_roots /nonexistent)
endif()
find_path(KUBERDMA_CUDA_INCLUDE cuda_runtime.h
  PATHS ${_cuda_roots} PATH_SUFFIXES include targets/x86_64-linux/include NO_DEFAULT_PATH)
find_path(KUBERDMA_NCCL_INCLUDE nccl.h PATHS ${_cuda_roots} PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(KUBERDMA_CUDART_STATIC NAMES cudart_static
  PATHS ${_cuda_roots} PATH_SUFFIXES lib64 lib/x86_64-linux-gnu targets/x86_64-linux/lib NO_DEFAULT_PATH)
find_library(KUBERDMA_NCCL_LIB NAMES nccl
  PATHS ${_cuda_roots} PATH_SUFFIXES lib64 lib/x86_64-linux-gnu lib NO_DEFAULT_PATH)
if(KUBERDMA_CUDA_INCLUDE AND KUBERDMA_NCCL_INCLUDE AND KUBERDMA_CUDART_STATIC)
  set(KUBERDMA_HAVE_NCCL ON)
  # The CUDA runtime is linked statically (only the driver, libcuda, is needed on the node); NCCL
  # is the job image's, so the NCCL that trains is the one that is validated.
  add_library(kuberdma_nccl_api INTERFACE)
  add_library(kuberdma::nccl_api ALIAS kuberdma_nccl_api)
  target_include_directories(kuberdma_nccl_api SYSTEM INTERFACE ${KUBERDMA_CUDA_INCLUDE} ${KUBERDMA_NCCL_INCLUDE})
  target_link_libraries(kuberdma_nccl_api INTERFACE ${KUBERDMA_CUDART_STATIC} dl rt pthread)
  if(KUBERDMA_NCCL_LIB)
    add_library(kuberdma_nccl INTERFACE)
    add_library(kuberdma::nccl ALIAS kuberdma_nccl)
    target_link_libraries(kuberdma_nccl INTERFACE kuberdma_nccl_api ${KUBERDMA_NCCL_LIB})
  endif()
  message(STATUS "kube-rdma: CUDA runtime and NCCL headers found (${KUBERDMA_NCCL_INCLUDE}); "
                 "rdma-validate runs collectives on the libnccl.so.2 it finds at run time")
else()
  set(KUBERDMA_HAVE_NCCL OFF)
  message(WARNING "kube-rdma: CUDA runtime or NCCL not found; rdma-validate is built inventory-only "
                  "(looked in: ${_cuda_roots}; set CUDA_HOME)")
endif()
