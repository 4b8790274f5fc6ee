//===- mpc_runtime.cpp - sessions, steps and parameters ---------*- C++ -*-===//
//
// This file implements the model, session, step and parameter parts of
// mpc_runtime.h over the descriptor of mpc_model.h (checkpoints are in
// checkpoint.cpp). The rule throughout: check everything a call depends on
// first, then change state, so that a failing call leaves the session as it
// was.
//
//===----------------------------------------------------------------------===//

#include "runtime/mpc_runtime.h"
#include "runtime/mpc_model.h"

#include "runtime/cuda/cuda_session.h"
#include "runtime/error.h"
#include "runtime/half.h"
#include "runtime/init.h"
#include "runtime/loss_scaler.h"
#include "runtime/process_group.h"
#include "runtime/session.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

using mpcrt::set_error;

namespace {

// ----------------------------------------------------------------------------
// Descriptor checks

// Generated descriptors are trusted to be well formed, but a mismatch between
// a model library and this runtime (or a hand-written descriptor) should
// fail with a message, not corrupt memory in the first step.

const char *arena_name(int32_t arena) {
  static const char *const names[] = {"params", "grads", "optimizer",
                                      "activations"};
  return arena >= 0 && arena < MPC_NUM_ARENAS ? names[arena] : "?";
}

mpc_status check_tensor(const mpc_model_desc *model, const char *kind,
                        int32_t index, const mpc_tensor_desc &tensor,
                        int32_t expected_arena) {
  const char *name = tensor.name ? tensor.name : "";
  if (!tensor.name || !*tensor.name)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': %s %d has no name", model->name, kind, index);
  if (!mpcrt::dtype_is_valid(tensor.dtype))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': %s '%s' has unknown dtype %d", model->name,
                     kind, name, mpcrt::raw_enum(tensor.dtype));
  if (tensor.rank < 0 || tensor.rank > MPC_MAX_RANK)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': %s '%s' has rank %d, outside [0, %d]",
                     model->name, kind, name, tensor.rank, MPC_MAX_RANK);
  int64_t elements = 1;
  for (int32_t d = 0; d < tensor.rank; ++d) {
    if (tensor.shape[d] < 0 ||
        __builtin_mul_overflow(elements, tensor.shape[d], &elements))
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "model '%s': %s '%s' has a bad shape (dim %d is %lld)",
                       model->name, kind, name, d,
                       static_cast<long long>(tensor.shape[d]));
  }
  if (elements != tensor.num_elements)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': %s '%s' has num_elements %lld but its "
                     "shape holds %lld",
                     model->name, kind, name,
                     static_cast<long long>(tensor.num_elements),
                     static_cast<long long>(elements));
  if (tensor.arena != expected_arena)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': %s '%s' is in arena %d (%s), expected %s",
                     model->name, kind, name, tensor.arena,
                     arena_name(tensor.arena), arena_name(expected_arena));
  int64_t size = static_cast<int64_t>(mpc_dtype_size(tensor.dtype));
  int64_t bytes = 0, end = 0;
  if (tensor.offset < 0 || tensor.offset % size != 0 ||
      __builtin_mul_overflow(elements, size, &bytes) ||
      __builtin_add_overflow(tensor.offset, bytes, &end) ||
      end > model->arena_bytes[expected_arena])
    return set_error(
        MPC_ERROR_INVALID_ARGUMENT,
        "model '%s': %s '%s' at offset %lld (%lld bytes) does "
        "not fit, aligned, in the %s arena of %lld bytes",
        model->name, kind, name, static_cast<long long>(tensor.offset),
        static_cast<long long>(bytes), arena_name(expected_arena),
        static_cast<long long>(model->arena_bytes[expected_arena]));
  if (tensor.index_bound != 0 &&
      !(tensor.dtype == MPC_I32 || tensor.dtype == MPC_I64))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': %s '%s' has an index_bound but dtype %s; "
                     "index inputs are i32 or i64",
                     model->name, kind, name, mpcrt::dtype_name(tensor.dtype));
  if (tensor.index_bound < 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': %s '%s' has a negative index_bound",
                     model->name, kind, name);
  return MPC_OK;
}

