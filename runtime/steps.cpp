//===- steps.cpp - training and evaluation steps, parameters ----*- C++ -*-===//
//
// This file implements the step and parameter parts of mpc_runtime.h: the
// inputs checked and copied in, the generated step run (on the host or
// through the cuda session), the loss and statistics read back, and
// parameters and hyper-parameters read and written. As everywhere in
// libmpcrt: check everything a call depends on first, then change state,
// so that a failing call leaves the session as it was.
//
//===----------------------------------------------------------------------===//

#include "runtime/mpc_model.h"
#include "runtime/mpc_runtime.h"

#include "runtime/cuda/cuda_session.h"
#include "runtime/error.h"
#include "runtime/half.h"
#include "runtime/init.h"
#include "runtime/loss_scaler.h"
#include "runtime/process_group.h"
#include "runtime/session.h"
#include "runtime/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using mpcrt::set_error;

namespace {

// ----------------------------------------------------------------------------
// Steps

mpc_status check_inputs(mpc_session *session, const char *function,
                        const void *const *inputs) {
  const mpc_model_desc *model = session->model;
  if (model->num_inputs > 0 && !inputs)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: inputs is null but model '%s' has %d inputs",
                     function, model->name, model->num_inputs);
  for (int32_t i = 0; i < model->num_inputs; ++i) {
    const mpc_tensor_desc &input = model->inputs[i];
    if (!inputs[i])
      return set_error(MPC_ERROR_INVALID_ARGUMENT, "%s: input '%s' is null",
                       function, input.name);
    if (input.index_bound == 0)
      continue;
    for (int64_t e = 0; e < input.num_elements; ++e) {
      int64_t value = input.dtype == MPC_I32
                          ? static_cast<const int32_t *>(inputs[i])[e]
                          : static_cast<const int64_t *>(inputs[i])[e];
      if ((value >= 0 && value < input.index_bound) ||
          (input.has_ignore_index && value == input.ignore_index))
        continue;
      if (input.has_ignore_index)
        return set_error(MPC_ERROR_OUT_OF_RANGE,
                         "input '%s' element %lld is %lld, outside [0, %lld) "
                         "and not the ignore_index %lld",
                         input.name, static_cast<long long>(e),
                         static_cast<long long>(value),
                         static_cast<long long>(input.index_bound),
                         static_cast<long long>(input.ignore_index));
      return set_error(MPC_ERROR_OUT_OF_RANGE,
                       "input '%s' element %lld is %lld, outside [0, %lld)",
                       input.name, static_cast<long long>(e),
                       static_cast<long long>(value),
                       static_cast<long long>(input.index_bound));
    }
  }
  return MPC_OK;
}

