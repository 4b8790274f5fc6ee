/*===- mpc_model.h - the ABI between generated models and libmpcrt -*- C -*-===*
 *
 * `mpc compile` emits, per model, one constant mpc_model_desc and the step
 * functions it points to. The runtime owns memory: it allocates one buffer
 * per arena (sizes from the memory plan), initialises parameters and state
 * from their descriptors, copies inputs to their planned offsets, calls a
 * step function, and reads the loss and outputs back.
 *
 * Applications do not include this header; they use mpc_runtime.h.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_MPC_MODEL_H
#define MPC_RUNTIME_MPC_MODEL_H

#include "runtime/device/mpc_training.h"
#include "runtime/mpc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MPC_MODEL_ABI_VERSION 10

/* Flat buffers of the memory plan. Offsets in tensor descriptors are byte
 * offsets into one of these, each aligned to its dtype's size. The runtime
 * allocates every arena 64-byte aligned and zero-filled. The gradient and
 * the optimizer slots of a parameter mirror it exactly: same offset, same
 * dtype (fp32 for master weights). The optimizer arena ends with the
 * training control block (mpc_train_control: the loss scaler's state and
 * the optimizer's per-step values). */
typedef enum mpc_arena {
  MPC_ARENA_PARAMS = 0,      /* parameters (master weights) and state */
  MPC_ARENA_GRADS = 1,       /* gradients, same layout as the params */
  MPC_ARENA_OPTIMIZER = 2,   /* optimizer state, same layout per slot */
  MPC_ARENA_ACTIVATIONS = 3, /* inputs, outputs, temporaries (by liveness) */
  MPC_NUM_ARENAS = 4,
} mpc_arena;

/* Initialisers, numbered as the dialect's InitKind. */
typedef enum mpc_init_kind {
  MPC_INIT_ZEROS = 0,
  MPC_INIT_ONES = 1,
  MPC_INIT_CONSTANT = 2,
  MPC_INIT_NORMAL = 3,          /* args: (std) or (mean, std) */
  MPC_INIT_UNIFORM = 4,         /* args: (low, high) */
  MPC_INIT_KAIMING_UNIFORM = 5, /* args: () or (negative slope a) */
  MPC_INIT_KAIMING_NORMAL = 6,
  MPC_INIT_XAVIER_UNIFORM = 7, /* args: () or (gain) */
  MPC_INIT_XAVIER_NORMAL = 8,
} mpc_init_kind;

typedef struct mpc_tensor_desc {
  const char *name;
  mpc_dtype dtype;
  int32_t rank;
  int64_t shape[MPC_MAX_RANK];
  int64_t num_elements;
  int32_t arena;       /* mpc_arena */
  int64_t offset;      /* bytes into the arena */
  /* Parameters and state: how to initialise. */
  int32_t init_kind;   /* mpc_init_kind */
  int32_t num_init_args;
  double init_args[2];
  /* Integer inputs used as class targets or embedding indices: valid values
   * are [0, index_bound), plus ignore_index when has_ignore_index. 0: no
   * check. */
  int64_t index_bound;
  int32_t has_ignore_index;
  int64_t ignore_index;
} mpc_tensor_desc;

/* `mpc compile --debug-nonfinite`: after every op output the step
 * materialises, a check kernel looks for inf/NaN; the first that finds one
 * (an atomic exchange on `found`) fills this record, and later checks of the
 * step do nothing. Generated kernels declare the same layout
 * (mpc_nonfinite_record_dev, checked by static_asserts in the host code). */