mpc_status check_tensor_list(const mpc_model_desc *model, const char *kind,
                             int32_t count, const mpc_tensor_desc *tensors,
                             int32_t arena, std::set<std::string> *names) {
  if (count < 0 || (count > 0 && !tensors))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': bad %s list (%d entries at %p)", model->name,
                     kind, count, static_cast<const void *>(tensors));
  for (int32_t i = 0; i < count; ++i) {
    if (mpc_status status = check_tensor(model, kind, i, tensors[i], arena))
      return status;
    if (!names->insert(tensors[i].name).second)
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "model '%s': two tensors are named '%s'", model->name,
                       tensors[i].name);
  }
  return MPC_OK;
}

// Checks only what identifies the model; enough for the metadata queries.
mpc_status check_model_header(const mpc_model_desc *model) {
  if (!model)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "model is null");
  if (model->abi_version != MPC_MODEL_ABI_VERSION)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model was built for runtime ABI version %u, this "
                     "runtime implements version %d; rebuild the model with "
                     "a matching mpc",
                     model->abi_version, MPC_MODEL_ABI_VERSION);
  if (!model->name)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "model has no name");
  return MPC_OK;
}

mpc_status check_model(const mpc_model_desc *model) {
  for (int a = 0; a < MPC_NUM_ARENAS; ++a)
    if (model->arena_bytes[a] < 0)
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "model '%s': the %s arena has negative size %lld",
                       model->name, arena_name(a),
                       static_cast<long long>(model->arena_bytes[a]));
  if (!model->train_step || !model->eval)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s' has no %s function", model->name,
                     !model->train_step ? "train_step" : "eval");
  std::set<std::string> inputs, params, outputs;
  if (mpc_status status =
          check_tensor_list(model, "input", model->num_inputs, model->inputs,
                            MPC_ARENA_ACTIVATIONS, &inputs))
    return status;
  if (mpc_status status =
          check_tensor_list(model, "param", model->num_params, model->params,
                            MPC_ARENA_PARAMS, &params))
    return status;
  if (mpc_status status =
          check_tensor_list(model, "state", model->num_states, model->states,
                            MPC_ARENA_PARAMS, &params))
    return status;
  if (mpc_status status =
          check_tensor_list(model, "output", model->num_outputs, model->outputs,
                            MPC_ARENA_ACTIVATIONS, &outputs))
    return status;
  if (model->num_outputs < 1 || model->outputs[0].dtype != MPC_F32 ||
      model->outputs[0].num_elements < 1)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': output 0 must be the f32 loss", model->name);

  // Parameters and state: floating point, with a valid initialiser.
  // Gradients and optimizer slots mirror the parameters' layout.
  for (int32_t i = 0; i < model->num_params + model->num_states; ++i) {
    bool is_param = i < model->num_params;
    const mpc_tensor_desc &tensor =
        is_param ? model->params[i] : model->states[i - model->num_params];
    char what[320];
    std::snprintf(what, sizeof(what), "model '%s': %s '%s'", model->name,
                  is_param ? "param" : "state", tensor.name);
    if (!mpcrt::dtype_is_float(tensor.dtype))
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "%s has dtype %s; parameters and state are f32, f16 "
                       "or bf16",
                       what, mpcrt::dtype_name(tensor.dtype));
    if (mpc_status status = mpcrt::check_initializer(tensor, what))
      return status;
    if (is_param && tensor.offset + mpcrt::tensor_bytes(tensor) >
                        model->arena_bytes[MPC_ARENA_GRADS])
      return set_error(
          MPC_ERROR_INVALID_ARGUMENT,
          "%s: its gradient does not fit in the grads arena of "
          "%lld bytes",
          what, static_cast<long long>(model->arena_bytes[MPC_ARENA_GRADS]));
  }
  if (model->optimizer_slots < 0 ||
      (model->optimizer_slots > 0 && !model->optimizer_slot_names))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s' has %d optimizer slots%s", model->name,
                     model->optimizer_slots,
                     model->optimizer_slot_names ? "" : " and no slot names");
  for (int32_t slot = 0; slot < model->optimizer_slots; ++slot)
    if (!model->optimizer_slot_names[slot] ||
        !*model->optimizer_slot_names[slot])
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "model '%s': optimizer slot %d has no name",
                       model->name, slot);
  // Slots, then the control block, in the optimizer arena; sharded, the
  // control block, then the slots.
  int64_t slot_bytes = 0, control_end = 0, slots_end = 0;
  bool sharded = model->shard_optimizer != 0;
  if (__builtin_mul_overflow(static_cast<int64_t>(model->optimizer_slots),
                             model->arena_bytes[MPC_ARENA_GRADS],
                             &slot_bytes) ||
      model->optimizer_slots_offset < 0 ||
      model->optimizer_slots_offset % 64 != 0 ||
      __builtin_add_overflow(model->optimizer_slots_offset, slot_bytes,
                             &slots_end) ||
      model->control_offset % 8 != 0 ||
      __builtin_add_overflow(model->control_offset,
                             static_cast<int64_t>(sizeof(mpc_train_control)),
                             &control_end) ||
      (sharded ? model->control_offset != 0 ||
                     model->optimizer_slots_offset < control_end ||
                     slots_end > model->arena_bytes[MPC_ARENA_OPTIMIZER]
               : model->control_offset < slots_end ||
                     control_end > model->arena_bytes[MPC_ARENA_OPTIMIZER]) ||
      (sharded && !model->data_parallel))
    return set_error(
        MPC_ERROR_INVALID_ARGUMENT,
        "model '%s': %d optimizer slots of %lld bytes and the training "
        "control block at offset %lld (%zu bytes) do not fit in the "
        "optimizer arena of %lld bytes",
        model->name, model->optimizer_slots,
        static_cast<long long>(model->arena_bytes[MPC_ARENA_GRADS]),
        static_cast<long long>(model->control_offset),
        sizeof(mpc_train_control),
        static_cast<long long>(model->arena_bytes[MPC_ARENA_OPTIMIZER]));
  // The GEMM workspace: inside the activation arena, 256-aligned (the
  // arena's device allocation is, and cuBLASLt wants its workspace so).
  int64_t workspace_end = 0;
  if (model->gemm_workspace_offset < 0 || model->gemm_workspace_bytes < 0 ||
      model->gemm_workspace_offset % 256 != 0 ||
      __builtin_add_overflow(model->gemm_workspace_offset,
                             model->gemm_workspace_bytes, &workspace_end) ||
      (model->gemm_workspace_bytes > 0 &&
       workspace_end > model->arena_bytes[MPC_ARENA_ACTIVATIONS]))
    return set_error(
        MPC_ERROR_INVALID_ARGUMENT,
        "model '%s': a GEMM workspace of %lld bytes at offset %lld is not a "
        "256-aligned region of the activation arena of %lld bytes",
        model->name, static_cast<long long>(model->gemm_workspace_bytes),
        static_cast<long long>(model->gemm_workspace_offset),
        static_cast<long long>(model->arena_bytes[MPC_ARENA_ACTIVATIONS]));
  if (!model->optimizer_name || !*model->optimizer_name)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s' has no optimizer_name", model->name);
  if (model->accumulate_steps < 1)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s' accumulates %d micro-batches; expected >= 1",
                     model->name, model->accumulate_steps);
  if (mpc_loss_scaler_check_config(&model->loss_scaling) != MPC_OK)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "model '%s': %s",
                     model->name, std::string(mpc_last_error()).c_str());
  return MPC_OK;
}

