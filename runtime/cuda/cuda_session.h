//===- cuda_session.h - the device side of a cuda session -------*- C++ -*-===//
//
// Internal to libmpcrt. A session of a model compiled for the cuda target
// keeps its arenas twice: on the device, where the steps run, and in the
// host buffers of mpc_session (the "mirror"), which parameter access and
// checkpoints read and write exactly as on the cpu target, so checkpoints
// have one format on both targets. The mirror is brought up to date lazily:
//   - sync_host before the host reads parameters, gradients or optimizer
//     state (a step has changed them on the device);
//   - sync_device after the host has written them.
// On the cpu target every function here is a no-op that returns MPC_OK.
//
// libcuda and cuBLASLt are loaded with dlopen, never linked: a program that
// links libmpcrt starts on machines without a driver, and creating a cuda
// session there fails with MPC_ERROR_NO_DEVICE ("no CUDA device: ...").
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_CUDA_CUDA_SESSION_H
#define MPC_RUNTIME_CUDA_CUDA_SESSION_H

#include "runtime/mpc_model.h"

namespace mpcrt {

struct CudaSession;
struct process_group; // runtime/process_group.h

/// Opens device `device` for `session` (whose host arenas are allocated and
/// initialised), allocates its device arenas and uploads the host arenas.
/// Sets session->cuda. MPC_ERROR_NO_DEVICE when there is no driver, no GPU
/// or no such device. `capture_graphs`: run steps as CUDA graphs
/// (mpc_session_options.cuda_graphs).
mpc_status cuda_session_create(mpc_session *session, int32_t device,
                               bool capture_graphs);
void cuda_session_destroy(CudaSession *cuda);
/// Device memory the session allocated beyond its arenas: the workspace of
/// its own that cuDNN plans larger than the planned one share.
int64_t cuda_workspace_bytes(const CudaSession *cuda);

/// Copies the inputs to their places in the device activation arena.
mpc_status cuda_upload_inputs(mpc_session *session, const void *const *inputs);
/// Runs `step` on the session's stream with device arenas in `context`.
/// `values` (null for steps that read none, such as sync_half_copies) are
/// written to the control block first. With `loss`, waits for the step
/// and sets `*loss` and `*index_error` (1: the step met an index outside
/// its range; 2: it or an earlier step that did not wait did); without,
/// returns while the step runs, and its index error is reported by the
/// next call that waits for the GPU. A step with values runs as a CUDA graph where the session
/// captures graphs: one graph per step function, apply_update and
/// micro-batch, captured on that variant's second run (the first loads
/// its kernels and plans its GEMMs outside any capture).
mpc_status cuda_run_step(mpc_session *session, mpc_step_fn step,
                         mpc_step_context *context,
                         const mpc_step_values *values, float *loss,
                         int32_t *index_error);
/// Copies `bytes` at `offset` of device arena `arena` to `data`.
mpc_status cuda_download(mpc_session *session, int32_t arena, int64_t offset,
                         void *data, int64_t bytes);

/// Data parallel: joins the NCCL communicator of `group`'s ranks (rank 0's
/// id travels through the group) and makes the communication stream the
/// gradient buckets are all-reduced on (mpc_rt_cuda_reduce_gradients).
/// Waits for the GPU poll against `timeout_seconds` from then on.
mpc_status cuda_join_nccl(mpc_session *session, process_group *group,
                          double timeout_seconds);
/// Every rank's `bytes` at `offset` of device arena `arena` become rank
/// 0's (ncclBroadcast on the session's stream).
mpc_status cuda_broadcast_from_rank0(mpc_session *session, int32_t arena,
                                     int64_t offset, int64_t bytes);

/// Brings the host mirror of the params, grads and optimizer arenas up to
/// date (after steps ran on the device).
mpc_status sync_host(mpc_session *session);
/// Copies the host's params and optimizer arenas to the device (after the
/// host changed them).
mpc_status sync_device(mpc_session *session);

} // namespace mpcrt

#endif // MPC_RUNTIME_CUDA_CUDA_SESSION_H
