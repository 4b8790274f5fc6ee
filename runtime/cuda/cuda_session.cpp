//===- cuda_session.cpp - device arenas, launches and GEMMs -----*- C++ -*-===//
//
// This file implements the cuda target's side of libmpcrt (see
// cuda_session.h): the driver API loaded with dlopen, one device allocation
// per arena, a stream per session, kernel launches from a model's embedded
// cubin/PTX (runtime/cuda/mpc_cuda.h) and GEMMs through cuBLASLt.
//
// Nothing here needs a GPU to compile, and nothing links libcuda or
// cuBLASLt; the driver API is declared below (a stable C ABI), cuBLASLt's
// types come from its header where the toolkit was found at build time.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/cuda_session.h"
#include "runtime/cuda/mpc_cuda.h"

#include "runtime/error.h"
#include "runtime/process_group.h"
#include "runtime/session.h"

#include <dlfcn.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#ifdef MPC_HAVE_CUBLASLT
#include <cublasLt.h>
#endif

using mpcrt::set_error;

namespace {

// ----------------------------------------------------------------------------
// Driver API, declared here so that the runtime builds without the toolkit.
// The names are the versioned entry points cuda.h maps its macros to.

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUstream = struct CUstream_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;
using CUevent = struct CUevent_st *;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_NOT_READY = 600;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;
constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
// Only this thread is barred from unsafe calls while it captures.
constexpr int CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;

struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuStreamCreate)(CUstream *, unsigned);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*cuMemAllocHost)(void **, size_t);
  CUresult (*cuMemFreeHost)(void *);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*cuModuleLoadData)(CUmodule *, const void *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void **,
                             void **);
  CUresult (*cuStreamBeginCapture)(CUstream, int);
  CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
  CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph,
                                          unsigned long long);
  CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
  CUresult (*cuGraphExecDestroy)(CUgraphExec);
  CUresult (*cuGraphDestroy)(CUgraph);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuEventCreate)(CUevent *, unsigned);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
};

/// The driver, loaded and initialised once per process; `error` says why
/// not ("" when it is usable).
struct LoadedDriver {
  Driver api{};
  std::string error;
};

template <typename Fn> bool bind(void *library, const char *name, Fn &fn) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  return fn != nullptr;
}

const LoadedDriver &driver() {
  static LoadedDriver loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    // $MPC_CUDA_DRIVER_LIBRARY replaces the driver (the tests' mock).
    const char *override = std::getenv("MPC_CUDA_DRIVER_LIBRARY");
    std::string name = override && *override ? override : "libcuda.so.1";
    void *library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char *reason = dlerror();
      loaded.error = "cannot load the NVIDIA driver library " + name + " (" +
                     (reason ? reason : "unknown reason") + ")";
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

// ----------------------------------------------------------------------------
// cuBLASLt, loaded with dlopen for the same reason as the driver.

#ifdef MPC_HAVE_CUBLASLT
struct Blas {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtDestroy) destroy;
  decltype(&cublasLtMatmulDescCreate) descCreate;
  decltype(&cublasLtMatmulDescDestroy) descDestroy;
  decltype(&cublasLtMatmulDescSetAttribute) descSetAttribute;
  decltype(&cublasLtMatrixLayoutCreate) layoutCreate;
  decltype(&cublasLtMatrixLayoutDestroy) layoutDestroy;
  decltype(&cublasLtMatrixLayoutSetAttribute) layoutSetAttribute;
  decltype(&cublasLtMatmulPreferenceCreate) preferenceCreate;
  decltype(&cublasLtMatmulPreferenceDestroy) preferenceDestroy;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preferenceSetAttribute;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&cublasLtMatmul) matmul;
};

struct LoadedBlas {
  Blas api{};
  std::string error;
};

const LoadedBlas &blas() {
  static LoadedBlas loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    // The major version this runtime was built against: its ABI.
    // $MPC_CUBLASLT_LIBRARY replaces it (the tests' mock).
    const char *override = std::getenv("MPC_CUBLASLT_LIBRARY");
    std::string name =
        override && *override
            ? override
            : "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
    void *library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    const char *first_error = library ? nullptr : dlerror();
    std::string reason = first_error ? first_error : "unknown reason";
#ifdef MPC_CUBLASLT_BUILD_PATH
    // Where the toolkit this runtime was built with keeps it, for machines
    // whose loader path does not list the toolkit's library directory.
    if (!library && !(override && *override)) {
      library = dlopen(MPC_CUBLASLT_BUILD_PATH, RTLD_NOW | RTLD_LOCAL);
      if (library)
        name = MPC_CUBLASLT_BUILD_PATH;
    }
#endif
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

/// Everything one GEMM shape needs, built once: descriptors and the
/// algorithm the heuristic picked.
struct GemmPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

/// What a GemmPlan depends on: types, transposes, sizes, pitches, strides,
/// batch, the pointers' alignment (algorithms need aligned operands),
/// whether C is read (beta != 0), and the bias epilogue with its vector's
/// alignment (0 without a bias) and the GELU input's (0 without GELU), and
/// the bias gradient's alignment (0 without the BGRADB epilogue) and the
/// DGELU epilogue's GELU input's (0 without it): the
/// heuristic picks an algorithm for the epilogue and the addresses it was
/// shown.
using GemmKey = std::tuple<int, int, int, int, int, int64_t, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                           int64_t, int, int, int, bool, int, int, int, int>;

/// Largest power of two (up to 256) that divides an address: the alignment
/// cuBLASLt may assume of an operand.
int alignment_of(const void *pointer) {
  uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  int alignment = 256;
  while (alignment > 1 && address % alignment != 0)
    alignment /= 2;
  return alignment;
}
#endif // MPC_HAVE_CUBLASLT

// ----------------------------------------------------------------------------
// NCCL, loaded with dlopen too: programs that never train data parallel on
// a GPU start where it is missing. Declared here (a stable C ABI, the
// toolkit's nccl.h is not needed to build).

using ncclComm_t = struct ncclComm *;
using ncclResult_t = int;
struct ncclUniqueId {
  char internal[128]; // NCCL_UNIQUE_ID_BYTES
};
constexpr ncclResult_t ncclSuccess = 0;
constexpr ncclResult_t ncclInProgress = 7;
constexpr int ncclUint8 = 1;
constexpr int ncclFloat32 = 7;
constexpr int ncclSum = 0;

struct Nccl {
  ncclResult_t (*getUniqueId)(ncclUniqueId *);
  ncclResult_t (*commInitRank)(ncclComm_t *, int, ncclUniqueId, int);
  ncclResult_t (*commDestroy)(ncclComm_t);
  ncclResult_t (*commAbort)(ncclComm_t);
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t *);
  const char *(*getErrorString)(ncclResult_t);
  ncclResult_t (*allReduce)(const void *, void *, size_t, int, int, ncclComm_t,
                            CUstream);
  ncclResult_t (*broadcast)(const void *, void *, size_t, int, int, ncclComm_t,
                            CUstream);
};

