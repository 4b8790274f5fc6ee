//===- mpc_runtime.cpp - sessions -------------------------------*- C++ -*-===//
//
// This file implements the session part of mpc_runtime.h over the
// descriptor of mpc_model.h: creating and destroying sessions, joining a
// data-parallel job (descriptor checks are in model_desc.cpp, steps and
// parameters in steps.cpp, checkpoints in checkpoint.cpp). The rule throughout:
// check everything a call depends on first, then change state, so that a
// failing call leaves the session as it was.
//
//===----------------------------------------------------------------------===//

#include "runtime/mpc_runtime.h"
#include "runtime/mpc_model.h"

#include "runtime/cuda/cuda_session.h"
#include "runtime/device/mpc_emulator.h"
#include "runtime/error.h"
#include "runtime/half.h"
#include "runtime/init.h"
#include "runtime/loss_scaler.h"
#include "runtime/model_desc.h"
#include "runtime/process_group.h"
#include "runtime/session.h"
#include "runtime/thread_pool.h"

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using mpcrt::arena_name;
using mpcrt::check_model;
using mpcrt::check_model_header;
using mpcrt::set_error;
namespace {

/// A zeroed arena of `bytes` (at least one): 256-byte aligned as
/// cuMemAlloc's memory is, and registered as device memory, so that the
/// block emulator's counters see its sectors and lines as a GPU would.
void *allocate_arena(uint64_t bytes) {
  constexpr uint64_t alignment = 256;
  uint64_t rounded =
      (std::max<uint64_t>(bytes, 1) + alignment - 1) / alignment * alignment;
  if (rounded < bytes)
    return nullptr;
  void *arena = std::aligned_alloc(alignment, rounded);
  if (!arena)
    return nullptr;
  std::memset(arena, 0, rounded);
  mpc_emu_register_global_memory(arena, rounded);
  return arena;
}

void free_arena(void *arena) {
  if (!arena)
    return;
  mpc_emu_unregister_global_memory(arena);
  std::free(arena);
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
  // Sharded master weights: the rank's shard, which the ranks gather.
  context.process_group = session->group;
  context.shard_begin = session->shard_begin;
  context.shard_count = session->shard_count;
  context.shard_capacity = session->shard_capacity;
  // On the cuda target the kernels run on the device arenas.
  mpc_status status;
  if (session->cuda) {
    status = mpcrt::cuda_run_step(session, model->sync_half_copies, &context,
                                  /*values=*/nullptr, /*loss=*/nullptr,
                                  &index_error);
  } else {
    mpcrt::current_pool_scope threads(session->pool);
    status = model->sync_half_copies(&context);
  }
  if (status != MPC_OK)
    return set_error(MPC_ERROR_INTERNAL,
                     "model '%s': sync_half_copies failed (status %d)",
                     model->name, mpcrt::raw_enum(status));
  return MPC_OK;
}

} // namespace mpcrt

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
  if (mpc_status status = mpcrt::process_group_broadcast(
          session->group, session->arenas[MPC_ARENA_PARAMS],
          model->arena_bytes[MPC_ARENA_PARAMS]))
    return status;
  // Sharded master weights: initialised whole, not yet in the arenas.
  if (!session->full_params)
    return MPC_OK;
  return mpcrt::process_group_broadcast(session->group, session->full_params,
                                        mpcrt::flat_elements(model) * 4);
}

/// The shard of the optimizer state this session keeps: all of it unless
/// the model shards it over the ranks (--shard-optimizer), when rank r
/// keeps elements [r * capacity, (r + 1) * capacity) of each slot, in an
/// optimizer arena that size (the control block, then the slots' shards).
static mpc_status shard_optimizer_state(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  int64_t n = mpcrt::flat_elements(model);
  session->shard_begin = 0;
  session->shard_count = n;
  session->shard_capacity = n;
  if (!model->shard_optimizer || !session->group)
    return MPC_OK;
  int64_t ranks = mpcrt::process_group_size(session->group);
  int64_t rank = mpcrt::process_group_rank(session->group);
  // Whole chunks of the gradient statistics (each then one rank's), and
  // at least 16 elements (64 bytes of f32), so that every shard is aligned.
  int64_t unit = std::max<int64_t>(16, model->shard_unit) / 16 * 16;
  int64_t capacity = ((n + ranks - 1) / ranks + unit - 1) / unit * unit;
  session->shard_capacity = capacity;
  session->shard_begin = std::min(n, rank * capacity);
  session->shard_count = std::min(capacity, n - session->shard_begin);
  // The control block stays where it is; the slots shrink to the shard.
  uint64_t bytes = static_cast<uint64_t>(
      mpcrt::session_arena_bytes(session, MPC_ARENA_OPTIMIZER));
  void *arena = allocate_arena(bytes);
  if (!arena)
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "mpc_session_create: cannot allocate the optimizer "
                     "arena's shard of model '%s' (%llu bytes)",
                     model->name, static_cast<unsigned long long>(bytes));
  std::memcpy(arena, session->arenas[MPC_ARENA_OPTIMIZER],
              static_cast<size_t>(model->optimizer_slots_offset));
  free_arena(session->arenas[MPC_ARENA_OPTIMIZER]);
  session->arenas[MPC_ARENA_OPTIMIZER] = arena;
  return MPC_OK;
}

