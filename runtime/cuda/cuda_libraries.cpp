//===- cuda_libraries.cpp - the driver, cuBLASLt, NCCL ----------*- C++ -*-===//
//
// This file loads the cuda target's libraries with dlopen, each once per
// process, so that libmpcrt links none of them and programs that never
// use the cuda target start where they are missing. $MPC_CUDA_DRIVER_LIBRARY,
// $MPC_CUBLASLT_LIBRARY, $MPC_CUDNN_LIBRARY and $MPC_NCCL_LIBRARY replace
// them (the tests' mocks).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/cuda_internal.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace mpcrt {

namespace {

template <typename Fn> bool bind(void *library, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  return fn != nullptr;
}

/// Opens the library $`override_variable` names where it is set, else
/// `default_name` from the loader's path, else `build_path` (where the
/// toolkit this runtime was built with keeps it, for machines whose loader
/// path does not list the toolkit's library directory; none: null). `name`
/// is what was opened, or first tried; `reason` why that failed.
void *open_library(const char *override_variable,
                   const std::string &default_name, const char *build_path,
                   std::string &name, std::string &reason) {
  const char *override = std::getenv(override_variable);
  bool overridden = override && *override;
  name = overridden ? override : default_name;
  void *library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library)
    return library;
  const char *error = dlerror();
  reason = error ? error : "unknown reason";
  if (!overridden && build_path) {
    library = dlopen(build_path, RTLD_NOW | RTLD_LOCAL);
    if (library)
      name = build_path;
  }
  return library;
}

} // namespace