struct LoadedNccl {
  Nccl api{};
  std::string error;
};

const LoadedNccl &nccl() {
  static LoadedNccl loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    // $MPC_NCCL_LIBRARY replaces it (the tests' mock).
    const char *override = std::getenv("MPC_NCCL_LIBRARY");
    std::string name = override && *override ? override : "libnccl.so.2";
    void *library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      const char *reason = dlerror();
      loaded.error = "data parallel on the cuda target needs NCCL: cannot "
                     "load " +
                     name + " (" + (reason ? reason : "unknown reason") +
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
#undef MPC_BIND
    if (missing)
      loaded.error = name + " has no " + missing;
  });
  return loaded;
}

} // namespace

namespace mpcrt {

/// What a step function's work depends on besides the session's fixed
/// buffers: its host code branches on apply_update and, with gradient
/// accumulation, on the micro-batch. Everything else that changes between
/// steps is read from the control block (mpc_step_values).
using StepVariant = std::tuple<mpc_step_fn, int32_t, int32_t>;

/// A step variant's graph: none until its second run.
struct CapturedStep {
  bool warmed_up = false;
  CUgraphExec graph = nullptr;
};

/// What a step leaves for the host, copied into page-locked memory so that
/// the copy does not wait for the step: the host reads it at its next
/// synchronisation.
struct StepReadback {
  float loss;
  int32_t index_error;
};

struct CudaSession {
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr arenas[MPC_NUM_ARENAS] = {0, 0, 0, 0};
  CUdeviceptr index_error = 0;
  bool capture_graphs = false;
  std::map<StepVariant, CapturedStep> graphs;
  StepReadback *readback = nullptr; // page-locked
  // A step's index_error is on its way to `readback` and not yet checked.
  bool index_check_pending = false;
  // The device has changed what the host mirror holds since the last
  // sync_host.
  bool host_stale = false;
  std::vector<std::pair<const mpc_cuda_image *, CUmodule>> modules;
  // Data parallel (cuda_join_nccl): gradient buckets are all-reduced on
  // `comm_stream`, each after an event recorded on `stream` right after
  // the kernel that finishes it; `reduced`, recorded on `comm_stream`
  // after the last bucket, is what the optimizer waits for.
  ncclComm_t comm = nullptr;
  CUstream comm_stream = nullptr;
  std::vector<CUevent> bucket_events;
  CUevent reduced = nullptr;
  size_t buckets_this_step = 0;
  double timeout_seconds = 0;
  bool comm_broken = false;
  std::unordered_map<const char *, CUfunction> functions;
#ifdef MPC_HAVE_CUBLASLT
  cublasLtHandle_t blas = nullptr;
  std::map<GemmKey, GemmPlan> gemms;
#endif
};

} // namespace mpcrt