typedef struct mpc_nonfinite_record {
  int32_t found; /* 0 until a check met inf/NaN */
  int32_t site;  /* index into mpc_model_desc.debug_sites */
  int64_t num_elements;
  int64_t nan_count;
  int64_t inf_count;
  /* Casts to f16/bf16: finite source values that round to inf in the half
   * type (beyond its range); -1 for other ops. */
  int64_t outside_half_range;
  float max_abs_finite; /* largest |value| among the finite ones */
  /* Delayed FP8 scaling: the first quantization of the step whose finite
   * values outgrew its scale (clipped to the format's largest), claimed as
   * `found` is (a saturation is not a non-finite value: neither hides the
   * other). */
  int32_t fp8_found;
  int32_t fp8_gemm_site;     /* the first FP8 GEMM that reads the tensor */
  int32_t fp8_quantize_site; /* the mpc.quantize (located at the tensor) */
  int32_t fp8_operand;       /* 0: the GEMM's lhs, 1: its rhs */
  int32_t fp8_format;        /* 0: e4m3, 1: e5m2 */
  float fp8_amax;            /* the tensor's largest finite magnitude */
  float fp8_scale;           /* the scale it was quantized with */
  int64_t fp8_num_elements;
  int64_t fp8_saturated; /* elements clipped */
} mpc_nonfinite_record;

/* One checked op output of a --debug-nonfinite build. */
typedef struct mpc_debug_site {
  const char *op;       /* "mpc.scale" */
  const char *location; /* "model.mlir:12:8", or "-" */
  int32_t backward;     /* 1: the op computes gradients (backward pass) */
} mpc_debug_site;

/* A convolution the cuda target runs through cuDNN: its direction, with
 * the three tensors named as the forward pass names them, so that
 * mpc_rt_cuda_conv(index, x, w, y) reads and writes
 *   MPC_CONV_FORWARD          x and w, writes y;
 *   MPC_CONV_BACKWARD_DATA    y (dy) and w, writes x (dx);
 *   MPC_CONV_BACKWARD_FILTER  x and y (dy), writes w (dw).
 * Tensors are dense NCHW; the filter is [K, C / groups, R, S]. The session
 * builds an execution plan for each when it is created, so that a shape
 * cuDNN has no engine for is an error there, naming `origin`. */
typedef enum mpc_conv_direction {
  MPC_CONV_FORWARD = 0,
  MPC_CONV_BACKWARD_DATA = 1,
  MPC_CONV_BACKWARD_FILTER = 2,
} mpc_conv_direction;

typedef struct mpc_conv_desc {
  const char *origin; /* "mpc.conv2d_grad_input at model.mlir:12:8" */
  int32_t direction;  /* mpc_conv_direction */
  mpc_dtype x_dtype, w_dtype, y_dtype;
  int64_t x[4]; /* N, C, H, W */
  int64_t w[4]; /* K, C / groups, R, S */
  int64_t y[4]; /* N, K, P, Q */
  int64_t stride[2], padding[2], dilation[2];
  /* 1: the result is added to what its buffer holds (cuDNN's beta = 1),
   * as a forward convolution with a bias adds onto the broadcast bias. */
  int32_t accumulate;
} mpc_conv_desc;

/* What a step function sees. A step function returns MPC_OK, or a status
 * the runtime passes on (with a message naming the model and the step); it
 * must not abort. Generated cpu code may call the runtime's mpc_rt_*
 * kernels (runtime/gemm.h). */
typedef struct mpc_step_context {
  void *arenas[MPC_NUM_ARENAS];
  uint64_t seed;        /* session seed, for dropout masks */
  int64_t step;         /* train steps (micro-batches) taken so far; dropout
                           masks are drawn from (seed, step) */
  float learning_rate;
  float momentum;
  float weight_decay;
  int32_t training;     /* 1 in train_step, 0 in eval */
  /* 1 in train_step: apply the optimizer update and update running
   * statistics. 0 when only the loss and gradients are wanted (the step and
   * the model's state are left as they were). */
  int32_t apply_update;
  /* With accumulate_steps = N: which micro-batch of the optimizer step this
   * is, 0..N-1; the optimizer runs after micro-batch N-1. */
  int32_t micro_step;
  /* Set by a kernel that met an out-of-range index; the runtime turns it
   * into MPC_ERROR_OUT_OF_RANGE. */
  int32_t *index_error;
  /* Where --debug-nonfinite checks record the first offender; the runtime
   * clears it before every step. Never null. */
  mpc_nonfinite_record *nonfinite;
  /* The data-parallel job's ranks (runtime/process_group.h); null in a
   * session of one process. */
  void *process_group;
  /* The elements of the flat parameter buffer this rank updates: all of
   * them (0, n, n) unless the model shards its optimizer state
   * (--shard-optimizer), when rank r updates [shard_begin, shard_begin +
   * shard_count) and keeps shard_capacity elements per optimizer slot. */
  int64_t shard_begin;
  int64_t shard_count;
  int64_t shard_capacity;
} mpc_step_context;