const LoadedDriver &driver() {
  static LoadedDriver loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    // $MPC_CUDA_DRIVER_LIBRARY replaces the driver (the tests' mock).
    std::string name, reason;
    void *library = open_library("MPC_CUDA_DRIVER_LIBRARY", "libcuda.so.1",
                                 nullptr, name, reason);
    if (!library) {
      loaded.error =
          "cannot load the NVIDIA driver library " + name + " (" + reason + ")";
      return;
    }
    Driver &d = loaded.api;
    const char *missing = nullptr;
#define MPC_BIND(field, symbol)                                                \
  if (!missing && !bind(library, symbol, d.field))                             \
    missing = symbol;
    MPC_BIND(cuInit, "cuInit")
    MPC_BIND(cuGetErrorString, "cuGetErrorString")
    MPC_BIND(cuDeviceGetCount, "cuDeviceGetCount")
    MPC_BIND(cuDeviceGet, "cuDeviceGet")
    MPC_BIND(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
    MPC_BIND(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
    MPC_BIND(cuCtxSetCurrent, "cuCtxSetCurrent")
    MPC_BIND(cuStreamCreate, "cuStreamCreate")
    MPC_BIND(cuStreamDestroy, "cuStreamDestroy_v2")
    MPC_BIND(cuStreamSynchronize, "cuStreamSynchronize")
    MPC_BIND(cuMemAlloc, "cuMemAlloc_v2")
    MPC_BIND(cuMemFree, "cuMemFree_v2")
    MPC_BIND(cuMemsetD8, "cuMemsetD8_v2")
    MPC_BIND(cuMemsetD32Async, "cuMemsetD32Async")
    MPC_BIND(cuMemAllocHost, "cuMemAllocHost_v2")
    MPC_BIND(cuMemFreeHost, "cuMemFreeHost")
    MPC_BIND(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")
    MPC_BIND(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")
    MPC_BIND(cuModuleLoadData, "cuModuleLoadData")
    MPC_BIND(cuModuleUnload, "cuModuleUnload")
    MPC_BIND(cuModuleGetFunction, "cuModuleGetFunction")
    MPC_BIND(cuLaunchKernel, "cuLaunchKernel")
    MPC_BIND(cuStreamBeginCapture, "cuStreamBeginCapture_v2")
    MPC_BIND(cuStreamEndCapture, "cuStreamEndCapture")
    MPC_BIND(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")
    MPC_BIND(cuGraphLaunch, "cuGraphLaunch")
    MPC_BIND(cuGraphExecDestroy, "cuGraphExecDestroy")
    MPC_BIND(cuGraphDestroy, "cuGraphDestroy")
    MPC_BIND(cuStreamQuery, "cuStreamQuery")
    MPC_BIND(cuEventCreate, "cuEventCreate")
    MPC_BIND(cuEventDestroy, "cuEventDestroy_v2")
    MPC_BIND(cuEventRecord, "cuEventRecord")
    MPC_BIND(cuStreamWaitEvent, "cuStreamWaitEvent")
#undef MPC_BIND
    if (missing) {
      loaded.error = name + " has no " + missing + " (the driver is too old)";
      return;
    }
    if (CUresult result = d.cuInit(0)) {
      const char *text = nullptr;
      d.cuGetErrorString(result, &text);
      loaded.error =
          "cuInit failed: " + std::string(text ? text : "unknown error") +
          " (" + std::to_string(result) + ")";
    }
  });
  return loaded;
}

std::string cuda_error_text(CUresult result) {
  const char *text = nullptr;
  if (driver().api.cuGetErrorString)
    driver().api.cuGetErrorString(result, &text);
  return std::string(text ? text : "unknown CUDA error") + " (" +
         std::to_string(result) + ")";
}

#ifdef MPC_HAVE_CUBLASLT
const LoadedBlas &blas() {
  static LoadedBlas loaded;
  static std::once_flag once;
  std::call_once(once, [] {
  // The major version this runtime was built against: its ABI.
  // $MPC_CUBLASLT_LIBRARY replaces it (the tests' mock).
#ifdef MPC_CUBLASLT_BUILD_PATH
    const char *build_path = MPC_CUBLASLT_BUILD_PATH;
#else
    const char *build_path = nullptr;
#endif
    std::string name, reason;
    void *library =
        open_library("MPC_CUBLASLT_LIBRARY",
                     "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR),
                     build_path, name, reason);
    if (!library) {
      loaded.error = "cannot load " + name + " (" + reason +
                     "); add the CUDA toolkit's library directory to "
                     "LD_LIBRARY_PATH";
      return;
    }
    Blas &b = loaded.api;
    const char *missing = nullptr;
#define MPC_BIND(field, symbol)                                                \
  if (!missing && !bind(library, #symbol, b.field))                            \
    missing = #symbol;
    MPC_BIND(create, cublasLtCreate)
    MPC_BIND(destroy, cublasLtDestroy)
    MPC_BIND(descCreate, cublasLtMatmulDescCreate)
    MPC_BIND(descDestroy, cublasLtMatmulDescDestroy)
    MPC_BIND(descSetAttribute, cublasLtMatmulDescSetAttribute)
    MPC_BIND(layoutCreate, cublasLtMatrixLayoutCreate)
    MPC_BIND(layoutDestroy, cublasLtMatrixLayoutDestroy)
    MPC_BIND(layoutSetAttribute, cublasLtMatrixLayoutSetAttribute)
    MPC_BIND(preferenceCreate, cublasLtMatmulPreferenceCreate)
    MPC_BIND(preferenceDestroy, cublasLtMatmulPreferenceDestroy)
    MPC_BIND(preferenceSetAttribute, cublasLtMatmulPreferenceSetAttribute)
    MPC_BIND(heuristic, cublasLtMatmulAlgoGetHeuristic)
    MPC_BIND(matmul, cublasLtMatmul)
#undef MPC_BIND
    if (missing)
      loaded.error = name + " has no " + missing;
  });
  return loaded;
}
#endif // MPC_HAVE_CUBLASLT

#ifdef MPC_HAVE_CUDNN
const LoadedDnn &dnn() {
  static LoadedDnn loaded;
  static std::once_flag once;
  std::call_once(once, [] {
  // The graph API's library of the major version this runtime was built
  // against (it loads cuDNN's engine libraries from its own directory).
#ifdef MPC_CUDNN_BUILD_PATH
    const char *build_path = MPC_CUDNN_BUILD_PATH;
#else
    const char *build_path = nullptr;
#endif
    std::string name, reason;
    void *library = open_library(
        "MPC_CUDNN_LIBRARY", "libcudnn_graph.so." + std::to_string(CUDNN_MAJOR),
        build_path, name, reason);
    if (!library) {
      loaded.error = "the model's convolutions need cuDNN " +
                     std::to_string(CUDNN_MAJOR) + ": cannot load " + name +
                     " (" + reason +
                     "); add cuDNN's library directory to LD_LIBRARY_PATH";
      return;
    }
    Dnn &d = loaded.api;
    const char *missing = nullptr;
#define MPC_BIND(field, symbol)                                                \
  if (!missing && !bind(library, #symbol, d.field))                            \
    missing = #symbol;
    MPC_BIND(getVersion, cudnnGetVersion)
    MPC_BIND(errorString, cudnnGetErrorString)
    MPC_BIND(lastErrorString, cudnnGetLastErrorString)
    MPC_BIND(create, cudnnCreate)
    MPC_BIND(destroy, cudnnDestroy)
    MPC_BIND(setStream, cudnnSetStream)
    MPC_BIND(createDescriptor, cudnnBackendCreateDescriptor)
    MPC_BIND(destroyDescriptor, cudnnBackendDestroyDescriptor)
    MPC_BIND(setAttribute, cudnnBackendSetAttribute)
    MPC_BIND(getAttribute, cudnnBackendGetAttribute)
    MPC_BIND(finalize, cudnnBackendFinalize)
    MPC_BIND(execute, cudnnBackendExecute)
#undef MPC_BIND
    if (missing) {
      loaded.error = name + " has no " + missing;
      return;
    }
    // The same major version: its descriptors' ABI.
    size_t version = d.getVersion();
    if (version / 10000 != CUDNN_MAJOR)
      loaded.error = name + " is cuDNN " + std::to_string(version) +
                     "; this runtime was built for major version " +
                     std::to_string(CUDNN_MAJOR);
  });
  return loaded;
}
#endif // MPC_HAVE_CUDNN

const LoadedNccl &nccl() {
  static LoadedNccl loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    // $MPC_NCCL_LIBRARY replaces it (the tests' mock).
    std::string name, reason;
    void *library =
        open_library("MPC_NCCL_LIBRARY", "libnccl.so.2", nullptr, name, reason);
    if (!library) {
      loaded.error = "data parallel on the cuda target needs NCCL: cannot "
                     "load " +
                     name + " (" + reason +
                     "); add the CUDA toolkit's library directory to "
                     "LD_LIBRARY_PATH";
      return;
    }
    Nccl &n = loaded.api;
    const char *missing = nullptr;
#define MPC_BIND(field, symbol)                                                \
  if (!missing && !bind(library, #symbol, n.field))                            \
    missing = #symbol;
    MPC_BIND(getUniqueId, ncclGetUniqueId)
    MPC_BIND(commInitRank, ncclCommInitRank)
    MPC_BIND(commDestroy, ncclCommDestroy)
    MPC_BIND(commAbort, ncclCommAbort)
    MPC_BIND(commGetAsyncError, ncclCommGetAsyncError)
    MPC_BIND(getErrorString, ncclGetErrorString)
    MPC_BIND(allReduce, ncclAllReduce)
    MPC_BIND(broadcast, ncclBroadcast)
    MPC_BIND(reduce, ncclReduce)
    MPC_BIND(groupStart, ncclGroupStart)
    MPC_BIND(groupEnd, ncclGroupEnd)
#undef MPC_BIND
    if (missing)
      loaded.error = name + " has no " + missing;
  });
  return loaded;
}

} // namespace mpcrt