namespace {

/// The session whose step runs on this thread: generated step functions
/// reach it through mpc_rt_cuda_launch / mpc_rt_cuda_gemm.
thread_local mpc_session *current_session = nullptr;

mpc_status check(CUresult result, const char *what) {
  if (result == CUDA_SUCCESS)
    return MPC_OK;
  return set_error(MPC_ERROR_INTERNAL, "CUDA error in %s: %s", what,
                   cuda_error_text(result).c_str());
}

mpc_status no_device(const std::string &reason) {
  return set_error(MPC_ERROR_NO_DEVICE, "no CUDA device: %s", reason.c_str());
}

mpc_status upload_arena(mpc_session *session, int arena) {
  mpcrt::CudaSession *cuda = session->cuda;
  int64_t bytes = session->model->arena_bytes[arena];
  if (bytes == 0)
    return MPC_OK;
  return check(driver().api.cuMemcpyHtoDAsync(
                   cuda->arenas[arena], session->arenas[arena],
                   static_cast<size_t>(bytes), cuda->stream),
               "cuMemcpyHtoDAsync");
}

/// Makes the session's context current on the calling thread: sessions
/// may be used from any thread, one at a time.
mpc_status activate(mpcrt::CudaSession *cuda) {
  return check(driver().api.cuCtxSetCurrent(cuda->context), "cuCtxSetCurrent");
}

/// Whether the index-error flag the last step copied to the host is set
/// (the stream has been waited for); a set flag is cleared on the device
/// for the steps to come. Kernels only ever set the flag, so it holds
/// "some step since the last clear".
bool take_index_error(mpcrt::CudaSession *cuda) {
  if (!cuda->readback->index_error)
    return false;
  cuda->readback->index_error = 0;
  driver().api.cuMemsetD32Async(cuda->index_error, 0, 1, cuda->stream);
  return true;
}

/// Gives the communicator up after a failure: NCCL's kernels of a
/// collective whose peers are gone would otherwise wait forever.
void abort_communicator(mpcrt::CudaSession *cuda) {
  if (cuda->comm)
    nccl().api.commAbort(cuda->comm);
  cuda->comm = nullptr;
  cuda->comm_broken = true;
}

/// Waits for the session's stream. With a communicator, polls it against
/// the collective timeout instead: a rank that never joins an all-reduce
/// leaves NCCL's kernel spinning, and only the host can give up on it.
mpc_status wait_for_stream(mpcrt::CudaSession *cuda) {
  const Driver &d = driver().api;
  if (!cuda->comm)
    return check(d.cuStreamSynchronize(cuda->stream), "cuStreamSynchronize");
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(cuda->timeout_seconds);
  for (int spins = 0;; ++spins) {
    CUresult result = d.cuStreamQuery(cuda->stream);
    if (result == CUDA_SUCCESS)
      return MPC_OK;
    if (result != CUDA_ERROR_NOT_READY)
      return check(result, "cuStreamQuery");
    ncclResult_t async = ncclSuccess;
    nccl().api.commGetAsyncError(cuda->comm, &async);
    if (async != ncclSuccess && async != ncclInProgress) {
      std::string text = nccl().api.getErrorString(async);
      abort_communicator(cuda);
      return set_error(MPC_ERROR_COMMUNICATION,
                       "data parallel: an NCCL collective failed: %s",
                       text.c_str());
    }
    if (std::chrono::steady_clock::now() > deadline) {
      abort_communicator(cuda);
      return set_error(MPC_ERROR_COMMUNICATION,
                       "data parallel: the step's NCCL collectives did not "
                       "finish within %g s: a rank failed, hung or was "
                       "killed (NCCL does not say which); the communicator "
                       "is aborted",
                       cuda->timeout_seconds);
    }
    if (spins > 1000)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

/// Waits for the session's stream. A step whose index_error nobody has
/// looked at yet (it ran without reading its loss) is checked here: kernels
/// run asynchronously, so that is the first moment the host can know.
mpc_status synchronize(mpcrt::CudaSession *cuda) {
  if (mpc_status status = wait_for_stream(cuda))
    return status;
  if (cuda->index_check_pending) {
    cuda->index_check_pending = false;
    if (take_index_error(cuda))
      return set_error(MPC_ERROR_OUT_OF_RANGE,
                       "an earlier step met an index outside its range (a "
                       "cuda step that does not read its loss is checked at "
                       "the next call that waits for the GPU)");
  }
  return MPC_OK;
}

/// Images of the models linked into this program, by model name
/// (mpc_rt_cuda_register_image).
std::mutex registry_mutex;
std::vector<const mpc_cuda_image *> &registry() {
  static std::vector<const mpc_cuda_image *> images;
  return images;
}

/// `image` loaded into the session's context (once).
mpc_status load_module(mpcrt::CudaSession *cuda, const mpc_cuda_image *image,
                       CUmodule *module) {
  for (const auto &[loaded_image, loaded_module] : cuda->modules)
    if (loaded_image == image) {
      *module = loaded_module;
      return MPC_OK;
    }
  // The cubin runs on GPUs of its major architecture from its minor up;
  // elsewhere the driver compiles the PTX.
  const Driver &d = driver().api;
  CUresult result = d.cuModuleLoadData(module, image->cubin);
  if (result != CUDA_SUCCESS)
    result = d.cuModuleLoadData(module, image->ptx);
  if (result != CUDA_SUCCESS)
    return set_error(MPC_ERROR_NO_DEVICE,
                     "no CUDA device: model '%s' was compiled for sm_%d and "
                     "neither its cubin nor its PTX loads on this GPU: %s",
                     image->model, image->sm_version,
                     cuda_error_text(result).c_str());
  cuda->modules.emplace_back(image, *module);
  return MPC_OK;
}

/// The function `name` of `image` in the current session's context.
mpc_status find_function(mpcrt::CudaSession *cuda, const mpc_cuda_image *image,
                         const char *name, CUfunction *function) {
  auto cached = cuda->functions.find(name);
  if (cached != cuda->functions.end()) {
    *function = cached->second;
    return MPC_OK;
  }
  const Driver &d = driver().api;
  CUmodule module = nullptr;
  if (mpc_status status = load_module(cuda, image, &module))
    return status;
  const char *symbol = nullptr;
  for (int32_t i = 0; i < image->num_kernels && !symbol; ++i)
    if (std::strcmp(image->kernels[i].name, name) == 0)
      symbol = image->kernels[i].symbol;
  if (!symbol)
    return set_error(MPC_ERROR_INTERNAL, "model '%s' has no kernel '%s'",
                     image->model, name);
  if (mpc_status status = check(d.cuModuleGetFunction(function, module, symbol),
                                "cuModuleGetFunction"))
    return status;
  cuda->functions.emplace(name, *function);
  return MPC_OK;
}

/// Records `step`'s launches and GEMMs on the session's stream as a graph,
/// instantiates it into `*graph` and launches it. A failing step, or work
/// that cannot be captured, ends the capture and reports why.
mpc_status capture_and_launch(mpcrt::CudaSession *cuda, mpc_step_fn step,
                              mpc_step_context *context, CUgraphExec *graph) {
  const Driver &d = driver().api;
  if (mpc_status status =
          check(d.cuStreamBeginCapture(cuda->stream,
                                       CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                "cuStreamBeginCapture"))
    return status;
  mpc_status returned = step(context);
  CUgraph captured = nullptr;
  CUresult ended = d.cuStreamEndCapture(cuda->stream, &captured);
  if (captured && (returned != MPC_OK || ended != CUDA_SUCCESS))
    d.cuGraphDestroy(captured);
  if (returned != MPC_OK)
    return set_error(returned,
                     "while capturing the step as a CUDA graph: %s; create "
                     "the session with cuda_graphs = 0 to launch its kernels "
                     "one by one",
                     mpc_last_error());
  if (ended != CUDA_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "cannot capture the step as a CUDA graph (%s); create "
                     "the session with cuda_graphs = 0 to launch its "
                     "kernels one by one",
                     cuda_error_text(ended).c_str());
  CUresult instantiated = d.cuGraphInstantiateWithFlags(graph, captured, 0);
  d.cuGraphDestroy(captured);
  if (instantiated != CUDA_SUCCESS) {
    *graph = nullptr;
    return set_error(MPC_ERROR_INTERNAL,
                     "cannot instantiate the step's CUDA graph: %s",
                     cuda_error_text(instantiated).c_str());
  }
  return check(d.cuGraphLaunch(*graph, cuda->stream), "cuGraphLaunch");
}

} // namespace

namespace mpcrt {

mpc_status cuda_session_create(mpc_session *session, int32_t device,
                               bool capture_graphs) {
  const LoadedDriver &loaded = driver();
  if (!loaded.error.empty())
    return no_device(loaded.error);
  const Driver &d = loaded.api;
  int count = 0;
  if (CUresult result = d.cuDeviceGetCount(&count))
    return no_device("cuDeviceGetCount failed: " + cuda_error_text(result));
  if (count == 0)
    return no_device("the driver sees no GPU");
  if (device < 0 || device >= count)
    return no_device("device " + std::to_string(device) +
                     " was asked for; this machine has " +
                     std::to_string(count) + " (0.." +
                     std::to_string(count - 1) + ")");
#ifndef MPC_HAVE_CUBLASLT
  return no_device("this libmpcrt was built without the CUDA toolkit's "
                   "cuBLASLt headers, so it cannot run GEMMs on a GPU");
#else
  const LoadedBlas &loaded_blas = blas();
  if (!loaded_blas.error.empty())
    return no_device(loaded_blas.error);

  CudaSession *cuda = new CudaSession;
  cuda->capture_graphs = capture_graphs;
  session->cuda = cuda;
  // From here on, mpc_session_destroy (which the caller runs on failure)
  // releases whatever was made.
  if (mpc_status status =
          check(d.cuDeviceGet(&cuda->device, device), "cuDeviceGet"))
    return status;
  if (mpc_status status =
          check(d.cuDevicePrimaryCtxRetain(&cuda->context, cuda->device),
                "cuDevicePrimaryCtxRetain"))
    return status;
  if (mpc_status status =
          check(d.cuCtxSetCurrent(cuda->context), "cuCtxSetCurrent"))
    return status;
  if (mpc_status status =
          check(d.cuStreamCreate(&cuda->stream, CU_STREAM_NON_BLOCKING),
                "cuStreamCreate"))
    return status;
  const mpc_model_desc *model = session->model;
  for (int a = 0; a < MPC_NUM_ARENAS; ++a) {
    // One allocation per arena, as on the host; at least 256 bytes so that
    // an empty arena has an address.
    size_t bytes = static_cast<size_t>(model->arena_bytes[a]);
    if (CUresult result = d.cuMemAlloc(&cuda->arenas[a], bytes ? bytes : 256))
      return set_error(MPC_ERROR_OUT_OF_MEMORY,
                       "cannot allocate %zu bytes on the GPU for an arena of "
                       "model '%s': %s",
                       bytes, model->name, cuda_error_text(result).c_str());
    if (mpc_status status =
            check(d.cuMemsetD8(cuda->arenas[a], 0, bytes ? bytes : 256),
                  "cuMemsetD8"))
      return status;
  }
  if (mpc_status status = check(
          d.cuMemAlloc(&cuda->index_error, sizeof(int32_t)), "cuMemAlloc"))
    return status;
  if (mpc_status status = check(d.cuMemsetD8(cuda->index_error, 0, 4),
                                "cuMemsetD8"))
    return status;
  void *readback = nullptr;
  if (mpc_status status = check(d.cuMemAllocHost(&readback, sizeof(StepReadback)),
                                "cuMemAllocHost"))
    return status;
  cuda->readback = static_cast<StepReadback *>(readback);
  if (cublasStatus_t result = blas().api.create(&cuda->blas))
    return no_device("cublasLtCreate failed (status " +
                     std::to_string(static_cast<int>(result)) + ")");
  // Load the model's kernels now, if its image registered itself, so that
  // a GPU that cannot run them is reported here.
  const mpc_cuda_image *image = nullptr;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (const mpc_cuda_image *candidate : registry())
      if (std::strcmp(candidate->model, model->name) == 0)
        image = candidate;
  }
  CUmodule module = nullptr;
  if (image)
    if (mpc_status status = load_module(cuda, image, &module))
      return status;
  // The initial parameters, state and optimizer arena (the loss scaler's
  // initial state is in its control block).
  return sync_device(session);
#endif
}

void cuda_session_destroy(CudaSession *cuda) {
  if (!cuda)
    return;
  const Driver &d = driver().api;
  if (cuda->context)
    d.cuCtxSetCurrent(cuda->context);
  if (cuda->stream && wait_for_stream(cuda) != MPC_OK)
    abort_communicator(cuda);
  if (cuda->comm)
    nccl().api.commDestroy(cuda->comm);
  for (CUevent event : cuda->bucket_events)
    d.cuEventDestroy(event);
  if (cuda->reduced)
    d.cuEventDestroy(cuda->reduced);
  if (cuda->comm_stream)
    d.cuStreamDestroy(cuda->comm_stream);
#ifdef MPC_HAVE_CUBLASLT
  for (auto &[key, plan] : cuda->gemms) {
    blas().api.layoutDestroy(plan.a);
    blas().api.layoutDestroy(plan.b);
    blas().api.layoutDestroy(plan.c);
    blas().api.descDestroy(plan.desc);
  }
  if (cuda->blas)
    blas().api.destroy(cuda->blas);
#endif
  for (const auto &[variant, captured] : cuda->graphs)
    if (captured.graph)
      d.cuGraphExecDestroy(captured.graph);
  if (cuda->readback)
    d.cuMemFreeHost(cuda->readback);
  for (const auto &[image, module] : cuda->modules)
    d.cuModuleUnload(module);
  for (CUdeviceptr arena : cuda->arenas)
    if (arena)
      d.cuMemFree(arena);
  if (cuda->index_error)
    d.cuMemFree(cuda->index_error);
  if (cuda->stream)
    d.cuStreamDestroy(cuda->stream);
  if (cuda->context)
    d.cuDevicePrimaryCtxRelease(cuda->device);
  delete cuda;
}

mpc_status cuda_upload_inputs(mpc_session *session, const void *const *inputs) {
  CudaSession *cuda = session->cuda;
  const mpc_model_desc *model = session->model;
  if (mpc_status status = activate(cuda))
    return status;
  for (int32_t i = 0; i < model->num_inputs; ++i) {
    const mpc_tensor_desc &input = model->inputs[i];
    if (mpc_status status =
            check(driver().api.cuMemcpyHtoDAsync(
                      cuda->arenas[input.arena] + input.offset, inputs[i],
                      static_cast<size_t>(tensor_bytes(input)), cuda->stream),
                  "cuMemcpyHtoDAsync"))
      return status;
  }
  return MPC_OK;
}

mpc_status cuda_run_step(mpc_session *session, mpc_step_fn step,
                         mpc_step_context *context,
                         const mpc_step_values *values, float *loss,
                         int32_t *index_error) {
  CudaSession *cuda = session->cuda;
  const Driver &d = driver().api;
  const mpc_model_desc *model = session->model;
  for (int a = 0; a < MPC_NUM_ARENAS; ++a)
    context->arenas[a] = reinterpret_cast<void *>(cuda->arenas[a]);
  context->index_error = reinterpret_cast<int32_t *>(cuda->index_error);
  *index_error = 0;
  // A step that failed before its last bucket left the count behind.
  cuda->buckets_this_step = 0;
  if (mpc_status status = activate(cuda))
    return status;
  // Steps before this one whose index errors the host has not seen yet:
  // the flag is sticky, so what this step reads back covers them too.
  bool unchecked_before = cuda->index_check_pending;
  // From pageable memory: the call returns once it has taken the bytes.
  if (values)
    if (mpc_status status = check(
            d.cuMemcpyHtoDAsync(cuda->arenas[MPC_ARENA_OPTIMIZER] +
                                    model->control_offset +
                                    offsetof(mpc_train_control, values),
                                values, sizeof(*values), cuda->stream),
            "cuMemcpyHtoDAsync"))
      return status;

  current_session = session;
  mpc_status returned = MPC_OK;
  if (!values || !cuda->capture_graphs) {
    returned = step(context);
  } else {
    CapturedStep &captured = cuda->graphs[StepVariant{
        step, context->apply_update, context->micro_step}];
    if (captured.graph) {
      returned = check(d.cuGraphLaunch(captured.graph, cuda->stream),
                       "cuGraphLaunch");
    } else if (!captured.warmed_up) {
      // The first run loads the kernels and builds the GEMM plans, which
      // are host work a capture must not contain.
      captured.warmed_up = true;
      returned = step(context);
    } else {
      returned = capture_and_launch(cuda, step, context, &captured.graph);
    }
  }
  current_session = nullptr;
  // Whatever the step did (even a failing one) may have changed the
  // device's arenas.
  cuda->host_stale = true;
  if (returned != MPC_OK)
    return returned;

  if (mpc_status status = check(
          d.cuMemcpyDtoHAsync(&cuda->readback->index_error, cuda->index_error,
                              sizeof(int32_t), cuda->stream),
          "cuMemcpyDtoHAsync"))
    return status;
  if (!loss) {
    // Nothing to wait for: the step runs on while the host goes on.
    cuda->index_check_pending = true;
    return MPC_OK;
  }
  if (mpc_status status =
          check(d.cuMemcpyDtoHAsync(&cuda->readback->loss,
                                    cuda->arenas[MPC_ARENA_ACTIVATIONS] +
                                        model->outputs[0].offset,
                                    sizeof(float), cuda->stream),
                "cuMemcpyDtoHAsync"))
    return status;
  if (mpc_status status = wait_for_stream(cuda))
    return status;
  cuda->index_check_pending = false;
  if (take_index_error(cuda))
    *index_error = unchecked_before ? 2 : 1;
  *loss = cuda->readback->loss;
  return MPC_OK;
}

mpc_status cuda_download(mpc_session *session, int32_t arena, int64_t offset,
                         void *data, int64_t bytes) {
  CudaSession *cuda = session->cuda;
  if (bytes == 0)
    return MPC_OK;
  if (mpc_status status = activate(cuda))
    return status;
  if (mpc_status status = check(driver().api.cuMemcpyDtoHAsync(
                                    data, cuda->arenas[arena] + offset,
                                    static_cast<size_t>(bytes), cuda->stream),
                                "cuMemcpyDtoHAsync"))
    return status;
  return synchronize(cuda);
}

mpc_status sync_host(mpc_session *session) {
  CudaSession *cuda = session->cuda;
  if (!cuda || !cuda->host_stale)
    return MPC_OK;
  if (mpc_status status = activate(cuda))
    return status;
  for (int arena : {MPC_ARENA_PARAMS, MPC_ARENA_GRADS, MPC_ARENA_OPTIMIZER}) {
    int64_t bytes = session->model->arena_bytes[arena];
    if (bytes == 0)
      continue;
    if (mpc_status status =
            check(driver().api.cuMemcpyDtoHAsync(
                      session->arenas[arena], cuda->arenas[arena],
                      static_cast<size_t>(bytes), cuda->stream),
                  "cuMemcpyDtoHAsync"))
      return status;
  }
  if (mpc_status status = synchronize(cuda))
    return status;
  cuda->host_stale = false;
  return MPC_OK;
}

mpc_status cuda_join_nccl(mpc_session *session, process_group *group,
                          double timeout_seconds) {
  CudaSession *cuda = session->cuda;
  const LoadedNccl &loaded = nccl();
  if (!loaded.error.empty())
    return set_error(MPC_ERROR_COMMUNICATION, "%s", loaded.error.c_str());
  const Nccl &n = loaded.api;
  const Driver &d = driver().api;
  if (mpc_status status = activate(cuda))
    return status;
  // Rank 0 makes the communicator's id; the process group carries it to
  // the others (MPI: the way NCCL's own examples bootstrap).
  ncclUniqueId id{};
  int32_t rank = process_group_rank(group);
  int32_t size = process_group_size(group);
  if (rank == 0)
    if (ncclResult_t result = n.getUniqueId(&id))
      return set_error(MPC_ERROR_COMMUNICATION,
                       "data parallel: ncclGetUniqueId failed: %s",
                       n.getErrorString(result));
  if (mpc_status status = process_group_broadcast(group, &id, sizeof(id)))
    return status;
  if (ncclResult_t result = n.commInitRank(&cuda->comm, size, id, rank)) {
    cuda->comm = nullptr;
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: ncclCommInitRank (rank %d of %d) "
                     "failed: %s",
                     rank, size, n.getErrorString(result));
  }
  cuda->timeout_seconds = timeout_seconds;
  if (mpc_status status =
          check(d.cuStreamCreate(&cuda->comm_stream, CU_STREAM_NON_BLOCKING),
                "cuStreamCreate"))
    return status;
  return check(d.cuEventCreate(&cuda->reduced, CU_EVENT_DISABLE_TIMING),
               "cuEventCreate");
}

mpc_status cuda_broadcast_from_rank0(mpc_session *session, int32_t arena,
                                     int64_t offset, int64_t bytes) {
  CudaSession *cuda = session->cuda;
  if (mpc_status status = activate(cuda))
    return status;
  if (!cuda->comm)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: an earlier collective failed, so the "
                     "ranks are no longer in step; start the job again");
  CUdeviceptr data = cuda->arenas[arena] + static_cast<CUdeviceptr>(offset);
  if (ncclResult_t result = nccl().api.broadcast(
          reinterpret_cast<void *>(data), reinterpret_cast<void *>(data),
          static_cast<size_t>(bytes), ncclUint8, 0, cuda->comm, cuda->stream))
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: ncclBroadcast failed: %s",
                     nccl().api.getErrorString(result));
  cuda->host_stale = true;
  return MPC_OK;
}