/* Models compiled with --data-parallel call this after the backward pass:
 * the f32 gradients become, on every rank, the sum over ranks in rank
 * order (from 0: ((0 + g_0) + g_1) + ...), as --accumulate sums
 * micro-batches; the optimizer divides by ranks x micro-batches. A no-op
 * without a process group. */
mpc_status mpc_rt_reduce_gradients(mpc_step_context *context, float *grads,
                                   long long count);
/* --shard-optimizer, in a step that updates: the ZeRO-1 reduce-scatter. Of the `count` f32 gradients at flat + begin (flat: the
 * flat gradient buffer, or the accumulator), rank r sums only those in its
 * shard [shard_begin, shard_begin + shard_count), bit for bit as
 * mpc_rt_reduce_gradients does; the others stay this rank's. Deferred as
 * mpc_rt_reduce_gradients is, to mpc_rt_gradients_reduced (on the cuda
 * target: each piece reduced to its owner on the communication stream). */
mpc_status mpc_rt_reduce_scatter_gradients(mpc_step_context *context,
                                           float *flat, long long begin,
                                           long long count);
/* The `count` floats at `data` become, on every rank and at once, their
 * sum over the ranks in rank order (the sharded step's partial gradient
 * statistics; on the cuda target in NCCL's order, which gives the same
 * sums where, as there, each value is one rank's and +0 on the others).
 * A no-op without a process group. */
mpc_status mpc_rt_sum_across_ranks(mpc_step_context *context, float *data,
                                   long long count);
/* Called after the last bucket's mpc_rt_reduce_gradients, before the
 * optimizer reads the gradients: on the cuda target the reductions run on
 * a stream of their own, and this makes the step wait for them. */
mpc_status mpc_rt_gradients_reduced(mpc_step_context *context);
/* --shard-optimizer: after each rank updated its shard of the `count`
 * elements at `data` (the flat f32 parameters, or their half copies:
 * `element_bytes` each), every rank gets every shard. A no-op without a
 * process group. */
mpc_status mpc_rt_gather_shards(mpc_step_context *context, void *data,
                                int32_t element_bytes, long long count);

/* Models with delayed FP8 scaling, data parallel: the `count` floats at
 * `data` (the step's amaxes) become the largest over the ranks, on every
 * rank. A no-op without a process group. */
mpc_status mpc_rt_max_across_ranks(mpc_step_context *context, float *data,
                                   long long count);

typedef mpc_status (*mpc_step_fn)(mpc_step_context *context);

