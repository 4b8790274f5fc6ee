//===- cuda_internal.h - cuda libraries and sessions ------------*- C++ -*-===//
//
// Internal to libmpcrt's cuda target: the driver API, cuBLASLt and NCCL as
// loaded with dlopen (cuda_libraries.cpp), and what a cuda session holds,
// shared by the session (cuda_session.cpp) and its GEMMs (cuda_gemm.cpp).
//
// Nothing here needs the toolkit: the driver API and NCCL are declared
// below (stable C ABIs); cuBLASLt's types come from its header where the
// toolkit was found at build time (MPC_HAVE_CUBLASLT).
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_CUDA_CUDA_INTERNAL_H
#define MPC_RUNTIME_CUDA_CUDA_INTERNAL_H

#include "runtime/cuda/mpc_cuda.h"
#include "runtime/session.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#ifdef MPC_HAVE_CUBLASLT
#include <cublasLt.h>
#endif
#ifdef MPC_HAVE_CUDNN
#include <cudnn_graph.h>
#endif

namespace mpcrt {

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


/// The driver, loaded (dlopen) and initialised once per process.
const LoadedDriver &driver();

/// A CUresult as the driver's text and number.
std::string cuda_error_text(CUresult result);

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

/// cuBLASLt, loaded once per process.
const LoadedBlas &blas();

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
/// DGELU epilogue's GELU input's (0 without it), and the bias gradient's
/// type: the heuristic picks an algorithm for the epilogue and the
/// addresses it was shown.
using GemmKey =
    std::tuple<int, int, int, int, int, int64_t, int64_t, int64_t, int64_t,
               int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int,
               int, bool, int, int, int, int, int>;

#endif // MPC_HAVE_CUBLASLT

// ----------------------------------------------------------------------------
// cuDNN's graph API (libcudnn_graph), loaded with dlopen for the same
// reason, by sessions of models with convolutions.

#ifdef MPC_HAVE_CUDNN
struct Dnn {
  decltype(&cudnnGetVersion) getVersion;
  decltype(&cudnnGetErrorString) errorString;
  decltype(&cudnnGetLastErrorString) lastErrorString;
  decltype(&cudnnCreate) create;
  decltype(&cudnnDestroy) destroy;
  decltype(&cudnnSetStream) setStream;
  decltype(&cudnnBackendCreateDescriptor) createDescriptor;
  decltype(&cudnnBackendDestroyDescriptor) destroyDescriptor;
  decltype(&cudnnBackendSetAttribute) setAttribute;
  decltype(&cudnnBackendGetAttribute) getAttribute;
  decltype(&cudnnBackendFinalize) finalize;
  decltype(&cudnnBackendExecute) execute;
};

struct LoadedDnn {
  Dnn api{};
  std::string error;
};

/// cuDNN, loaded once per process ($MPC_CUDNN_LIBRARY replaces it).
const LoadedDnn &dnn();

/// A convolution's execution plan, built once per distinct mpc_conv_desc
/// (cuda_conv.cpp), and a call of the model's table that runs it.
struct ConvPlan {
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace_bytes = 0;
  /// The plan's workspace is larger than the model's planned one (the
  /// cuBLASLt region): it runs in the session's own cuDNN workspace.
  bool own_workspace = false;
  std::string engine; // "engine 12 (heuristic mode A)", for messages
};
struct ConvCall {
  ConvPlan *plan = nullptr;
  /// A variant pack per set of pointers the call was made with (the train
  /// step's and evaluation's buffers differ), built on first use.
  struct Pack {
    const void *pointers[3];
    cudnnBackendDescriptor_t descriptor;
  };
  std::vector<Pack> packs;
};

/// Builds cuDNN's operation graph of one direction of `desc` (tensors,
/// convolution, operation, graph), every descriptor finalised and appended
/// to `owned`, the graph last; on failure, says why in `why` (cuDNN's own
/// words where it has some). What cuda sessions plan from, with their
/// handle (which tells the heuristics the device), and what the tests check
/// against the real library on machines without a GPU, with none.
bool describe_convolution(const Dnn &api, const mpc_conv_desc &desc,
                          std::vector<cudnnBackendDescriptor_t> &owned,
                          std::string &why, cudnnHandle_t handle = nullptr);
#endif // MPC_HAVE_CUDNN

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
constexpr int ncclMax = 2;

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
  ncclResult_t (*reduce)(const void *, void *, size_t, int, int, int,
                         ncclComm_t, CUstream);
  ncclResult_t (*groupStart)();
  ncclResult_t (*groupEnd)();
};

struct LoadedNccl {
  Nccl api{};
  std::string error;
};

/// NCCL, loaded once per process.
const LoadedNccl &nccl();

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
  // --debug-nonfinite: the step's record, and the loss scaler as the step
  // found it (which step of training, which scale).
  mpc_nonfinite_record nonfinite;
  mpc_loss_scaler_state scaler;
};

struct CudaSession {
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  CUdeviceptr arenas[MPC_NUM_ARENAS] = {0, 0, 0, 0};
  CUdeviceptr index_error = 0;
  // --debug-nonfinite: the record the check kernels fill (0: not built).
  CUdeviceptr nonfinite = 0;
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
#ifdef MPC_HAVE_CUDNN
  // Models with convolutions: one plan per distinct descriptor (keyed by
  // its bytes, origin left out), and each table entry's call.
  cudnnHandle_t dnn = nullptr;
  std::map<std::string, ConvPlan> conv_plans;
  std::vector<ConvCall> convs;
  // Every descriptor the plans were built from, in creation order.
  std::vector<cudnnBackendDescriptor_t> conv_owned;
  // The workspace of plans that need more than the planned one: the
  // largest of them, allocated once the plans are chosen (0 if none).
  CUdeviceptr dnn_workspace = 0;
  int64_t dnn_workspace_bytes = 0;
#endif
};

/// Builds the execution plans of the session's model's convolutions
/// (cuda_conv.cpp); an error names the first convolution cuDNN has no
/// engine for. Nothing to do for models without convolutions.
mpc_status cuda_plan_convolutions(mpc_session *session);
/// Releases what cuda_plan_convolutions made.
void cuda_release_convolutions(CudaSession *cuda);

/// The session whose step runs on this thread: generated step functions
/// reach it through mpc_rt_cuda_launch / mpc_rt_cuda_gemm.
extern thread_local mpc_session *current_session;

} // namespace mpcrt

#endif // MPC_RUNTIME_CUDA_CUDA_INTERNAL_H