namespace mpcrt {

/// Slot `slot`'s shard in this rank's optimizer arena, and the slot whole
/// in full_slots.
static unsigned char *slot_shard(mpc_session *session, int32_t slot) {
  return static_cast<unsigned char *>(session->arenas[MPC_ARENA_OPTIMIZER]) +
         session->model->optimizer_slots_offset +
         slot_begin(session->model, slot, session->shard_capacity);
}
static unsigned char *full_slot(mpc_session *session, int32_t slot) {
  return session->full_slots +
         slot_begin(session->model, slot, flat_elements(session->model));
}

/// This rank's shard of the f32 master weights (shard_master_weights),
/// after the slots' shards.
static float *master_shard(mpc_session *session) {
  return reinterpret_cast<float *>(
      static_cast<unsigned char *>(session->arenas[MPC_ARENA_OPTIMIZER]) +
      session->model->optimizer_slots_offset +
      shard_slot_bytes(session->model, session->shard_capacity));
}

const float *local_master_weights(mpc_session *session,
                                  const mpc_tensor_desc &param) {
  const mpc_model_desc *model = session->model;
  int64_t index = &param - model->params;
  if (model->param_copy_offsets[index] >= 0)
    return reinterpret_cast<const float *>(
        static_cast<unsigned char *>(session->arenas[MPC_ARENA_PARAMS]) +
        model->param_copy_offsets[index]);
  int64_t first = param.offset / 4;
  if (first < session->shard_begin ||
      first + param.num_elements > session->shard_begin + session->shard_count)
    return nullptr;
  return master_shard(session) + (first - session->shard_begin);
}

static mpc_status gather_optimizer_shards(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  int64_t n = flat_elements(model);
  for (int32_t slot = 0; slot < model->optimizer_slots; ++slot) {
    int64_t element = slot_element_bytes(model, slot);
    unsigned char *full = full_slot(session, slot);
    if (is_accumulator_slot(model, slot)) {
      // Whole on every rank: this rank's micro-batches' sum.
      std::memcpy(full, slot_shard(session, slot),
                  static_cast<size_t>(n * element));
      // After an optimizer step that reduce-scattered it, the ranks' sum
      // is in its owners' shards: gathered, it is what the all-reduce of
      // an unsharded session leaves on every rank, bit for bit.
      if (session->gradients_scattered && session->group)
        if (mpc_status status = process_group_all_gather(
                session->group, full, session->shard_capacity * element,
                n * element))
          return status;
      continue;
    }
    std::memcpy(full + session->shard_begin * element,
                slot_shard(session, slot),
                static_cast<size_t>(session->shard_count * element));
    if (session->group)
      if (mpc_status status = process_group_all_gather(
              session->group, full, session->shard_capacity * element,
              n * element))
        return status;
  }
  return MPC_OK;
}

static void scatter_optimizer_shards(mpc_session *session) {
  const mpc_model_desc *model = session->model;
  for (int32_t slot = 0; slot < model->optimizer_slots; ++slot) {
    int64_t element = slot_element_bytes(model, slot);
    if (is_accumulator_slot(model, slot))
      std::memcpy(slot_shard(session, slot), full_slot(session, slot),
                  static_cast<size_t>(flat_elements(model) * element));
    else
      std::memcpy(slot_shard(session, slot),
                  full_slot(session, slot) + session->shard_begin * element,
                  static_cast<size_t>(session->shard_count * element));
  }
}

mpc_status stage_whole_state(mpc_session *session, bool gather,
                             bool with_slots) {
  const mpc_model_desc *model = session->model;
  if (!model->shard_optimizer)
    return MPC_OK;
  int64_t n = flat_elements(model);
  size_t slots =
      with_slots
          ? static_cast<size_t>(slot_begin(model, model->optimizer_slots, n))
          : 0;
  size_t params = model->shard_master_weights ? static_cast<size_t>(n) * 4 : 0;
  session->full_slots =
      with_slots
          ? static_cast<unsigned char *>(std::calloc(slots ? slots : 1, 1))
          : nullptr;
  session->full_params =
      params ? static_cast<unsigned char *>(std::calloc(params, 1)) : nullptr;
  if ((with_slots && !session->full_slots) ||
      (params && !session->full_params)) {
    unstage_whole_state(session, /*write_back=*/false);
    return set_error(MPC_ERROR_OUT_OF_MEMORY,
                     "no memory for the whole optimizer state of model '%s' "
                     "(%zu bytes), which checkpoints read and write",
                     model->name, slots + params);
  }
  if (gather && with_slots)
    if (mpc_status status = gather_optimizer_shards(session)) {
      unstage_whole_state(session, /*write_back=*/false);
      return status;
    }
  if (!params)
    return MPC_OK;
  float *whole = reinterpret_cast<float *>(session->full_params);
  std::memcpy(whole + session->shard_begin, master_shard(session),
              static_cast<size_t>(session->shard_count) * 4);
  for (int32_t i = 0; i < model->num_params; ++i)
    if (model->param_copy_offsets[i] >= 0)
      std::memcpy(whole + model->params[i].offset / 4,
                  local_master_weights(session, model->params[i]),
                  static_cast<size_t>(model->params[i].num_elements) * 4);
  if (gather && session->group)
    if (mpc_status status = process_group_all_gather(
            session->group, whole, session->shard_capacity * 4, n * 4)) {
      unstage_whole_state(session, /*write_back=*/false);
      return status;
    }
  return MPC_OK;
}

void unstage_whole_state(mpc_session *session, bool write_back) {
  const mpc_model_desc *model = session->model;
  if (write_back && session->full_slots)
    scatter_optimizer_shards(session);
  if (write_back && session->full_params) {
    const float *whole = reinterpret_cast<const float *>(session->full_params);
    std::memcpy(master_shard(session), whole + session->shard_begin,
                static_cast<size_t>(session->shard_count) * 4);
    for (int32_t i = 0; i < model->num_params; ++i)
      if (int64_t copy = model->param_copy_offsets[i]; copy >= 0)
        std::memcpy(
            static_cast<unsigned char *>(session->arenas[MPC_ARENA_PARAMS]) +
                copy,
            whole + model->params[i].offset / 4,
            static_cast<size_t>(model->params[i].num_elements) * 4);
  }
  std::free(session->full_slots);
  std::free(session->full_params);
  session->full_slots = nullptr;
  session->full_params = nullptr;
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
  options->threads = 0;
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
                     model->name,
                     model_target == MPC_TARGET_CUDA ? "cuda" : "cpu",
                     option_target == MPC_TARGET_CUDA ? "cuda" : "cpu",
                     option_target == MPC_TARGET_CUDA ? "cuda" : "cpu");
  if (mpc_status status = check_model(model))
    return status;

