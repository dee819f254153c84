# SPDX-License-Identifier: Apache-2.0
# Finds the CUDA runtime and NCCL headers and libraries without FindCUDAToolkit (which, in CMake
# 3.25, can fail the whole configure with CUDA 13) and without nvcc: the validator only calls the
# runtime and NCCL APIs. Sets KUBERDMA_HAVE_NCCL and the imported target kuberdma::nccl.
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
if(KUBERDMA_CUDA_INCLUDE AND KUBERDMA_NCCL_INCLUDE AND KUBERDMA_CUDART_STATIC AND KUBERDMA_NCCL_LIB)
  set(KUBERDMA_HAVE_NCCL ON)
  add_library(kuberdma_nccl INTERFACE)
  add_library(kuberdma::nccl ALIAS kuberdma_nccl)
  target_include_directories(kuberdma_nccl SYSTEM INTERFACE ${KUBERDMA_CUDA_INCLUDE} ${KUBERDMA_NCCL_INCLUDE})
  # The CUDA runtime is linked statically (only the driver, libcuda, is needed on the node); NCCL
  # dynamically, so the node's NCCL is the one that runs.
  target_link_libraries(kuberdma_nccl INTERFACE ${KUBERDMA_CUDART_STATIC} ${KUBERDMA_NCCL_LIB} dl rt pthread)
  message(STATUS "kube-rdma: NCCL found (${KUBERDMA_NCCL_LIB}); rdma-validate runs AllReduce")
else()
  set(KUBERDMA_HAVE_NCCL OFF)
  message(WARNING "kube-rdma: CUDA runtime or NCCL not found; rdma-validate is built inventory-only "
                  "(looked in: ${_cuda_roots}; set CUDA_HOME)")
endif()