struct mpc_model_desc {
  uint32_t abi_version; /* MPC_MODEL_ABI_VERSION */
  const char *name;
  mpc_target target;
  int32_t num_inputs;
  const mpc_tensor_desc *inputs;   /* in MPC_ARENA_ACTIVATIONS */
  int32_t num_params;
  const mpc_tensor_desc *params;   /* in MPC_ARENA_PARAMS; the gradient of
                                      params[i] is at the same offset in
                                      MPC_ARENA_GRADS */
  int32_t num_states;
  const mpc_tensor_desc *states;   /* in MPC_ARENA_PARAMS, after params */
  int32_t num_outputs;
  const mpc_tensor_desc *outputs;  /* [0] is the f32 loss; in activations */
  int64_t arena_bytes[MPC_NUM_ARENAS];
  /* Optimizer state per parameter, in slots: with n the elements of the
   * flat parameter buffer and e the index of params[i]'s first element in
   * it, slot s of params[i] is at optimizer_slots_offset + (the bytes of n
   * elements of each slot before s, each rounded up to 4) + e * (slot s's
   * element bytes) in MPC_ARENA_OPTIMIZER, in optimizer_slot_dtypes[s] (the
   * moments may be bf16 beside f32 parameters: --optimizer-state; null, as
   * hand-written descriptors may leave it: each slot in its parameter's
   * dtype, laid out as the gradients, one gradient-arena-sized region a
   * slot), named
   * optimizer_slot_names[s] in checkpoints. With shard_optimizer a rank
   * holds only its shard of each slot (see mpc_step_context.shard_*), each
   * shard_capacity elements. States have no gradient or slots. */
  int32_t optimizer_slots;
  const char *const *optimizer_slot_names;
  const mpc_dtype *optimizer_slot_dtypes;
  const char *optimizer_name; /* "sgd", "adam" or "adamw" */
  float default_learning_rate;
  float default_momentum;
  float default_weight_decay;
  int32_t accumulate_steps; /* micro-batches per optimizer step, >= 1 */
  /* The loss scaler the step's kernels run (mpc-insert-loss-scaling). */
  mpc_loss_scaler_config loss_scaling;
  /* mpc_train_control, at this offset in MPC_ARENA_OPTIMIZER (8-aligned). */
  int64_t control_offset;
  /* cuBLASLt's workspace on the cuda target: this many bytes at this offset
   * in MPC_ARENA_ACTIVATIONS (256-aligned, as cuBLASLt wants it), sized by
   * the compiler for --arch. 0 bytes on the cpu target. */
  int64_t gemm_workspace_offset;
  int64_t gemm_workspace_bytes;
  mpc_step_fn train_step; /* forward + backward + optimizer update */
  mpc_step_fn eval;       /* forward in evaluation mode */
  /* Writes the half copies of the parameters (mixed precision) from the
   * parameters; the runtime calls it after it changes parameters (create,
   * set_param, load_checkpoint). The fused optimizer keeps them current in
   * training. Null when the model has none. */
  mpc_step_fn sync_half_copies;
  /* 1 when built with --debug-nonfinite: the steps check every op output
   * and debug_sites names the checked ops (train step's, then eval's). */
  int32_t debug_nonfinite;
  int32_t num_debug_sites;
  const mpc_debug_site *debug_sites;
  /* 1 when built with --data-parallel: the train step reduces gradients
   * over the ranks of a session created with data_parallel. */
  int32_t data_parallel;
  /* 1 when built with --shard-optimizer (ZeRO stage 1): the optimizer
   * arena holds the control block at control_offset 0, then each slot's
   * shard; arena_bytes[MPC_ARENA_OPTIMIZER] is its size for one rank. */
  int32_t shard_optimizer;
  int64_t optimizer_slots_offset;
  /* The cuda target's convolutions (cuDNN), by the index the step passes
   * to mpc_rt_cuda_conv; their workspace is gemm_workspace's. None on the
   * cpu target. */
  int32_t num_convolutions;
  const mpc_conv_desc *convolutions;
  /* --shard-optimizer: every rank's shard is a multiple of this many
   * elements, the chunk of the gradient statistics, so that each chunk is
   * one rank's to sum (0, as hand-written descriptors may leave it: 16). */
  int64_t shard_unit;
  /* 1 when shard_optimizer shards the f32 master weights too (ZeRO-1 with
   * half copies): a rank keeps only its shard of them, its
   * shard_capacity f32 elements after the slots' (at optimizer_slots_offset
   * plus the slots' shards, the accumulator whole among them), and params[i]
   * .offset is then its place in the flat buffer the gradients and shards
   * share. The parameter arena holds the half copies, the states, and a
   * whole f32 copy of each parameter a step reads in f32, at
   * param_copy_offsets[i] (-1 for the others). */
  int32_t shard_master_weights;
  const int64_t *param_copy_offsets;
  /* The dtype of each parameter's gradient in MPC_ARENA_GRADS, at the
   * parameter's offset; null (as hand-written descriptors may leave it):
   * the parameter's dtype. A half dtype beside an f32 parameter is a
   * gradient the compiler kept half (a convolution's weight gradient as
   * cuDNN writes it), which the optimizer widens as it reads; it fills the
   * first half of the parameter's bytes there. */
  const mpc_dtype *gradient_dtypes;
};

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MPC_RUNTIME_MPC_MODEL_H */
