//===- session.h - what a session holds -------------------------*- C++ -*-===//
//
// Internal to libmpcrt: the definition behind the opaque mpc_session, shared
// by mpc_runtime.cpp (create), steps.cpp (steps, params) and checkpoint.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_SESSION_H
#define MPC_RUNTIME_SESSION_H

#include "runtime/mpc_model.h"

namespace mpcrt {
struct CudaSession;   // runtime/cuda/cuda_session.h
struct process_group; // runtime/process_group.h
class thread_pool;    // runtime/thread_pool.h
} // namespace mpcrt

struct mpc_session {
  const mpc_model_desc *model;
  // One 64-byte-aligned, zero-initialised buffer per arena; never null (an
  // empty arena gets a small buffer so that generated code may form
  // pointers into it).
  void *arenas[MPC_NUM_ARENAS];
  uint64_t seed;
  // Hyper-parameters with the model's defaults resolved.
  float learning_rate;
  float momentum;
  float weight_decay;
  // mpc_train_step calls so far (micro-batches with accumulation): the
  // dropout counter. Optimizer steps, applied and skipped, are counted in
  // the training control block on the device.
  int64_t step;
  // --debug-nonfinite: the last step's first offender, the optimizer step
  // it ran at, and whether it was a training step (see nonfinite.cpp).
  mpc_nonfinite_record nonfinite;
  int64_t nonfinite_step;
  float nonfinite_loss_scale; // the scale the step ran with
  int32_t nonfinite_training;
  // Gradient elements that were inf or NaN after the last
  // mpc_compute_gradients (mpc_training_stats.gradients_nonfinite).
  int64_t gradients_nonfinite;
  // Data parallel: whether the gradient arena holds the sum over the ranks
  // (mpc_compute_gradients, or a train step without accumulation: with it
  // the ranks sum the accumulator, once per optimizer step).
  int32_t gradients_summed;
  // Whether the last step summed only this rank's shard of them
  // (--shard-optimizer, a step that updated; with
  // accumulation, the last micro-batch's).
  int32_t gradients_scattered;
  // Whether the last mpc_load_checkpoint verified every tensor against a
  // stored checksum (mpc_checkpoint_was_verified).
  int32_t checkpoint_verified;
  // The names mpc_load_weights last reported missing and unexpected
  // (mpc_weights_report), newline-separated; malloc'ed (the session is
  // calloc'ed), freed by mpc_session_destroy.
  char *weights_missing;
  char *weights_unexpected;
  // The device side of a cuda-target session (null on the cpu target); the
  // arenas above are then the host mirror of its device arenas.
  mpcrt::CudaSession *cuda;
  // The data-parallel job's ranks; null in a session of one process.
  mpcrt::process_group *group;
  // cpu target: the threads its steps run on (mpc_session_options.threads,
  // resolved); `pool` is null when that is 1, and on the cuda target.
  int32_t threads;
  mpcrt::thread_pool *pool;
  // The elements of the flat parameter buffer this rank's optimizer updates
  // and the elements each optimizer slot holds (mpc_step_context.shard_*):
  // all of them unless the model shards its optimizer state.
  int64_t shard_begin, shard_count, shard_capacity;
  // A sharded session's whole optimizer state in the unsharded layout,
  // which checkpoints read and write (gathered before a save, scattered
  // after a load), and, where the model shards its master weights too, the
  // whole f32 parameters in the flat layout (params[i].offset): malloc'ed
  // while staged (stage_whole_state), null otherwise.
  unsigned char *full_slots;
  unsigned char *full_params;
};