// A hyper-parameter option: NaN (the init value) means the model's default.
mpc_status resolve_hyperparameter(const char *name, float option,
                                  float model_default, float *result) {
  float value = std::isnan(option) ? model_default : option;
  if (!std::isfinite(value) || value < 0.0f)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s is %g; expected a finite value >= 0 (or NaN for "
                     "the model's default)",
                     name, static_cast<double>(value));
  *result = value;
  return MPC_OK;
}

void fill_info(const mpc_tensor_desc &tensor, mpc_tensor_info *info) {
  info->name = tensor.name;
  info->dtype = tensor.dtype;
  info->rank = tensor.rank;
  for (int d = 0; d < MPC_MAX_RANK; ++d)
    info->shape[d] = d < tensor.rank ? tensor.shape[d] : 0;
  info->num_elements = tensor.num_elements;
}

mpc_status tensor_info(const mpc_model_desc *model, const char *function,
                       const char *kind, int32_t count,
                       const mpc_tensor_desc *tensors, int32_t index,
                       mpc_tensor_info *info) {
  if (mpc_status status = check_model_header(model))
    return status;
  if (!info)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "%s: info is null", function);
  if (index < 0 || index >= count)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: model '%s' has %d %ss, index %d is out of range",
                     function, model->name, count, kind, index);
  fill_info(tensors[index], info);
  return MPC_OK;
}

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
  context.learning_rate = session->learning_rate;
  context.momentum = session->momentum;
  context.weight_decay = session->weight_decay;
  context.training = training;
  context.apply_update = apply_update;
  context.micro_step =
      static_cast<int32_t>(session->step % model->accumulate_steps);
  context.index_error = &index_error;
  context.process_group = session->group;
  context.shard_begin = session->shard_begin;
  context.shard_count = session->shard_count;
  context.shard_capacity = session->shard_capacity;
  session->nonfinite = mpc_nonfinite_record{};
  if (model->debug_nonfinite) { // a cpu-target feature: the arenas are host
    const mpc_loss_scaler_state &scaler =
        mpcrt::train_control(session)->scaler;
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
    mpc_status passed_on = status > MPC_OK && status <= MPC_ERROR_COMMUNICATION
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

namespace mpcrt {

const mpc_tensor_desc *find_param_or_state(const mpc_model_desc *model,
                                           const char *name) {
  for (int32_t i = 0; i < model->num_params; ++i)
    if (std::strcmp(model->params[i].name, name) == 0)
      return &model->params[i];
  for (int32_t i = 0; i < model->num_states; ++i)
    if (std::strcmp(model->states[i].name, name) == 0)
      return &model->states[i];
  return nullptr;
}

mpc_status sync_half_copies(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  if (!model->sync_half_copies)
    return MPC_OK;
  int32_t index_error = 0;
  mpc_step_context context = {};
  for (int a = 0; a < MPC_NUM_ARENAS; ++a)
    context.arenas[a] = session->arenas[a];
  context.seed = session->seed;
  context.step = session->step;
  context.index_error = &index_error;
  // On the cuda target the kernels run on the device arenas.
  mpc_status status =
      session->cuda ? mpcrt::cuda_run_step(session, model->sync_half_copies,
                                           &context, /*values=*/nullptr,
                                           /*loss=*/nullptr, &index_error)
                    : model->sync_half_copies(&context);
  if (status != MPC_OK)
    return set_error(MPC_ERROR_INTERNAL,
                     "model '%s': sync_half_copies failed (status %d)",
                     model->name, mpcrt::raw_enum(status));
  return MPC_OK;
}

} // namespace mpcrt

// ----------------------------------------------------------------------------
// C API: model metadata

extern "C" const char *mpc_model_name(const mpc_model_desc *model) {
  if (check_model_header(model) != MPC_OK)
    return nullptr;
  return model->name;
}

extern "C" int32_t mpc_model_num_inputs(const mpc_model_desc *model) {
  return check_model_header(model) == MPC_OK ? model->num_inputs : -1;
}

extern "C" int32_t mpc_model_num_params(const mpc_model_desc *model) {
  return check_model_header(model) == MPC_OK ? model->num_params : -1;
}

extern "C" int32_t mpc_model_num_states(const mpc_model_desc *model) {
  return check_model_header(model) == MPC_OK ? model->num_states : -1;
}

extern "C" int32_t mpc_model_num_outputs(const mpc_model_desc *model) {
  return check_model_header(model) == MPC_OK ? model->num_outputs : -1;
}

extern "C" mpc_status mpc_model_input_info(const mpc_model_desc *model,
                                           int32_t index,
                                           mpc_tensor_info *info) {
  return tensor_info(model, "mpc_model_input_info", "input",
                     model ? model->num_inputs : 0,
                     model ? model->inputs : nullptr, index, info);
}

extern "C" mpc_status mpc_model_param_info(const mpc_model_desc *model,
                                           int32_t index,
                                           mpc_tensor_info *info) {
  return tensor_info(model, "mpc_model_param_info", "param",
                     model ? model->num_params : 0,
                     model ? model->params : nullptr, index, info);
}

extern "C" mpc_status mpc_model_state_info(const mpc_model_desc *model,
                                           int32_t index,
                                           mpc_tensor_info *info) {
  return tensor_info(model, "mpc_model_state_info", "state",
                     model ? model->num_states : 0,
                     model ? model->states : nullptr, index, info);
}

extern "C" mpc_status mpc_model_output_info(const mpc_model_desc *model,
                                            int32_t index,
                                            mpc_tensor_info *info) {
  return tensor_info(model, "mpc_model_output_info", "output",
                     model ? model->num_outputs : 0,
                     model ? model->outputs : nullptr, index, info);
}

// ----------------------------------------------------------------------------
// C API: sessions

/// Joins the MPI job and starts every rank from rank 0's parameters and
/// state (its seed, or what it loaded).
static mpc_status join_data_parallel(mpc_session *session,
                                     double timeout_seconds) {
  const mpc_model_desc *model = session->model;
  if (!model->data_parallel)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_create: model '%s' was not compiled for "
                     "data parallelism (mpc compile --data-parallel)",
                     model->name);
  if (mpc_status status =
          mpcrt::torchrun_environment()
              ? mpcrt::process_group_join_environment(&session->group,
                                                      timeout_seconds)
              : mpcrt::process_group_join_mpi(&session->group, timeout_seconds))
    return status;
  return mpcrt::process_group_broadcast(session->group,
                                        session->arenas[MPC_ARENA_PARAMS],
                                        model->arena_bytes[MPC_ARENA_PARAMS]);
}

