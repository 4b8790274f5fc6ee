//===- cuda_session.cpp - device arenas, launches and graphs ----*- C++ -*-===//
//
// This file implements the cuda target's side of libmpcrt (see
// cuda_session.h): one device allocation per arena, a stream per session,
// kernel launches from a model's embedded cubin/PTX (runtime/cuda/mpc_cuda.h),
// CUDA graphs of the steps, and NCCL's all-reduce of gradient buckets. The
// libraries are loaded in cuda_libraries.cpp, GEMMs run in cuda_gemm.cpp.
//
// Nothing here needs a GPU to compile, and nothing links libcuda or
// cuBLASLt (cuda_internal.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/cuda_session.h"
#include "runtime/cuda/cuda_internal.h"
#include "runtime/cuda/mpc_cuda.h"

#include "runtime/error.h"
#include "runtime/process_group.h"
#include "runtime/session.h"

#include <dlfcn.h>

#include <algorithm>
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

using mpcrt::set_error;

using namespace mpcrt;

thread_local mpc_session *mpcrt::current_session = nullptr;


namespace {

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
  int64_t bytes = mpcrt::session_arena_bytes(session, arena);
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

/// A collective's answer in a session without a communicator: nothing to
/// do when it is not data parallel, an error once a collective has failed.
mpc_status without_communicator(const mpcrt::CudaSession *cuda) {
  if (!cuda->comm_broken)
    return MPC_OK;
  return set_error(MPC_ERROR_COMMUNICATION,
                   "data parallel: an earlier collective failed, so the "
                   "ranks are no longer in step; start the job again");
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
    // One allocation per arena, as on the host (a sharded optimizer arena
    // holds the rank's shards); at least 256 bytes so that an empty arena
    // has an address.
    size_t bytes = static_cast<size_t>(session_arena_bytes(session, a));
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
  if (model->debug_nonfinite) {
    if (mpc_status status =
            check(d.cuMemAlloc(&cuda->nonfinite, sizeof(mpc_nonfinite_record)),
                  "cuMemAlloc"))
      return status;
  }
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
#ifdef MPC_HAVE_CUDNN
  // The convolutions' cuDNN plans: a shape no engine runs is reported here.
  if (mpc_status status = cuda_plan_convolutions(session))
    return status;
#else
  if (model->num_convolutions > 0)
    return no_device("this libmpcrt was built without cuDNN's headers, so "
                     "it cannot run the model's convolutions on a GPU");
#endif
  // The initial parameters, state and optimizer arena (the loss scaler's
  // initial state is in its control block).
  return sync_device(session);
#endif
}

int64_t cuda_workspace_bytes(const CudaSession *cuda) {
#ifdef MPC_HAVE_CUDNN
  return cuda ? cuda->dnn_workspace_bytes : 0;
#else
  (void)cuda;
  return 0;
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
#ifdef MPC_HAVE_CUDNN
  if (cuda->dnn || !cuda->conv_owned.empty())
    cuda_release_convolutions(cuda);
#endif
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
  if (cuda->nonfinite)
    d.cuMemFree(cuda->nonfinite);
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

  // --debug-nonfinite: the check kernels of a step (values: not the
  // half-copy sync, which has none and keeps the last step's report) fill
  // a record on the device, cleared before the step (outside any graph),
  // and the loss scaler is read as the step finds it.
  static_assert(sizeof(mpc_nonfinite_record) % 4 == 0, "cleared in words");
  bool checksNonfinite = cuda->nonfinite && values;
  if (checksNonfinite) {
    context->nonfinite =
        reinterpret_cast<mpc_nonfinite_record *>(cuda->nonfinite);
    if (mpc_status status = check(
            d.cuMemsetD32Async(cuda->nonfinite, 0,
                               sizeof(mpc_nonfinite_record) / 4, cuda->stream),
            "cuMemsetD32Async"))
      return status;
    if (mpc_status status = check(
            d.cuMemcpyDtoHAsync(&cuda->readback->scaler,
                                cuda->arenas[MPC_ARENA_OPTIMIZER] +
                                    model->control_offset +
                                    offsetof(mpc_train_control, scaler),
                                sizeof(mpc_loss_scaler_state), cuda->stream),
            "cuMemcpyDtoHAsync"))
      return status;
  }

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
  if (checksNonfinite) {
    // A debugging build runs its steps synchronously: the report is the
    // session's once the step returns, as on the cpu target.
    if (mpc_status status = check(
            d.cuMemcpyDtoHAsync(&cuda->readback->nonfinite, cuda->nonfinite,
                                sizeof(mpc_nonfinite_record), cuda->stream),
            "cuMemcpyDtoHAsync"))
      return status;
    if (mpc_status status = wait_for_stream(cuda))
      return status;
    session->nonfinite = cuda->readback->nonfinite;
    const mpc_loss_scaler_state &scaler = cuda->readback->scaler;
    session->nonfinite_step = scaler.total_steps - scaler.total_skipped;
    session->nonfinite_loss_scale = scaler.scale;
  }
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
    int64_t bytes = session_arena_bytes(session, arena);
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

namespace {

/// Bucket `buckets_this_step` of the step is final once the kernels issued
/// so far have run: records an event on the step's stream and makes the
/// communication stream wait for it, so that the bucket is summed there
/// while backward goes on.
mpc_status start_bucket(mpcrt::CudaSession *cuda) {
  const Driver &d = driver().api;
  size_t bucket = cuda->buckets_this_step++;
  while (cuda->bucket_events.size() <= bucket) {
    CUevent event = nullptr;
    if (mpc_status status = check(
            d.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate"))
      return status;
    cuda->bucket_events.push_back(event);
  }
  CUevent ready = cuda->bucket_events[bucket];
  if (mpc_status status =
          check(d.cuEventRecord(ready, cuda->stream), "cuEventRecord"))
    return status;
  return check(d.cuStreamWaitEvent(cuda->comm_stream, ready, 0),
               "cuStreamWaitEvent");
}

} // namespace

extern "C" mpc_status mpc_rt_cuda_reduce_gradients(mpc_step_context *,
                                                   float *grads,
                                                   long long count) {
  mpcrt::CudaSession *cuda = current_session->cuda;
  if (!cuda->comm)
    return without_communicator(cuda);
  if (mpc_status status = start_bucket(cuda))
    return status;
  if (ncclResult_t result = nccl().api.allReduce(
          grads, grads, static_cast<size_t>(count), ncclFloat32, ncclSum,
          cuda->comm, cuda->comm_stream))
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: ncclAllReduce failed: %s",
                     nccl().api.getErrorString(result));
  return MPC_OK;
}

extern "C" mpc_status mpc_rt_cuda_reduce_scatter_gradients(
    mpc_step_context *context, float *flat, long long begin, long long count) {
  mpcrt::CudaSession *cuda = current_session->cuda;
  if (!cuda->comm)
    return without_communicator(cuda);
  if (mpc_status status = start_bucket(cuda))
    return status;
  const mpcrt::Nccl &n = nccl().api;
  int32_t ranks = mpcrt::process_group_size(current_session->group);
  long long capacity = context->shard_capacity;
  long long end = begin + count;
  // Rank r owns [r * capacity, (r + 1) * capacity) (shard_optimizer_state):
  // each piece of the bucket is summed on its owner alone, one group of
  // reduces (a bucket's pieces are uneven, which ncclReduceScatter's equal
  // ones are not; in all they move what a reduce-scatter moves).
  ncclResult_t result = n.groupStart();
  for (int32_t root = 0; root < ranks && result == ncclSuccess; ++root) {
    long long first = std::max(begin, root * capacity);
    long long last = std::min(end, (root + 1) * capacity);
    if (first >= last)
      continue;
    float *piece = flat + first;
    result = n.reduce(piece, piece, static_cast<size_t>(last - first),
                      ncclFloat32, ncclSum, root, cuda->comm,
                      cuda->comm_stream);
  }
  ncclResult_t ended = n.groupEnd();
  if (result == ncclSuccess)
    result = ended;
  if (result != ncclSuccess)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: reducing a gradient bucket to the ranks "
                     "that own its shards (ncclReduce) failed: %s",
                     n.getErrorString(result));
  return MPC_OK;
}

/// An in-place ncclAllReduce of `count` floats on the step's own stream:
/// the kernel after it reads the result. `operation` is ncclSum or ncclMax,
/// named `operationName` in the error.
static mpc_status all_reduce_on_step_stream(float *data, long long count,
                                            int operation,
                                            const char *operationName) {
  mpcrt::CudaSession *cuda = current_session->cuda;
  if (!cuda->comm || count <= 0)
    return MPC_OK;
  if (ncclResult_t result = nccl().api.allReduce(
          data, data, static_cast<size_t>(count), ncclFloat32, operation,
          cuda->comm, cuda->stream))
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: ncclAllReduce (%s) failed: %s",
                     operationName, nccl().api.getErrorString(result));
  return MPC_OK;
}

extern "C" mpc_status
mpc_rt_cuda_sum_across_ranks(mpc_step_context *, float *data, long long count) {
  return all_reduce_on_step_stream(data, count, ncclSum, "sum");
}

extern "C" mpc_status
mpc_rt_cuda_max_across_ranks(mpc_step_context *, float *data, long long count) {
  return all_reduce_on_step_stream(data, count, ncclMax, "max");
}

extern "C" mpc_status mpc_rt_cuda_gather_shards(mpc_step_context *context,
                                                void *data,
                                                int32_t element_bytes,
                                                long long count) {
  mpcrt::CudaSession *cuda = current_session->cuda;
  if (!cuda->comm)
    return without_communicator(cuda);
  const mpcrt::Nccl &n = nccl().api;
  int32_t ranks = mpcrt::process_group_size(current_session->group);
  long long capacity = context->shard_capacity;
  unsigned char *bytes = static_cast<unsigned char *>(data);
  // Rank r updated elements [r * capacity, (r + 1) * capacity) (the last
  // shards shorter or empty, as shard_optimizer_state cut them); it sends
  // them to every rank, all ranks in one group.
  ncclResult_t result = n.groupStart();
  for (int32_t root = 0; root < ranks && result == ncclSuccess; ++root) {
    long long begin = std::min(count, root * capacity);
    long long shard = std::min(capacity, count - begin);
    if (shard == 0)
      continue;
    unsigned char *at = bytes + begin * element_bytes;
    result = n.broadcast(at, at, static_cast<size_t>(shard * element_bytes),
                         ncclUint8, root, cuda->comm, cuda->stream);
  }
  ncclResult_t ended = n.groupEnd();
  if (result == ncclSuccess)
    result = ended;
  if (result != ncclSuccess)
    return set_error(MPC_ERROR_COMMUNICATION,
                     "data parallel: gathering the optimizer's shards "
                     "(ncclBroadcast) failed: %s",
                     n.getErrorString(result));
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