// Copies the inputs in, runs `step` and reads the loss. The caller has
// checked the inputs.
/// Runs one step function. `training` selects train_step over eval;
/// `apply_update` lets train_step change parameters, optimizer state and
/// running statistics (0 when only gradients are wanted).
mpc_status run_step(mpc_session *session, const void *const *inputs,
                    int32_t training, int32_t apply_update, float *loss) {
  const mpc_model_desc *model = session->model;
  if (session->cuda) {
    if (mpc_status status = mpcrt::cuda_upload_inputs(session, inputs))
      return status;
  } else {
    for (int32_t i = 0; i < model->num_inputs; ++i)
      std::memcpy(mpcrt::tensor_data(session, model->inputs[i]), inputs[i],
                  static_cast<size_t>(mpcrt::tensor_bytes(model->inputs[i])));
  }
  int32_t index_error = 0;
  mpc_step_context context;
  for (int a = 0; a < MPC_NUM_ARENAS; ++a)
    context.arenas[a] = session->arenas[a];
  context.seed = session->seed;
  // Data parallel: the m-th of rank r's K micro-batches of optimizer step s
  // draws the dropout masks of micro-batch (s N + r) K + m, those of one
  // process accumulating all N K micro-batches in rank order (rank r's
  // sum, K micro-batches, is what rank r contributes).
  int64_t accumulate = model->accumulate_steps;
  context.step = session->group
                     ? ((session->step / accumulate) *
                            mpcrt::process_group_size(session->group) +
                        mpcrt::process_group_rank(session->group)) *
                               accumulate +
                           session->step % accumulate
                     : session->step;
  session->gradients_summed =
      session->group && (!apply_update || accumulate == 1);
  // --shard-optimizer: a step that updates (with accumulation, the last
  // micro-batch, the one that communicates) sums each rank's shard of the
  // gradients only (a reduce-scatter).
  session->gradients_scattered =
      session->group && apply_update && model->shard_optimizer &&
      session->step % accumulate == accumulate - 1;
  context.learning_rate = session->learning_rate;
  context.momentum = session->momentum;
  context.weight_decay = session->weight_decay;
  context.training = training;
  context.apply_update = apply_update;
  context.micro_step =
      static_cast<int32_t>(session->step % model->accumulate_steps);
  context.index_error = &index_error;
  context.process_group = session->group;
  if (session->group) // what a failed step left
    mpcrt::process_group_discard_deferred(session->group);
  context.shard_begin = session->shard_begin;
  context.shard_count = session->shard_count;
  context.shard_capacity = session->shard_capacity;
  session->nonfinite = mpc_nonfinite_record{};
  // --debug-nonfinite: the loss scaler as the step finds it (a cuda
  // session reads its device's, cuda_run_step).
  if (model->debug_nonfinite && !session->cuda) {
    const mpc_loss_scaler_state &scaler = mpcrt::train_control(session)->scaler;
    session->nonfinite_step = scaler.total_steps - scaler.total_skipped;
    session->nonfinite_loss_scale = scaler.scale;
  }
  session->nonfinite_training = training;
  context.nonfinite = &session->nonfinite;
  const char *function = training ? "train_step" : "eval";
  mpc_step_fn step = training ? model->train_step : model->eval;
  // Kernels read what changes between steps from the control block.
  mpc_step_values values{};
  values.step = context.step;
  values.learning_rate = context.learning_rate;
  values.momentum = context.momentum;
  values.weight_decay = context.weight_decay;
  values.world_size =
      session->group ? mpcrt::process_group_size(session->group) : 1;
  // A cuda step sees device arenas and runs on the session's stream.
  uint64_t errors_before = mpcrt::errors_recorded_on_this_thread();
  mpc_status returned;
  if (session->cuda) {
    returned = mpcrt::cuda_run_step(session, step, &context, &values, loss,
                                    &index_error);
  } else {
    mpcrt::train_control(session)->values = values;
    mpcrt::current_pool_scope threads(session->pool);
    returned = step(&context);
  }
  int32_t status = mpcrt::raw_enum(returned);
  if (index_error)
    return set_error(MPC_ERROR_OUT_OF_RANGE,
                     "model '%s': %s%s met an index outside its range",
                     model->name, function,
                     index_error == 2 ? " (or an earlier step that did not "
                                        "read its loss)"
                                      : "");
  if (status != MPC_OK) {
    // Pass a known status on; anything else is the model's bug.
    mpc_status passed_on = status > MPC_OK && status <= MPC_ERROR_UNSUPPORTED
                               ? static_cast<mpc_status>(status)
                               : MPC_ERROR_INTERNAL;
    // The cause, where the step or the runtime under it recorded one.
    if (mpcrt::errors_recorded_on_this_thread() != errors_before)
      return set_error(passed_on, "model '%s': %s failed: %s", model->name,
                       function, mpc_last_error());
    return set_error(passed_on, "model '%s': %s failed: %s (status %d)",
                     model->name, function, mpc_status_string(returned),
                     status);
  }
  if (loss && !session->cuda) // cuda_run_step has read it
    std::memcpy(loss, mpcrt::tensor_data(session, model->outputs[0]),
                sizeof(float));
  return MPC_OK;
}

/// A copy of the training control block. It lives on the device: a cuda
/// session downloads just the block (apps read it every step), not the
/// whole host mirror.
mpc_status read_train_control(mpc_session *session,
                              mpc_train_control *control) {
  if (session->cuda)
    return mpcrt::cuda_download(session, MPC_ARENA_OPTIMIZER,
                                session->model->control_offset, control,
                                sizeof(*control));
  *control = *mpcrt::train_control(session);
  return MPC_OK;
}

// ----------------------------------------------------------------------------
// Parameter access