/// The shard of the optimizer state this session keeps: all of it unless
/// the model shards it over the ranks (--shard-optimizer), when rank r
/// keeps elements [r * capacity, (r + 1) * capacity) of each slot, in an
/// optimizer arena that size (the control block, then the slots' shards).
static mpc_status shard_optimizer_state(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  int64_t n = model->arena_bytes[MPC_ARENA_GRADS] / 4; // f32 gradients
  session->shard_begin = 0;
  session->shard_count = n;
  session->shard_capacity = n;
  if (!model->shard_optimizer)
    return MPC_OK;
  size_t full = static_cast<size_t>(model->optimizer_slots) *
                static_cast<size_t>(model->arena_bytes[MPC_ARENA_GRADS]);
  session->full_slots =
      static_cast<unsigned char *>(std::calloc(full ? full : 1, 1));
  if (!session->full_slots)
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "mpc_session_create: no memory for the optimizer state "
                     "of checkpoints (%zu bytes)",
                     full);
  if (!session->group)
    return MPC_OK;
  int64_t ranks = mpcrt::process_group_size(session->group);
  int64_t rank = mpcrt::process_group_rank(session->group);
  // 16 elements (64 bytes) a unit, so that every shard is aligned.
  int64_t capacity = ((n + ranks - 1) / ranks + 15) / 16 * 16;
  session->shard_capacity = capacity;
  session->shard_begin = std::min(n, rank * capacity);
  session->shard_count = std::min(capacity, n - session->shard_begin);
  // The control block stays where it is; the slots shrink to the shard.
  int64_t bytes =
      model->optimizer_slots_offset + model->optimizer_slots * capacity * 4;
  uint64_t rounded = static_cast<uint64_t>(bytes + 63) / 64 * 64;
  void *arena = std::aligned_alloc(64, rounded);
  if (!arena)
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "mpc_session_create: cannot allocate the optimizer "
                     "arena's shard of model '%s' (%llu bytes)",
                     model->name, static_cast<unsigned long long>(rounded));
  std::memset(arena, 0, rounded);
  std::memcpy(arena, session->arenas[MPC_ARENA_OPTIMIZER],
              static_cast<size_t>(model->optimizer_slots_offset));
  std::free(session->arenas[MPC_ARENA_OPTIMIZER]);
  session->arenas[MPC_ARENA_OPTIMIZER] = arena;
  return MPC_OK;
}