mpc_status sync_device(mpc_session *session) {
  CudaSession *cuda = session->cuda;
  if (!cuda)
    return MPC_OK;
  if (mpc_status status = activate(cuda))
    return status;
  if (mpc_status status = upload_arena(session, MPC_ARENA_PARAMS))
    return status;
  if (mpc_status status = upload_arena(session, MPC_ARENA_OPTIMIZER))
    return status;
  return synchronize(cuda);
}

} // namespace mpcrt

// ----------------------------------------------------------------------------
// Called by generated code (runtime/cuda/mpc_cuda.h)

extern "C" mpc_status mpc_rt_cuda_reduce_gradients(mpc_step_context *,
                                                   float *grads,
                                                   long long count) {
  mpcrt::CudaSession *cuda = current_session->cuda;
  if (!cuda->comm)
    return cuda->comm_broken
               ? set_error(MPC_ERROR_COMMUNICATION,
                           "data parallel: an earlier collective failed, so "
                           "the ranks are no longer in step; start the job "
                           "again")
               : MPC_OK;
  const Driver &d = driver().api;
  size_t bucket = cuda->buckets_this_step++;
  while (cuda->bucket_events.size() <= bucket) {
    CUevent event = nullptr;
    if (mpc_status status = check(
            d.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate"))
      return status;
    cuda->bucket_events.push_back(event);
  }
  // The bucket is final once the kernels issued so far have run: the
  // communication stream starts on it then, while backward goes on.
  CUevent ready = cuda->bucket_events[bucket];
  if (mpc_status status =
          check(d.cuEventRecord(ready, cuda->stream), "cuEventRecord"))
    return status;
  if (mpc_status status =
          check(d.cuStreamWaitEvent(cuda->comm_stream, ready, 0),
                "cuStreamWaitEvent"))
    return status;
  if (ncclResult_t result = nccl().api.allReduce(
          grads, grads, static_cast<size_t>(count), ncclFloat32, ncclSum,
          cuda->comm, cuda->comm_stream))
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: ncclAllReduce failed: %s",
                     nccl().api.getErrorString(result));
  return MPC_OK;
}

extern "C" mpc_status mpc_rt_cuda_gradients_reduced(mpc_step_context *) {
  mpcrt::CudaSession *cuda = current_session->cuda;
  if (!cuda->comm || cuda->buckets_this_step == 0)
    return MPC_OK;
  cuda->buckets_this_step = 0;
  // Everything after this (the optimizer) waits for the last bucket.
  const Driver &d = driver().api;
  if (mpc_status status = check(
          d.cuEventRecord(cuda->reduced, cuda->comm_stream), "cuEventRecord"))
    return status;
  return check(d.cuStreamWaitEvent(cuda->stream, cuda->reduced, 0),
               "cuStreamWaitEvent");
}

extern "C" void mpc_rt_cuda_register_image(const mpc_cuda_image *image) {
  if (!image || !image->model)
    return;
  std::lock_guard<std::mutex> lock(registry_mutex);
  registry().push_back(image);
}

extern "C" const mpc_cuda_host_kernel *
mpc_rt_cuda_host_kernel(const char *symbol) {
  if (!symbol)
    return nullptr;
  std::lock_guard<std::mutex> lock(registry_mutex);
  for (const mpc_cuda_image *image : registry()) {
    if (!image->host_kernels)
      continue;
    for (int32_t i = 0; i < image->num_kernels; ++i) {
      if (std::strcmp(image->kernels[i].symbol, symbol) != 0)
        continue;
      for (const mpc_cuda_host_kernel *host = image->host_kernels; host->name;
           ++host)
        if (std::strcmp(host->name, image->kernels[i].name) == 0)
          return host;
    }
  }
  return nullptr;
}

extern "C" mpc_status mpc_rt_cuda_launch(const mpc_cuda_image *image,
                                         const char *name, int64_t grid,
                                         int32_t block, void **args) {
  mpc_session *session = current_session;
  if (!session || !session->cuda)
    return set_error(MPC_ERROR_INTERNAL,
                     "mpc_rt_cuda_launch: no cuda step is running on this "
                     "thread");
  if (grid < 1 || grid > 0x7fffffff || block < 1 || block > 1024)
    return set_error(MPC_ERROR_INTERNAL,
                     "kernel '%s': launch of %lld blocks of %d threads is "
                     "out of range",
                     name, static_cast<long long>(grid), block);
  mpcrt::CudaSession *cuda = session->cuda;
  CUfunction function = nullptr;
  if (mpc_status status = find_function(cuda, image, name, &function))
    return status;
  CUresult result = driver().api.cuLaunchKernel(
      function, static_cast<unsigned>(grid), 1, 1, static_cast<unsigned>(block),
      1, 1, 0, cuda->stream, args, nullptr);
  if (result != CUDA_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL, "cannot launch kernel '%s': %s", name,
                     cuda_error_text(result).c_str());
  return MPC_OK;
}

namespace {

/// mpc_rt_cuda_gemm, with a non-null `bias` mpc_rt_cuda_gemm_bias (then
/// beta is 0), and with a `gelu_input` too mpc_rt_cuda_gemm_bias_gelu (C is
/// then the GELU's output, `gelu_input` cuBLASLt's auxiliary output, laid
/// out as C): the row-major GEMM as a cached cuBLASLt plan, on the current
/// session's stream, with the model's planned workspace. `entry` names the
/// caller in messages.
mpc_status cuda_gemm(const char *entry, mpc_dtype a_type, mpc_dtype b_type,
                     mpc_dtype c_type, int32_t trans_a, int32_t trans_b,
                     int64_t m, int64_t n, int64_t k, float alpha,
                     const void *a, int64_t lda, int64_t stride_a,
                     const void *b, int64_t ldb, int64_t stride_b, float beta,
                     const void *bias, void *c, int64_t ldc, int64_t stride_c,
                     int64_t batch, void *gelu_input = nullptr,
                     float *bias_grad = nullptr,
                     const void *dgelu_input = nullptr) {
  mpc_session *session = current_session;
  if (!session || !session->cuda)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: no cuda step is running on this thread", entry);
#ifndef MPC_HAVE_CUBLASLT
  (void)a_type, (void)b_type, (void)c_type, (void)trans_a, (void)trans_b;
  (void)m, (void)n, (void)k, (void)alpha, (void)a, (void)lda, (void)stride_a;
  (void)b, (void)ldb, (void)stride_b, (void)beta, (void)bias, (void)c;
  (void)ldc, (void)stride_c, (void)batch, (void)gelu_input, (void)bias_grad;
  (void)dgelu_input;
  return set_error(MPC_ERROR_NO_DEVICE, "no CUDA device: built without "
                                        "cuBLASLt");
#else
  if (m == 0 || n == 0 || batch == 0)
    return MPC_OK;
  auto data_type = [](mpc_dtype dtype) {
    return dtype == MPC_F16    ? CUDA_R_16F
           : dtype == MPC_BF16 ? CUDA_R_16BF
                               : CUDA_R_32F;
  };
  if (!mpcrt::dtype_is_float(a_type) || !mpcrt::dtype_is_float(b_type) ||
      !mpcrt::dtype_is_float(c_type) || m < 0 || n < 0 || k < 1 || batch < 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: bad arguments (dtypes %s, %s, %s; m %lld, n %lld, "
                     "k %lld, batch %lld)",
                     entry, mpcrt::dtype_name(a_type),
                     mpcrt::dtype_name(b_type), mpcrt::dtype_name(c_type),
                     static_cast<long long>(m), static_cast<long long>(n),
                     static_cast<long long>(k), static_cast<long long>(batch));
  // cuBLASLt multiplies operands of one type (fp32 compute for all).
  if (a_type != b_type)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cuBLASLt needs A and B of one type, got %s and %s",
                     entry, mpcrt::dtype_name(a_type),
                     mpcrt::dtype_name(b_type));
  mpcrt::CudaSession *cuda = session->cuda;
  const Blas &lt = blas().api;
  // The workspace is a region of the activation arena that the compiler
  // planned for the target's architecture (none: 0 bytes).
  const mpc_model_desc *model = session->model;
  uint64_t workspace_bytes = static_cast<uint64_t>(model->gemm_workspace_bytes);
  void *workspace =
      workspace_bytes == 0
          ? nullptr
          : reinterpret_cast<void *>(cuda->arenas[MPC_ARENA_ACTIVATIONS] +
                                     model->gemm_workspace_offset);

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T, and a
  // row-major matrix read column-major is its transpose: so cuBLASLt's
  // first operand is our B buffer and its second our A buffer, each with
  // the transpose flag we were given. D = C^T is n x m: its rows are our
  // columns, so the epilogue's bias (one value per row of D) is our
  // bias[j], broadcast over our rows.
  GemmKey key{a_type,
              b_type,
              c_type,
              trans_a,
              trans_b,
              m,
              n,
              k,
              lda,
              ldb,
              ldc,
              stride_a,
              stride_b,
              stride_c,
              batch,
              alignment_of(a),
              alignment_of(b),
              alignment_of(c),
              beta != 0,
              bias ? alignment_of(bias) : 0,
              gelu_input ? alignment_of(gelu_input) : 0,
              bias_grad ? alignment_of(bias_grad) : 0,
              dgelu_input ? alignment_of(dgelu_input) : 0};
  auto found = cuda->gemms.find(key);
  if (found == cuda->gemms.end()) {
    GemmPlan plan;
    cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cudaDataType_t scale_type = CUDA_R_32F;
    bool ok =
        lt.descCreate(&plan.desc, CUBLAS_COMPUTE_32F, scale_type) ==
            CUBLAS_STATUS_SUCCESS &&
        lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                            sizeof(op_first)) == CUBLAS_STATUS_SUCCESS &&
        lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                            sizeof(op_second)) == CUBLAS_STATUS_SUCCESS &&
        // First operand: our B, stored (trans_b ? n x k : k x n) row-major.
        lt.layoutCreate(&plan.a, data_type(b_type), trans_b ? k : n,
                        trans_b ? n : k, ldb) == CUBLAS_STATUS_SUCCESS &&
        // Second operand: our A, stored (trans_a ? k x m : m x k) row-major.
        lt.layoutCreate(&plan.b, data_type(a_type), trans_a ? m : k,
                        trans_a ? k : m, lda) == CUBLAS_STATUS_SUCCESS &&
        lt.layoutCreate(&plan.c, data_type(c_type), n, m, ldc) ==
            CUBLAS_STATUS_SUCCESS;
    if (ok && bias) {
      // Set before the heuristic, which picks algorithms for the epilogue
      // and takes the bias's alignment from its pointer. The bias has C's
      // type (what cuBLASLt assumes by default; said outright here).
      cublasLtEpilogue_t epilogue =
          gelu_input ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
      int32_t bias_type = data_type(c_type);
      ok = lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                               &epilogue,
                               sizeof(epilogue)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                               &bias_type,
                               sizeof(bias_type)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                               &bias, sizeof(bias)) == CUBLAS_STATUS_SUCCESS;
      if (ok && gelu_input) {
        // The GELU's input, of C's type, with C's leading dimension.
        int64_t aux_ld = ldc;
        int32_t aux_type = data_type(c_type);
        ok = lt.descSetAttribute(plan.desc,
                                 CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                 &aux_type,
                                 sizeof(aux_type)) == CUBLAS_STATUS_SUCCESS &&
             lt.descSetAttribute(plan.desc,
                                 CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                 sizeof(aux_ld)) == CUBLAS_STATUS_SUCCESS &&
             lt.descSetAttribute(plan.desc,
                                 CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                                 &gelu_input,
                                 sizeof(gelu_input)) == CUBLAS_STATUS_SUCCESS;
      }
    }
    if (ok && bias_grad) {
      // BGRADB sums cuBLASLt's second operand, our A, over k: one f32 per
      // column of D, which is one per row of our C.
      cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BGRADB;
      int32_t bias_type = CUDA_R_32F;
      ok = lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                               &epilogue,
                               sizeof(epilogue)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                               &bias_type,
                               sizeof(bias_type)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                               &bias_grad,
                               sizeof(bias_grad)) == CUBLAS_STATUS_SUCCESS;
    }
    if (ok && dgelu_input) {
      // DGELU: D = product * gelu'(aux), the aux the GELU's input the
      // forward GELU_AUX_BIAS epilogue stored, of C's type and layout.
      cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DGELU;
      int64_t aux_ld = ldc;
      int32_t aux_type = data_type(c_type);
      ok = lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                               &epilogue,
                               sizeof(epilogue)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(
               plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
               &aux_type, sizeof(aux_type)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
                               &aux_ld,
                               sizeof(aux_ld)) == CUBLAS_STATUS_SUCCESS &&
           lt.descSetAttribute(
               plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
               &dgelu_input, sizeof(dgelu_input)) == CUBLAS_STATUS_SUCCESS;
    }
    if (ok && batch > 1) {
      int32_t count = static_cast<int32_t>(batch);
      struct {
        cublasLtMatrixLayout_t layout;
        int64_t stride;
      } layouts[] = {
          {plan.a, stride_b}, {plan.b, stride_a}, {plan.c, stride_c}};
      for (auto &entry : layouts)
        ok = ok &&
             lt.layoutSetAttribute(entry.layout,
                                   CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                   sizeof(count)) == CUBLAS_STATUS_SUCCESS &&
             lt.layoutSetAttribute(
                 entry.layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                 &entry.stride, sizeof(entry.stride)) == CUBLAS_STATUS_SUCCESS;
    }
    cublasLtMatmulPreference_t preference = nullptr;
    cublasLtMatmulHeuristicResult_t heuristic{};
    int results = 0;
    if (ok) {
      uint32_t align_first = alignment_of(b), align_second = alignment_of(a),
               align_c = alignment_of(c);
      ok = lt.preferenceCreate(&preference) == CUBLAS_STATUS_SUCCESS &&
           lt.preferenceSetAttribute(
               preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
               &workspace_bytes,
               sizeof(workspace_bytes)) == CUBLAS_STATUS_SUCCESS &&
           lt.preferenceSetAttribute(
               preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
               &align_first, sizeof(align_first)) == CUBLAS_STATUS_SUCCESS &&
           lt.preferenceSetAttribute(
               preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
               &align_second, sizeof(align_second)) == CUBLAS_STATUS_SUCCESS &&
           lt.preferenceSetAttribute(
               preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
               sizeof(align_c)) == CUBLAS_STATUS_SUCCESS &&
           lt.preferenceSetAttribute(
               preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
               sizeof(align_c)) == CUBLAS_STATUS_SUCCESS &&
           lt.heuristic(cuda->blas, plan.desc, plan.a, plan.b, plan.c, plan.c,
                        preference, 1, &heuristic,
                        &results) == CUBLAS_STATUS_SUCCESS &&
           results > 0;
    }
    if (preference)
      lt.preferenceDestroy(preference);
    if (!ok) {
      if (plan.a)
        lt.layoutDestroy(plan.a);
      if (plan.b)
        lt.layoutDestroy(plan.b);
      if (plan.c)
        lt.layoutDestroy(plan.c);
      if (plan.desc)
        lt.descDestroy(plan.desc);
      return set_error(MPC_ERROR_INTERNAL,
                       "cuBLASLt has no algorithm for a %s x %s -> %s GEMM%s "
                       "(m %lld, n %lld, k %lld, batch %lld)",
                       mpcrt::dtype_name(a_type), mpcrt::dtype_name(b_type),
                       mpcrt::dtype_name(c_type),
                       gelu_input    ? " with bias and GELU"
                       : bias        ? " with bias"
                       : bias_grad   ? " with the bias gradient"
                       : dgelu_input ? " with the GELU gradient"
                                     : "",
                       static_cast<long long>(m), static_cast<long long>(n),
                       static_cast<long long>(k),
                       static_cast<long long>(batch));
    }
    plan.algo = heuristic.algo;
    found = cuda->gemms.emplace(key, plan).first;
  }
  const GemmPlan &plan = found->second;
  // A plan is shared by every bias of its alignment: point it at this one.
  if (bias && lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                  &bias, sizeof(bias)) != CUBLAS_STATUS_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cannot set cuBLASLt's bias pointer", entry);
  if (bias_grad && lt.descSetAttribute(
                       plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_grad,
                       sizeof(bias_grad)) != CUBLAS_STATUS_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cannot set cuBLASLt's bias gradient pointer", entry);
  if (dgelu_input &&
      lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                          &dgelu_input,
                          sizeof(dgelu_input)) != CUBLAS_STATUS_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cannot set cuBLASLt's GELU input pointer", entry);
  if (gelu_input &&
      lt.descSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                          &gelu_input,
                          sizeof(gelu_input)) != CUBLAS_STATUS_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "%s: cannot set cuBLASLt's GELU input pointer", entry);
  cublasStatus_t status =
      lt.matmul(cuda->blas, plan.desc, &alpha, b, plan.a, a, plan.b, &beta, c,
                plan.c, c, plan.c, &plan.algo, workspace, workspace_bytes,
                reinterpret_cast<cudaStream_t>(cuda->stream));
  if (status != CUBLAS_STATUS_SUCCESS)
    return set_error(MPC_ERROR_INTERNAL,
                     "cublasLtMatmul failed (status %d) for m %lld, n %lld, "
                     "k %lld",
                     static_cast<int>(status), static_cast<long long>(m),
                     static_cast<long long>(n), static_cast<long long>(k));
  return MPC_OK;