mpc_status find_for_access(mpc_session *session, const char *function,
                           const char *name, const void *data, size_t count,
                           const mpc_tensor_desc **tensor) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "%s: session is null",
                     function);
  if (!name)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "%s: name is null", function);
  *tensor = mpcrt::find_param_or_state(session->model, name);
  if (!*tensor)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: model '%s' has no parameter or state '%s'", function,
                     session->model->name, name);
  if (static_cast<int64_t>(count) != (*tensor)->num_elements)
    return set_error(
        MPC_ERROR_INVALID_ARGUMENT, "%s: '%s' has %lld elements, got count %zu",
        function, name, static_cast<long long>((*tensor)->num_elements), count);
  if (!data && count > 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "%s: data is null", function);
  return MPC_OK;
}

} // namespace

// ----------------------------------------------------------------------------
// C API: steps

/// Data parallel: the state (batch-norm running statistics), which each
/// rank's own batch moved, follows rank 0's after every step, as PyTorch's
/// DistributedDataParallel broadcasts its buffers; so the ranks stay equal.
static mpc_status sync_state_from_rank0(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  if (!session->group || model->num_states == 0)
    return MPC_OK;
  int64_t begin = model->states[0].offset, end = begin;
  for (int32_t i = 0; i < model->num_states; ++i) {
    begin = std::min(begin, model->states[i].offset);
    end = std::max(end, model->states[i].offset +
                            mpcrt::tensor_bytes(model->states[i]));
  }
  if (session->cuda)
    return mpcrt::cuda_broadcast_from_rank0(session, MPC_ARENA_PARAMS, begin,
                                            end - begin);
  return mpcrt::process_group_broadcast(
      session->group,
      static_cast<unsigned char *>(session->arenas[MPC_ARENA_PARAMS]) + begin,
      end - begin);
}

extern "C" mpc_status mpc_train_step(mpc_session *session,
                                     const void *const *inputs, float *loss) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_train_step: session is null");
  if (mpc_status status = check_inputs(session, "mpc_train_step", inputs))
    return status;
  if (mpc_status status =
          run_step(session, inputs, /*training=*/1, /*apply_update=*/1, loss))
    return status;
  ++session->step;
  return sync_state_from_rank0(session);
}

extern "C" mpc_status mpc_compute_gradients(mpc_session *session,
                                            const void *const *inputs,
                                            float *loss) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_compute_gradients: session is null");
  if (mpc_status status =
          check_inputs(session, "mpc_compute_gradients", inputs))
    return status;
  if (mpc_status status = run_step(session, inputs, /*training=*/1,
                                   /*apply_update=*/0, loss))
    return status;
  // A caller inspecting gradients must know when they overflowed: the
  // train step's finite check runs in the optimizer, which this call skips.
  if (mpc_status status = mpcrt::sync_host(session))
    return status;
  const mpc_model_desc *model = session->model;
  const unsigned char *grads =
      static_cast<const unsigned char *>(session->arenas[MPC_ARENA_GRADS]);
  int64_t nonfinite = 0;
  for (int32_t p = 0; p < model->num_params; ++p)
    for (int64_t i = 0; i < model->params[p].num_elements; ++i)
      nonfinite += !std::isfinite(
          mpc_load_as_f32(mpcrt::gradient_dtype(model, p),
                          grads + model->params[p].offset, i));
  session->gradients_nonfinite = nonfinite;
  return MPC_OK;
}

extern "C" mpc_status mpc_get_gradient(mpc_session *session, const char *name,
                                       float *data, size_t count) {
  const mpc_tensor_desc *tensor = nullptr;
  if (mpc_status status = find_for_access(session, "mpc_get_gradient", name,
                                          data, count, &tensor))
    return status;
  const mpc_model_desc *model = session->model;
  bool isParam =
      tensor >= model->params && tensor < model->params + model->num_params;
  if (!isParam)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_get_gradient: '%s' is state, which has no gradient",
                     name);
  if (session->gradients_scattered)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_get_gradient: the last step of this --shard-optimizer "
                     "session summed only this rank's shard of the gradients "
                     "over the ranks (a reduce-scatter); mpc_compute_gradients "
                     "sums them whole");
  if (mpc_status status = mpcrt::sync_host(session))
    return status;
  // The gradient of a parameter sits at the parameter's offset in the
  // gradient arena, in its gradient dtype (the parameter's, or half where
  // the compiler kept it so), multiplied by the loss scale of the step that
  // computed it.
  const unsigned char *source =
      static_cast<const unsigned char *>(session->arenas[MPC_ARENA_GRADS]) +
      tensor->offset;
  // Data parallel: the sum over ranks, of which the mean is the gradient.
  const mpc_train_control *control = mpcrt::train_control(session);
  float scale = control->step_scale;
  float ranks = session->gradients_summed
                    ? static_cast<float>(control->values.world_size)
                    : 1.0f;
  mpc_dtype dtype = mpcrt::gradient_dtype(
      model, static_cast<int32_t>(tensor - model->params));
  for (int64_t i = 0; i < tensor->num_elements; ++i)
    data[i] = mpc_load_as_f32(dtype, source, i) / scale / ranks;
  return MPC_OK;
}