namespace mpcrt {

/// The parameter or state called `name`, or null.
const mpc_tensor_desc *find_param_or_state(const mpc_model_desc *model,
                                           const char *name);

/// Bytes of a tensor's data (num_elements * dtype size).
inline int64_t tensor_bytes(const mpc_tensor_desc &tensor) {
  return tensor.num_elements *
         static_cast<int64_t>(mpc_dtype_size(tensor.dtype));
}

/// The dtype of params[p]'s gradient (mpc_model_desc.gradient_dtypes).
inline mpc_dtype gradient_dtype(const mpc_model_desc *model, int32_t p) {
  return model->gradient_dtypes ? model->gradient_dtypes[p]
                                : model->params[p].dtype;
}

/// Where a tensor's data lives in a session (a parameter of a model that
/// shards its master weights: in full_params, staged).
inline unsigned char *tensor_data(mpc_session *session,
                                  const mpc_tensor_desc &tensor) {
  const mpc_model_desc *model = session->model;
  if (model->shard_master_weights && &tensor >= model->params &&
      &tensor < model->params + model->num_params)
    return session->full_params + tensor.offset;
  return static_cast<unsigned char *>(session->arenas[tensor.arena]) +
         tensor.offset;
}

/// Elements of the flat parameter (and gradient) buffer.
inline int64_t flat_elements(const mpc_model_desc *model) {
  if (model->num_params == 0)
    return 0;
  return model->arena_bytes[MPC_ARENA_GRADS] /
         static_cast<int64_t>(mpc_dtype_size(model->params[0].dtype));
}

/// Bytes of one element of optimizer slot `slot` (without slot dtypes, of
/// the parameters').
inline int64_t slot_element_bytes(const mpc_model_desc *model, int32_t slot) {
  return static_cast<int64_t>(mpc_dtype_size(
      model->optimizer_slot_dtypes ? model->optimizer_slot_dtypes[slot]
                                   : model->params[0].dtype));
}

/// The dtype of optimizer slot `slot` of `param`.
inline mpc_dtype slot_dtype(const mpc_model_desc *model,
                            const mpc_tensor_desc &param, int32_t slot) {
  return model->optimizer_slot_dtypes ? model->optimizer_slot_dtypes[slot]
                                      : param.dtype;
}

/// Where slot `slot` begins among slots of `elements` elements each (all
/// of them: flat_elements; a rank's shards: shard_capacity), each rounded
/// up to 4 bytes so that an f32 slot after bf16 ones stays aligned.
inline int64_t slot_begin(const mpc_model_desc *model, int32_t slot,
                          int64_t elements) {
  int64_t bytes = 0;
  for (int32_t before = 0; before < slot; ++before)
    bytes += (elements * slot_element_bytes(model, before) + 3) / 4 * 4;
  return bytes;
}

/// Whether slot `slot` is the gradient accumulator (the last slot, with
/// accumulate_steps > 1), which a sharded session keeps whole: every rank
/// accumulates its own micro-batches' whole gradients.
inline bool is_accumulator_slot(const mpc_model_desc *model, int32_t slot) {
  return model->accumulate_steps > 1 && slot == model->optimizer_slots - 1;
}

/// The bytes of a sharded session's slots: each slot's shard of `capacity`
/// elements, the accumulator whole after them.
inline int64_t shard_slot_bytes(const mpc_model_desc *model, int64_t capacity) {
  int32_t slots = model->optimizer_slots;
  if (slots > 0 && is_accumulator_slot(model, slots - 1))
    return slot_begin(model, slots - 1, capacity) +
           (flat_elements(model) * slot_element_bytes(model, slots - 1) + 3) /
               4 * 4;
  return slot_begin(model, slots, capacity);
}

/// The bytes of arena `arena` this session holds: the model's, except a
/// sharded session's optimizer arena, which is the control block and the
/// rank's shards, its master weights' included (on the host and, on the
/// cuda target, on the device).
inline int64_t session_arena_bytes(const mpc_session *session, int arena) {
  const mpc_model_desc *model = session->model;
  if (arena == MPC_ARENA_OPTIMIZER && model->shard_optimizer)
    return model->optimizer_slots_offset +
           shard_slot_bytes(model, session->shard_capacity) +
           (model->shard_master_weights ? session->shard_capacity * 4 : 0);
  return model->arena_bytes[arena];
}

/// Where optimizer slot `slot` of a parameter lives (laid out as the
/// parameters, in the slot's dtype); for a sharded session, in full_slots.
inline unsigned char *optimizer_slot_data(mpc_session *session,
                                          const mpc_tensor_desc &param,
                                          int32_t slot) {
  const mpc_model_desc *model = session->model;
  // Without slot dtypes a slot is laid out as the gradients, byte for byte.
  int64_t within = model->optimizer_slot_dtypes
                       ? param.offset /
                             static_cast<int64_t>(mpc_dtype_size(param.dtype)) *
                             slot_element_bytes(model, slot)
                       : param.offset;
  int64_t at = slot_begin(model, slot, flat_elements(model)) + within;
  if (session->full_slots)
    return session->full_slots + at;
  return static_cast<unsigned char *>(session->arenas[MPC_ARENA_OPTIMIZER]) +
         model->optimizer_slots_offset + at;
}

/// --shard-optimizer: the whole state checkpoints read and write, staged
/// in full_slots (unless `with_slots` is false) and, where the model
/// shards its master weights, full_params; no-ops for an unsharded
/// session. stage_whole_state allocates them and fills in this rank's
/// master weights (its shard and the f32 copies), and with `gather` every
/// rank's shards of both (collective: every rank calls it).
/// unstage_whole_state, with `write_back`, takes this rank's shards and the
/// f32 copies from them (the half copies are then sync_half_copies's), and
/// frees them.
mpc_status stage_whole_state(mpc_session *session, bool gather,
                             bool with_slots = true);
void unstage_whole_state(mpc_session *session, bool write_back);

/// A sharded master weight's f32 values as this rank has them: its f32
/// copy, or its elements when they are all in this rank's shard; null
/// otherwise (the owners' shards hold them).
const float *local_master_weights(mpc_session *session,
                                  const mpc_tensor_desc &param);

/// The training control block (loss scaler state, per-step values).
inline mpc_train_control *train_control(mpc_session *session) {
  return reinterpret_cast<mpc_train_control *>(
      static_cast<unsigned char *>(session->arenas[MPC_ARENA_OPTIMIZER]) +
      session->model->control_offset);
}

/// Runs the model's sync_half_copies (if any) after parameters changed
/// (collective where the model shards its master weights: it gathers the
/// half copies).
mpc_status sync_half_copies(mpc_session *session);

} // namespace mpcrt

#endif // MPC_RUNTIME_SESSION_H