  if (options->threads < 0 || options->threads > 4096)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_create: threads is %d; expected 0 (the "
                     "default) or a number of threads from 1 to 4096",
                     options->threads);
  int32_t threads = 1;
  if (model_target == MPC_TARGET_CPU) {
    threads = options->threads ? options->threads
                               : mpcrt::default_thread_count();
    if (threads == 0) // $MPC_THREADS is malformed: said why
      return MPC_ERROR_INVALID_ARGUMENT;
  }

  mpc_session fresh{}; // every field zero (weights_missing too) until set
  fresh.threads = threads;
  fresh.model = model;
  fresh.seed = options->seed;
  fresh.step = 0;
  fresh.cuda = nullptr;
  fresh.group = nullptr;
  fresh.full_slots = nullptr;
  fresh.full_params = nullptr;
  fresh.gradients_nonfinite = 0;
  fresh.checkpoint_verified = 0;
  fresh.gradients_summed = 0;
  fresh.gradients_scattered = 0;
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
  if (threads > 1) {
    created->pool = new (std::nothrow) mpcrt::thread_pool(threads);
    if (!created->pool) {
      mpc_session_destroy(created);
      return set_error(MPC_ERROR_OUT_OF_MEMORY,
                       "mpc_session_create: no memory for the thread pool");
    }
  }
  for (int a = 0; a < MPC_NUM_ARENAS; ++a) {
    // Even an empty arena has an address.
    uint64_t bytes = static_cast<uint64_t>(model->arena_bytes[a]);
    // A cuda session's activations live on the device only: inputs go up
    // from the caller's buffers and the loss and outputs come straight
    // down, so its host copy of the arena would never be read.
    if (a == MPC_ARENA_ACTIVATIONS && model_target == MPC_TARGET_CUDA)
      bytes = 0;
    created->arenas[a] = allocate_arena(bytes);
    if (!created->arenas[a]) {
      mpc_session_destroy(created);
      return set_error(MPC_ERROR_OUT_OF_MEMORY,
                       "mpc_session_create: cannot allocate the %s arena of "
                       "model '%s' (%llu bytes)",
                       arena_name(a), model->name,
                       static_cast<unsigned long long>(bytes));
    }
  }
  // Sharded master weights: initialised whole, in full_params (staged
  // until the rank knows its shard).
  if (model->shard_master_weights) {
    created->full_params = static_cast<unsigned char *>(std::calloc(
        static_cast<size_t>(mpcrt::flat_elements(model)) * 4 + 1, 1));
    if (!created->full_params) {
      mpc_session_destroy(created);
      return set_error(MPC_ERROR_OUT_OF_MEMORY,
                       "mpc_session_create: no memory for the initial "
                       "parameters of model '%s'",
                       model->name);
    }
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
  // This rank's shard of the master weights and the f32 copies.
  if (created->full_params)
    mpcrt::unstage_whole_state(created, /*write_back=*/true);
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
  delete session->pool;
  for (int a = 0; a < MPC_NUM_ARENAS; ++a)
    free_arena(session->arenas[a]);
  std::free(session->weights_missing);
  std::free(session->full_slots);
  std::free(session->full_params);
  std::free(session->weights_unexpected);
  std::free(session);
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

extern "C" int32_t mpc_session_threads(const mpc_session *session) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_threads: session is null"),
           -1;
  return session->threads;
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
  return mpcrt::session_arena_bytes(session, arena);
}

extern "C" int64_t mpc_session_workspace_bytes(const mpc_session *session) {
  if (!session)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "mpc_session_workspace_bytes: session is null"),
           -1;
  return mpcrt::cuda_workspace_bytes(session->cuda);
}