namespace mpcrt {

mpc_status gather_optimizer_shards(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  int64_t grad_bytes = model->arena_bytes[MPC_ARENA_GRADS];
  for (int32_t slot = 0; slot < model->optimizer_slots; ++slot) {
    unsigned char *full = session->full_slots + slot * grad_bytes;
    const unsigned char *shard =
        static_cast<unsigned char *>(session->arenas[MPC_ARENA_OPTIMIZER]) +
        model->optimizer_slots_offset + slot * session->shard_capacity * 4;
    std::memcpy(full + session->shard_begin * 4, shard,
                static_cast<size_t>(session->shard_count * 4));
    if (session->group)
      if (mpc_status status = process_group_all_gather(
              session->group, full, session->shard_capacity * 4, grad_bytes))
        return status;
  }
  return MPC_OK;
}

void scatter_optimizer_shards(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  int64_t grad_bytes = model->arena_bytes[MPC_ARENA_GRADS];
  for (int32_t slot = 0; slot < model->optimizer_slots; ++slot)
    std::memcpy(
        static_cast<unsigned char *>(session->arenas[MPC_ARENA_OPTIMIZER]) +
            model->optimizer_slots_offset + slot * session->shard_capacity * 4,
        session->full_slots + slot * grad_bytes + session->shard_begin * 4,
        static_cast<size_t>(session->shard_count * 4));
}

} // namespace mpcrt

