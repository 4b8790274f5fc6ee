//===- model_desc.cpp - checking a model descriptor -------------*- C++ -*-===//
//
// This file implements the checks of a generated model descriptor
// (mpc_model.h) that every session and metadata query starts with, and the
// metadata part of mpc_runtime.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/model_desc.h"

#include "runtime/error.h"
#include "runtime/init.h"
#include "runtime/loss_scaler.h"
#include "runtime/mpc_runtime.h"
#include "runtime/session.h"

#include <cmath>
#include <cstring>
#include <set>
#include <string>

using mpcrt::set_error;

namespace mpcrt {

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

static mpc_status check_tensor(const mpc_model_desc *model, const char *kind,
                               int32_t index, const mpc_tensor_desc &tensor,
                               int32_t expected_arena, int32_t bound_arena) {
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
      end > model->arena_bytes[bound_arena])
    return set_error(
        MPC_ERROR_INVALID_ARGUMENT,
        "model '%s': %s '%s' at offset %lld (%lld bytes) does "
        "not fit, aligned, in the %s arena of %lld bytes",
        model->name, kind, name, static_cast<long long>(tensor.offset),
        static_cast<long long>(bytes), arena_name(bound_arena),
        static_cast<long long>(model->arena_bytes[bound_arena]));
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

static mpc_status check_tensor_list(const mpc_model_desc *model,
                                    const char *kind, int32_t count,
                                    const mpc_tensor_desc *tensors,
                                    int32_t arena,
                                    std::set<std::string> *names,
                                    int32_t bound_arena = -1) {
  if (count < 0 || (count > 0 && !tensors))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': bad %s list (%d entries at %p)", model->name,
                     kind, count, static_cast<const void *>(tensors));
  for (int32_t i = 0; i < count; ++i) {
    if (mpc_status status =
            check_tensor(model, kind, i, tensors[i], arena,
                         bound_arena >= 0 ? bound_arena : arena))
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

/// shard_master_weights: a sharded model of f32 parameters,
/// each parameter's f32 copy inside the parameter arena or absent, and a
/// sync_half_copies (which makes the half copies from the shards).
static mpc_status check_sharded_master_weights(const mpc_model_desc *model) {
  if (!model->shard_master_weights)
    return MPC_OK;
  if (!model->shard_optimizer || !model->param_copy_offsets ||
      !model->sync_half_copies)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s' shards its master weights, which needs "
                     "shard_optimizer, param_copy_offsets and "
                     "sync_half_copies",
                     model->name);
  for (int32_t i = 0; i < model->num_params; ++i) {
    const mpc_tensor_desc &param = model->params[i];
    int64_t copy = model->param_copy_offsets[i], end = 0;
    if (param.dtype != MPC_F32 ||
        (copy != -1 &&
         (copy < 0 || copy % 4 != 0 ||
          __builtin_add_overflow(copy, mpcrt::tensor_bytes(param), &end) ||
          end > model->arena_bytes[MPC_ARENA_PARAMS])))
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "model '%s': param '%s' (%s) with its f32 copy at "
                       "offset %lld does not fit in the params arena of %lld "
                       "bytes (sharded master weights are f32)",
                       model->name, param.name, mpcrt::dtype_name(param.dtype),
                       static_cast<long long>(copy),
                       static_cast<long long>(
                           model->arena_bytes[MPC_ARENA_PARAMS]));
  }
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
  // Sharded master weights: a parameter's offset is its place in the flat
  // buffer, which the gradients' arena holds (its f32 copy, if any, is
  // checked below).
  if (mpc_status status = check_tensor_list(
          model, "param", model->num_params, model->params, MPC_ARENA_PARAMS,
          &params,
          model->shard_master_weights ? MPC_ARENA_GRADS : MPC_ARENA_PARAMS))
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
    if (is_param && model->gradient_dtypes) {
      mpc_dtype gradient = model->gradient_dtypes[i];
      if (!mpcrt::dtype_is_float(gradient) ||
          mpc_dtype_size(gradient) > mpc_dtype_size(tensor.dtype))
        return set_error(MPC_ERROR_INVALID_ARGUMENT,
                         "%s: its gradient's dtype %s is not a float type "
                         "as wide as %s or narrower",
                         what, mpcrt::dtype_name(gradient),
                         mpcrt::dtype_name(tensor.dtype));
    }
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
  // Every slot holds one element a parameter element, in its dtype (or,
  // without slot dtypes, in the parameters').
  int64_t slot_bytes = 0;
  int64_t elements = mpcrt::flat_elements(model);
  for (int32_t slot = 0; slot < model->optimizer_slots; ++slot) {
    if (!model->optimizer_slot_names[slot] ||
        !*model->optimizer_slot_names[slot])
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "model '%s': optimizer slot %d has no name", model->name,
                       slot);
    mpc_dtype dtype =
        model->optimizer_slot_dtypes
            ? model->optimizer_slot_dtypes[slot]
            : (model->num_params ? model->params[0].dtype : MPC_F32);
    int64_t bytes = 0;
    if (dtype != MPC_F32 && dtype != MPC_F16 && dtype != MPC_BF16)
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "model '%s': optimizer slot %d has dtype %d, not a "
                       "float type",
                       model->name, slot, static_cast<int>(dtype));
    if (__builtin_mul_overflow(
            elements, static_cast<int64_t>(mpc_dtype_size(dtype)), &bytes) ||
        __builtin_add_overflow(slot_bytes, (bytes + 3) / 4 * 4, &slot_bytes))
      slot_bytes = INT64_MAX;
  }
  // Slots, then the control block, in the optimizer arena; sharded, the
  // control block, then the slots.
  int64_t control_end = 0, slots_end = 0;
  bool sharded = model->shard_optimizer != 0;
  if (model->optimizer_slots_offset < 0 ||
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
        "model '%s': %d optimizer slots of %lld bytes in all and the "
        "training control block at offset %lld (%zu bytes) do not fit in "
        "the optimizer arena of %lld bytes",
        model->name, model->optimizer_slots, static_cast<long long>(slot_bytes),
        static_cast<long long>(model->control_offset),
        sizeof(mpc_train_control),
        static_cast<long long>(model->arena_bytes[MPC_ARENA_OPTIMIZER]));
  if (model->shard_unit < 0)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "model '%s': a shard unit of %lld elements",
                     model->name, static_cast<long long>(model->shard_unit));
  if (mpc_status status = check_sharded_master_weights(model))
    return status;
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
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "model '%s': %s", model->name,
                     std::string(mpc_last_error()).c_str());
  return MPC_OK;
}

} // namespace mpcrt

using mpcrt::check_model_header;

namespace {

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

} // namespace

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