extern "C" mpc_status mpc_eval(mpc_session *session, const void *const *inputs,
                               float *loss, void *const *outputs) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "mpc_eval: session is null");
  if (mpc_status status = check_inputs(session, "mpc_eval", inputs))
    return status;
  if (mpc_status status =
          run_step(session, inputs, /*training=*/0, /*apply_update=*/0, loss))
    return status;
  const mpc_model_desc *model = session->model;
  if (outputs) {
    for (int32_t i = 1; i < model->num_outputs; ++i)
      if (outputs[i - 1] && session->cuda) {
        if (mpc_status status = mpcrt::cuda_download(
                session, MPC_ARENA_ACTIVATIONS, model->outputs[i].offset,
                outputs[i - 1], mpcrt::tensor_bytes(model->outputs[i])))
          return status;
      } else if (outputs[i - 1])
        std::memcpy(
            outputs[i - 1], mpcrt::tensor_data(session, model->outputs[i]),
            static_cast<size_t>(mpcrt::tensor_bytes(model->outputs[i])));
  }
  return MPC_OK;
}

// ----------------------------------------------------------------------------
// C API: parameters and hyper-parameters

extern "C" mpc_status mpc_get_param(mpc_session *session, const char *name,
                                    float *data, size_t count) {
  const mpc_tensor_desc *tensor = nullptr;
  if (mpc_status status =
          find_for_access(session, "mpc_get_param", name, data, count, &tensor))
    return status;
  if (mpc_status status = mpcrt::sync_host(session))
    return status;
  const mpc_model_desc *model = session->model;
  const unsigned char *source = nullptr;
  if (model->shard_master_weights && tensor >= model->params &&
      tensor < model->params + model->num_params) {
    source = reinterpret_cast<const unsigned char *>(
        mpcrt::local_master_weights(session, *tensor));
    if (!source)
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "mpc_get_param: '%s' is in other ranks' shards of the "
                       "master weights (model '%s' was compiled with "
                       "--shard-optimizer); mpc_save_checkpoint gathers them",
                       name, model->name);
  } else {
    source = mpcrt::tensor_data(session, *tensor);
  }
  for (int64_t i = 0; i < tensor->num_elements; ++i)
    data[i] = mpc_load_as_f32(tensor->dtype, source, i);
  return MPC_OK;
}

extern "C" mpc_status mpc_set_param(mpc_session *session, const char *name,
                                    const float *data, size_t count) {
  const mpc_tensor_desc *tensor = nullptr;
  if (mpc_status status =
          find_for_access(session, "mpc_set_param", name, data, count, &tensor))
    return status;
  // The rest of the mirror must be current before it goes back whole.
  if (mpc_status status = mpcrt::sync_host(session))
    return status;
  // Sharded master weights: the rank takes its shard of the value (and
  // the f32 copy), then the ranks gather the half copies (collective).
  if (mpc_status status = mpcrt::stage_whole_state(
          session, /*gather=*/false, /*with_slots=*/false))
    return status;
  unsigned char *target = mpcrt::tensor_data(session, *tensor);
  for (int64_t i = 0; i < tensor->num_elements; ++i)
    mpc_store_from_f32(tensor->dtype, target, i, data[i]);
  mpcrt::unstage_whole_state(session, /*write_back=*/true);
  if (mpc_status status = mpcrt::sync_device(session))
    return status;
  // The half copy the forward pass reads follows the master weight.
  return mpcrt::sync_half_copies(session);
}