/// How long a data-parallel rank waits for the others (checked >= 0).
static double collective_timeout(const mpc_session_options *options) {
  return options->collective_timeout_seconds > 0
             ? options->collective_timeout_seconds
             : 600.0;
}

extern "C" void mpc_session_options_init(mpc_session_options *options) {
  if (!options) {
    set_error(MPC_ERROR_INVALID_ARGUMENT,
              "mpc_session_options_init: options is null");
    return;
  }
  std::memset(options, 0, sizeof(*options));
  options->target = MPC_TARGET_CPU;
  options->device = 0;
  options->seed = 0;
  options->learning_rate = NAN;
  options->momentum = NAN;
  options->weight_decay = NAN;
  options->cuda_graphs = 0;
  options->data_parallel = 0;
  options->collective_timeout_seconds = 0;
}

extern "C" mpc_status mpc_session_create(const mpc_model_desc *model,
                                         const mpc_session_options *options,
                                         mpc_session **session) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_create: session is null");
  *session = nullptr;
  if (mpc_status status = check_model_header(model))
    return status;
  if (!options)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_create: options is null (call "
                     "mpc_session_options_init)");
  int32_t option_target = mpcrt::raw_enum(options->target);
  int32_t model_target = mpcrt::raw_enum(model->target);
  if (option_target != MPC_TARGET_CPU && option_target != MPC_TARGET_CUDA)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_create: unknown target %d", option_target);
  if (model_target != MPC_TARGET_CPU && model_target != MPC_TARGET_CUDA)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s' has unknown target %d", model->name,
                     model_target);
  if (option_target != model_target)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_create: model '%s' was compiled for the %s "
                     "target, the options ask for %s (mpc compile "
                     "--target=%s builds it for that)",
                     model->name, model_target == MPC_TARGET_CUDA ? "cuda" : "cpu",
                     option_target == MPC_TARGET_CUDA ? "cuda" : "cpu",
                     option_target == MPC_TARGET_CUDA ? "cuda" : "cpu");
  if (mpc_status status = check_model(model))
    return status;

  mpc_session fresh{}; // every field zero (weights_missing too) until set
  fresh.model = model;
  fresh.seed = options->seed;
  fresh.step = 0;
  fresh.cuda = nullptr;
  fresh.group = nullptr;
  fresh.full_slots = nullptr;
  fresh.gradients_nonfinite = 0;
  fresh.checkpoint_verified = 0;
  fresh.gradients_summed = 0;
  for (int a = 0; a < MPC_NUM_ARENAS; ++a)
    fresh.arenas[a] = nullptr;
  if (mpc_status status = resolve_hyperparameter(
          "learning_rate", options->learning_rate, model->default_learning_rate,
          &fresh.learning_rate))
    return status;
  if (mpc_status status =
          resolve_hyperparameter("momentum", options->momentum,
                                 model->default_momentum, &fresh.momentum))
    return status;
  if (mpc_status status = resolve_hyperparameter(
          "weight_decay", options->weight_decay, model->default_weight_decay,
          &fresh.weight_decay))
    return status;

  mpc_session *created =
      static_cast<mpc_session *>(std::calloc(1, sizeof(mpc_session)));
  if (!created)
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "mpc_session_create: no memory for the session");
  *created = fresh;
  for (int a = 0; a < MPC_NUM_ARENAS; ++a) {
    // 64-byte aligned (a cache line, and enough for any vector load), at
    // least one line so that even an empty arena has an address.
    uint64_t bytes = static_cast<uint64_t>(model->arena_bytes[a]);
    // A cuda session's activations live on the device only: inputs go up
    // from the caller's buffers and the loss and outputs come straight
    // down, so its host copy of the arena would never be read.
    if (a == MPC_ARENA_ACTIVATIONS && model_target == MPC_TARGET_CUDA)
      bytes = 0;
    uint64_t rounded = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
    created->arenas[a] =
        rounded < bytes ? nullptr : std::aligned_alloc(64, rounded);
    if (!created->arenas[a]) {
      mpc_session_destroy(created);
      return set_error(MPC_ERROR_OUT_OF_MEMORY,
                       "mpc_session_create: cannot allocate the %s arena of "
                       "model '%s' (%llu bytes)",
                       arena_name(a), model->name,
                       static_cast<unsigned long long>(bytes));
    }
    std::memset(created->arenas[a], 0, rounded);
  }
  // Params are numbered 0.., states after them, so adding a state does not
  // change any parameter's initial value.
  for (int32_t i = 0; i < model->num_params; ++i)
    mpcrt::initialize_tensor(model->params[i], created->seed,
                             static_cast<uint32_t>(i),
                             mpcrt::tensor_data(created, model->params[i]));
  for (int32_t i = 0; i < model->num_states; ++i)
    mpcrt::initialize_tensor(model->states[i], created->seed,
                             static_cast<uint32_t>(model->num_params + i),
                             mpcrt::tensor_data(created, model->states[i]));
  // The loss scaler starts from its configuration (checked above); the
  // first step's values are the neutral ones.
  mpc_train_control *control = mpcrt::train_control(created);
  mpc_loss_scaler_init(&model->loss_scaling, &control->scaler);
  control->step_scale = control->scaler.scale;
  control->grad_norm = NAN;
  control->learning_rate = created->learning_rate;
  control->values.world_size = 1;
  if (options->data_parallel) {
    float timeout = options->collective_timeout_seconds;
    if (!(timeout >= 0) || std::isinf(timeout)) {
      mpc_session_destroy(created);
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "mpc_session_create: collective_timeout_seconds must "
                       "be a finite number >= 0 (0: 600 s), got %g",
                       static_cast<double>(timeout));
    }
    if (mpc_status status =
            join_data_parallel(created, collective_timeout(options))) {
      mpc_session_destroy(created);
      return status;
    }
    control->values.world_size = mpcrt::process_group_size(created->group);
  }
  if (mpc_status status = shard_optimizer_state(created)) {
    mpc_session_destroy(created);
    return status;
  }
  // A cuda session keeps these arenas as the host mirror of its device ones
  // (runtime/cuda/cuda_session.h) and starts from the same initial values.
  if (model_target == MPC_TARGET_CUDA) {
    // Data parallel: the ranks on one machine take a GPU each, counted
    // from options->device.
    int32_t device = options->device;
    if (created->group)
      device += mpcrt::local_rank();
    if (mpc_status status = mpcrt::cuda_session_create(
            created, device, options->cuda_graphs != 0)) {
      mpc_session_destroy(created);
      return status;
    }
    if (created->group)
      if (mpc_status status = mpcrt::cuda_join_nccl(
              created, created->group, collective_timeout(options))) {
        mpc_session_destroy(created);
        return status;
      }
  }
  if (mpc_status status = mpcrt::sync_half_copies(created)) {
    mpc_session_destroy(created);
    return status;
  }
  *session = created;
  return MPC_OK;
}