// On the cpu target a bucket cannot overlap backward (the step runs on
// the calling thread's pool), so the buckets are summed together once
// backward has issued them all: one collective a step, not one a bucket.
extern "C" mpc_status mpc_rt_reduce_gradients(mpc_step_context *context,
                                              float *grads, long long count) {
  if (context->process_group)
    mpcrt::process_group_defer_sum(
        static_cast<mpcrt::process_group *>(context->process_group), grads,
        count);
  return MPC_OK;
}

extern "C" mpc_status mpc_rt_reduce_scatter_gradients(
    mpc_step_context *context, float *flat, long long begin, long long count) {
  if (context->process_group)
    mpcrt::process_group_defer_scattered_sum(
        static_cast<mpcrt::process_group *>(context->process_group), flat,
        begin, count, context->shard_capacity);
  return MPC_OK;
}

static_assert(offsetof(mpc_train_control, partial_nonfinite) ==
                  offsetof(mpc_train_control, partial_sumsq) +
                      MPC_GRAD_STATS_BLOCKS * sizeof(float),
              "a sharded step sums the partial statistics as one array");

extern "C" mpc_status mpc_rt_sum_across_ranks(mpc_step_context *context,
                                              float *data, long long count) {
  if (!context->process_group)
    return MPC_OK;
  return mpcrt::process_group_sum_in_rank_order(
      static_cast<mpcrt::process_group *>(context->process_group), data,
      count);
}

extern "C" mpc_status mpc_rt_gradients_reduced(mpc_step_context *context) {
  if (!context->process_group)
    return MPC_OK;
  return mpcrt::process_group_sum_deferred(
      static_cast<mpcrt::process_group *>(context->process_group));
}

// All-gathers every rank's values, then takes the largest: a few floats a
// step (the FP8 amaxes), where one collective's latency is what counts.
extern "C" mpc_status mpc_rt_max_across_ranks(mpc_step_context *context,
                                              float *data, long long count) {
  if (!context->process_group || count <= 0)
    return MPC_OK;
  auto *group = static_cast<mpcrt::process_group *>(context->process_group);
  int32_t ranks = mpcrt::process_group_size(group);
  int32_t rank = mpcrt::process_group_rank(group);
  std::vector<float> all(static_cast<size_t>(count) * ranks);
  std::memcpy(all.data() + static_cast<size_t>(count) * rank, data,
              static_cast<size_t>(count) * sizeof(float));
  if (mpc_status status = mpcrt::process_group_all_gather(
          group, all.data(), count * static_cast<int64_t>(sizeof(float)),
          count * static_cast<int64_t>(sizeof(float)) * ranks))
    return status;
  for (int32_t r = 0; r < ranks; ++r)
    for (long long i = 0; i < count; ++i)
      data[i] = std::max(data[i], all[static_cast<size_t>(r * count + i)]);
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