extern "C" mpc_status mpc_set_param_shaped(mpc_session *session,
                                           const char *name, const float *data,
                                           const int64_t *shape, int32_t rank) {
  const char *function = "mpc_set_param_shaped";
  if (!session || !name)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "%s: %s is null", function,
                     !session ? "session" : "name");
  const mpc_tensor_desc *tensor =
      mpcrt::find_param_or_state(session->model, name);
  if (!tensor)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: model '%s' has no parameter or state '%s'", function,
                     session->model->name, name);
  if (rank < 0 || rank > MPC_MAX_RANK || (!shape && rank > 0))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: rank %d needs a shape of 0 to %d extents", function,
                     static_cast<int>(rank), MPC_MAX_RANK);
  auto text = [](const int64_t *extents, int32_t count) {
    std::string result = "[";
    for (int32_t d = 0; d < count; ++d)
      result += (d ? ", " : "") + std::to_string(extents[d]);
    return result + "]";
  };
  bool same = rank == tensor->rank;
  bool reversed = rank == tensor->rank && rank > 1;
  for (int32_t d = 0; d < rank && (same || reversed); ++d) {
    same = same && shape[d] == tensor->shape[d];
    reversed = reversed && shape[d] == tensor->shape[rank - 1 - d];
  }
  if (!same)
    return set_error(
        MPC_ERROR_INVALID_ARGUMENT, "%s: '%s' has shape %s, got %s%s", function,
        name, text(tensor->shape, tensor->rank).c_str(),
        text(shape, rank).c_str(), reversed ? " (transposed?)" : "");
  return mpc_set_param(session, name, data,
                       static_cast<size_t>(tensor->num_elements));
}

extern "C" mpc_status mpc_set_learning_rate(mpc_session *session,
                                            float learning_rate) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_set_learning_rate: session is null");
  if (!std::isfinite(learning_rate) || learning_rate < 0.0f)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_set_learning_rate: learning rate is %g; expected a "
                     "finite value >= 0",
                     static_cast<double>(learning_rate));
  session->learning_rate = learning_rate;
  return MPC_OK;
}

extern "C" int64_t mpc_session_step(const mpc_session *session) {
  if (!session) {
    set_error(MPC_ERROR_INVALID_ARGUMENT, "mpc_session_step: session is null");
    return -1;
  }
  mpc_train_control control;
  if (read_train_control(const_cast<mpc_session *>(session), &control) !=
      MPC_OK)
    return -1;
  return control.scaler.total_steps - control.scaler.total_skipped;
}

extern "C" mpc_status mpc_get_training_stats(mpc_session *session,
                                             mpc_training_stats *stats) {
  if (!session || !stats)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_get_training_stats: %s is null",
                     !session ? "session" : "stats");
  mpc_train_control control;
  if (mpc_status status = read_train_control(session, &control))
    return status;
  const mpc_loss_scaler_state &scaler = control.scaler;
  mpc_training_stats result = {};
  result.train_steps = session->step;
  result.optimizer_steps = scaler.total_steps - scaler.total_skipped;
  result.skipped_steps = scaler.total_skipped;
  result.loss_scale = scaler.scale;
  result.steps_since_growth = scaler.growth_tracker;
  result.hysteresis_left = scaler.hysteresis_left;
  result.last_step_scale = control.step_scale;
  // With accumulation only every N-th train step ends an optimizer step.
  bool endedOptimizerStep =
      session->step > 0 &&
      session->step % session->model->accumulate_steps == 0;
  result.last_skipped = endedOptimizerStep && !control.applied;
  result.grad_norm = control.grad_norm;
  result.learning_rate = control.learning_rate;
  result.gradients_nonfinite = session->gradients_nonfinite;
  // Delayed FP8 scaling's table: row 3 counts each tensor's saturated
  // elements of the last optimizer step (mpc.quantize). Only that row is
  // read: apps call this every step.
  if (const mpc_tensor_desc *table =
          mpcrt::find_param_or_state(session->model, "fp8.scaling");
      table && table->rank == 2) {
    int64_t columns = table->shape[1];
    std::vector<float> counts(static_cast<size_t>(columns));
    int64_t bytes = columns * static_cast<int64_t>(sizeof(float));
    if (session->cuda) {
      if (mpc_status status = mpcrt::cuda_download(session, table->arena,
                                                   table->offset + 3 * bytes,
                                                   counts.data(), bytes))
        return status;
    } else {
      std::memcpy(counts.data(),
                  mpcrt::tensor_data(session, *table) + 3 * bytes,
                  static_cast<size_t>(bytes));
    }
    for (float count : counts)
      result.fp8_saturated += static_cast<int64_t>(count);
  }
  *stats = result;
  return MPC_OK;
}