extern "C" void mpc_session_destroy(mpc_session *session) {
  if (!session)
    return;
  mpcrt::cuda_session_destroy(session->cuda);
  mpcrt::process_group_release(session->group);
  for (int a = 0; a < MPC_NUM_ARENAS; ++a)
    std::free(session->arenas[a]);
  std::free(session->weights_missing);
  std::free(session->full_slots);
  std::free(session->weights_unexpected);
  std::free(session);
}

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
      nonfinite += !std::isfinite(mpc_load_as_f32(
          model->params[p].dtype, grads + model->params[p].offset, i));
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
  bool isParam = tensor >= model->params &&
                 tensor < model->params + model->num_params;
  if (!isParam)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_get_gradient: '%s' is state, which has no gradient",
                     name);
  if (mpc_status status = mpcrt::sync_host(session))
    return status;
  // The gradient of a parameter sits at the parameter's offset in the
  // gradient arena, in the parameter's dtype, multiplied by the loss scale
  // of the step that computed it.
  const unsigned char *source =
      static_cast<const unsigned char *>(session->arenas[MPC_ARENA_GRADS]) +
      tensor->offset;
  // Data parallel: the sum over ranks, of which the mean is the gradient.
  const mpc_train_control *control = mpcrt::train_control(session);
  float scale = control->step_scale;
  float ranks = session->gradients_summed
                    ? static_cast<float>(control->values.world_size)
                    : 1.0f;
  for (int64_t i = 0; i < tensor->num_elements; ++i)
    data[i] = mpc_load_as_f32(tensor->dtype, source, i) / scale / ranks;
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
  const unsigned char *source = mpcrt::tensor_data(session, *tensor);
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
  unsigned char *target = mpcrt::tensor_data(session, *tensor);
  for (int64_t i = 0; i < tensor->num_elements; ++i)
    mpc_store_from_f32(tensor->dtype, target, i, data[i]);
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
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: '%s' has shape %s, got %s%s", function, name,
                     text(tensor->shape, tensor->rank).c_str(),
                     text(shape, rank).c_str(),
                     reversed ? " (transposed?)" : "");
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
  *stats = result;
  return MPC_OK;
}