#endif
}

} // namespace

extern "C" mpc_status
mpc_rt_cuda_gemm(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                 int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                 int64_t k, float alpha, const void *a, int64_t lda,
                 int64_t stride_a, const void *b, int64_t ldb, int64_t stride_b,
                 float beta, void *c, int64_t ldc, int64_t stride_c,
                 int64_t batch) {
  return cuda_gemm("mpc_rt_cuda_gemm", a_type, b_type, c_type, trans_a, trans_b,
                   m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta,
                   /*bias=*/nullptr, c, ldc, stride_c, batch);
}

extern "C" mpc_status
mpc_rt_cuda_gemm_bias(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                      int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                      int64_t k, float alpha, const void *a, int64_t lda,
                      int64_t stride_a, const void *b, int64_t ldb,
                      int64_t stride_b, const void *bias, void *c, int64_t ldc,
                      int64_t stride_c, int64_t batch) {
  if (!bias && m > 0 && n > 0 && batch > 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_bias: bias is null");
  return cuda_gemm("mpc_rt_cuda_gemm_bias", a_type, b_type, c_type, trans_a,
                   trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b,
                   /*beta=*/0.0f, bias, c, ldc, stride_c, batch);
}

extern "C" mpc_status mpc_rt_cuda_gemm_bias_gelu(
    mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type, int32_t trans_a,
    int32_t trans_b, int64_t m, int64_t n, int64_t k, float alpha,
    const void *a, int64_t lda, int64_t stride_a, const void *b, int64_t ldb,
    int64_t stride_b, const void *bias, void *c, int64_t ldc, int64_t stride_c,
    int64_t batch, void *gelu_out) {
  if ((!bias || !gelu_out) && m > 0 && n > 0 && batch > 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_bias_gelu: %s is null",
                     bias ? "gelu_out" : "bias");
  // cuBLASLt's GELU input leading dimension must be a multiple of 8; one
  // matrix (its batched auxiliary output is not wired up).
  if (ldc % 8 != 0 || batch > 1)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_bias_gelu: needs ldc a multiple of 8 "
                     "and one matrix (ldc %lld, batch %lld)",
                     static_cast<long long>(ldc),
                     static_cast<long long>(batch));
  // D is the GELU's output; the epilogue's auxiliary output, C here, the
  // GELU's input.
  return cuda_gemm("mpc_rt_cuda_gemm_bias_gelu", a_type, b_type, c_type,
                   trans_a, trans_b, m, n, k, alpha, a, lda, stride_a, b, ldb,
                   stride_b, /*beta=*/0.0f, bias, gelu_out, ldc, stride_c,
                   batch, /*gelu_input=*/c);
}