// ----------------------------------------------------------------------------
// Data parallel

extern "C" int32_t mpc_session_rank(const mpc_session *session) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_rank: session is null"),
           -1;
  return session->group ? mpcrt::process_group_rank(session->group) : 0;
}

extern "C" int32_t mpc_session_world_size(const mpc_session *session) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_world_size: session is null"),
           -1;
  return session->group ? mpcrt::process_group_size(session->group) : 1;
}

extern "C" int64_t mpc_session_arena_bytes(const mpc_session *session,
                                           int32_t arena) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_arena_bytes: session is null"),
           -1;
  if (arena < 0 || arena >= MPC_NUM_ARENAS)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_arena_bytes: arena %d is outside 0..%d",
                     arena, MPC_NUM_ARENAS - 1),
           -1;
  const mpc_model_desc *model = session->model;
  if (arena == MPC_ARENA_OPTIMIZER && model->shard_optimizer)
    return model->optimizer_slots_offset +
           model->optimizer_slots * session->shard_capacity * 4;
  return model->arena_bytes[arena];
}

extern "C" mpc_status mpc_rt_reduce_gradients(mpc_step_context *context,
                                              float *grads, long long count) {
  if (!context->process_group)
    return MPC_OK;
  return mpcrt::process_group_sum_in_rank_order(
      static_cast<mpcrt::process_group *>(context->process_group), grads,
      count);
}

// On the cpu target every bucket is summed when it is issued.
extern "C" mpc_status mpc_rt_gradients_reduced(mpc_step_context *) {
  return MPC_OK;
}

extern "C" mpc_status mpc_rt_gather_shards(mpc_step_context *context,
                                           void *data, int32_t element_bytes,
                                           long long count) {
  if (!context->process_group)
    return MPC_OK;
  return mpcrt::process_group_all_gather(
      static_cast<mpcrt::process_group *>(context->process_group), data,
      context->shard_capacity * element_bytes, count * element_bytes);
}