extern "C" mpc_status
mpc_rt_cuda_gemm_bgrad(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                       int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                       int64_t k, float alpha, const void *a, int64_t lda,
                       const void *b, int64_t ldb, void *c, int64_t ldc,
                       float *bias_grad) {
  if (!bias_grad && m > 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_bgrad: bias_grad is null");
  return cuda_gemm("mpc_rt_cuda_gemm_bgrad", a_type, b_type, c_type, trans_a,
                   trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0,
                   /*beta=*/0.0f, /*bias=*/nullptr, c, ldc, 0, /*batch=*/1,
                   /*gelu_input=*/nullptr, bias_grad);
}

extern "C" mpc_status
mpc_rt_cuda_gemm_dgelu(mpc_dtype a_type, mpc_dtype b_type, mpc_dtype c_type,
                       int32_t trans_a, int32_t trans_b, int64_t m, int64_t n,
                       int64_t k, float alpha, const void *a, int64_t lda,
                       const void *b, int64_t ldb, const void *gelu_input,
                       void *c, int64_t ldc) {
  if (!gelu_input && m > 0 && n > 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_dgelu: gelu_input is null");
  // cuBLASLt's rule for the auxiliary input's leading dimension.
  if (ldc % 8 != 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_rt_cuda_gemm_dgelu: needs ldc a multiple of 8 "
                     "(ldc %lld)",
                     static_cast<long long>(ldc));
  return cuda_gemm("mpc_rt_cuda_gemm_dgelu", a_type, b_type, c_type, trans_a,
                   trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0,
                   /*beta=*/0.0f, /*bias=*/nullptr, c, ldc, 0, /*batch=*/1,
                   /*gelu_input=*/nullptr, /*bias_grad=*/nullptr, gelu_input);
}
