/*===- mpc_runtime.h - the mpc runtime C API -----------------------*- C -*-===*
 *
 * One API for every model mpc compiles. An application links lib<model>.a and
 * libmpcrt.a, gets the model's descriptor from <model>.h
 * (`mpc_model_<name>()`), creates a session and trains:
 *
 *   mpc_session_options options;
 *   mpc_session_options_init(&options);
 *   options.seed = 42;
 *   mpc_session *session;
 *   if (mpc_session_create(mpc_model_mlp(), &options, &session) != MPC_OK)
 *     fprintf(stderr, "%s\n", mpc_last_error());
 *   const void *inputs[] = {x, y};
 *   float loss;
 *   mpc_train_step(session, inputs, &loss);
 *
 * Every call returns a status; on failure a message is available from
 * mpc_last_error() (thread-local) until the next failing call. Nothing in the
 * runtime aborts the process. Different sessions may be used from different
 * threads at once; one session is used by one thread at a time.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_MPC_RUNTIME_H
#define MPC_RUNTIME_MPC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mpc_status {
  MPC_OK = 0,
  MPC_ERROR_INVALID_ARGUMENT = 1, /* null pointer, wrong size, unknown name */
  MPC_ERROR_OUT_OF_RANGE = 2,     /* a label or index outside its range */
  MPC_ERROR_IO = 3,               /* a file could not be read or written */
  MPC_ERROR_FORMAT = 4,           /* a checkpoint is malformed or mismatched */
  MPC_ERROR_NO_DEVICE = 5,        /* the target's device is not available */
  MPC_ERROR_OUT_OF_MEMORY = 6,
  MPC_ERROR_INTERNAL = 7,
  MPC_ERROR_COMMUNICATION = 8, /* data parallel: MPI missing or a
                                  collective failed */
  MPC_ERROR_UNSUPPORTED = 9,   /* the device's libraries have no way to run
                                  an op of the model (a convolution cuDNN
                                  has no acceptable engine for) */
} mpc_status;

typedef enum mpc_dtype {
  MPC_F32 = 0,
  MPC_F16 = 1,
  MPC_BF16 = 2,
  MPC_I32 = 3,
  MPC_I64 = 4,
  /* FP8 (OCP e4m3 and e5m2): operands of mpc_rt_gemm_scaled only; no
     model's input, parameter or output has them. */
  MPC_F8E4M3 = 5,
  MPC_F8E5M2 = 6,
} mpc_dtype;

typedef enum mpc_target { MPC_TARGET_CPU = 0, MPC_TARGET_CUDA = 1 } mpc_target;

/* A compiled model; defined by generated code (see mpc_model.h). */
typedef struct mpc_model_desc mpc_model_desc;
typedef struct mpc_session mpc_session;

enum { MPC_MAX_RANK = 8 };

/* What an application needs to know about one named tensor. */
typedef struct mpc_tensor_info {
  const char *name;
  mpc_dtype dtype;
  int32_t rank;
  int64_t shape[MPC_MAX_RANK];
  int64_t num_elements;
} mpc_tensor_info;

/* Hyper-parameters left at NaN (what mpc_session_options_init sets) take the
 * model's compiled default; any other value must be finite and >= 0. */
typedef struct mpc_session_options {
  mpc_target target;
  int32_t device;        /* CUDA device ordinal */
  uint64_t seed;         /* parameter initialisation and dropout */
  float learning_rate;   /* NaN: the value given to mpc compile --lr */
  float momentum;        /* SGD momentum; NaN: from --momentum */
  float weight_decay;    /* L2 weight decay; NaN: from --weight-decay */
  /* cuda target: 1 captures each kind of step (train, with or without the
   * update, each micro-batch of accumulation; eval) as a CUDA graph on its
   * second run and replays the graph from then on, one launch per step
   * instead of one per kernel. 0 (the default) launches kernel by kernel.
   * Ignored on the cpu target. */
  int32_t cuda_graphs;
  /* 1: join the MPI job this process was started in (mpirun -np N), as
   * one of N ranks that each train on their own micro-batch; gradients are
   * summed over ranks after the backward pass, so the ranks stay equal and
   * compute what one process accumulating the N micro-batches computes
   * (bit for bit). Parameters start as rank 0's, and the state (batch-norm
   * running statistics) follows rank 0's after every step, as PyTorch's
   * DistributedDataParallel broadcasts buffers; rank r's m-th micro-batch
   * of optimizer step s (of K, --accumulate) draws the dropout masks of
   * micro-batch (s * N + r) * K + m. With K > 1 the ranks communicate once
   * per optimizer step, summing their accumulated gradients: not bit for
   * bit one process's sum of the N K micro-batches (another order), but
   * equal to rounding. Needs a model built with
   * mpc compile --data-parallel, and either Open MPI (loaded with dlopen:
   * MPC_ERROR_COMMUNICATION without it) or torchrun's environment variables
   * (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and not under mpirun),
   * with which the ranks meet over TCP at rank 0 and need no MPI. On the cuda
   * target the gradients are summed by NCCL (libnccl.so.2, loaded with dlopen;
   * the communicator is set up through MPI) on a stream of its own, overlapping
   * backward, in NCCL's order rather than rank order (so not bit for bit as one
   * process accumulating); each rank takes GPU `device` + its local rank
   * ($LOCAL_RANK or $OMPI_COMM_WORLD_LOCAL_RANK). 0 (the default): one
   * process. */
  int32_t data_parallel;
  /* Data parallel: how long a rank waits for the others in an exchange
   * (the parameters at creation, the gradients every step) before the call
   * fails with MPC_ERROR_COMMUNICATION naming the ranks that did not
   * arrive; the session is unusable after that. On the cuda target a step
   * whose NCCL collectives do not finish in this time fails the same way
   * (NCCL does not say which rank is missing) and the communicator is
   * aborted. 0 (the default): 600 s. */
  float collective_timeout_seconds;
  /* cpu target: the threads that run each step's kernels (a launch's blocks
   * split into one contiguous range a thread) and GEMMs (split by rows or
   * columns of C). Every element is computed by the same operations in the
   * same order whatever the split, so training is bit for bit the same for
   * any number of threads. 0 (the default): $MPC_THREADS when set, else
   * the cores this process may run on, divided among the ranks of a
   * data-parallel job on this machine. Ignored on the cuda target. */
  int32_t threads;
} mpc_session_options;

/* The threads a cpu-target session runs its steps on (options.threads
 * resolved); 1 on the cuda target; -1 with a message for a null session. */
int32_t mpc_session_threads(const mpc_session *session);

/* Data parallel: this session's rank and the number of ranks (0 and 1 for a
 * session of one process); -1 with a message for a null session. */
int32_t mpc_session_rank(const mpc_session *session);
int32_t mpc_session_world_size(const mpc_session *session);

/* The bytes of one arena (mpc_arena: 0 parameters, 1 gradients, 2
 * optimizer state, 3 activations) this session allocated: the model's
 * arena_bytes, except a --shard-optimizer session's optimizer arena, which
 * holds its rank's shard. -1 with a message for a null session or an
 * arena outside 0..3. */
int64_t mpc_session_arena_bytes(const mpc_session *session, int32_t arena);

/* The bytes of device memory this session allocated beyond its arenas: on
 * the cuda target, the workspace of its own that cuDNN's plans share where
 * a convolution's best engine needs more than the model's planned
 * workspace (0 where none does, and on the cpu target). Arenas and this
 * are all a session allocates for its model's tensors and libraries. -1
 * with a message for a null session. */
int64_t mpc_session_workspace_bytes(const mpc_session *session);

/* The message of the last failing call on this thread ("" if none). */
const char *mpc_last_error(void);
const char *mpc_status_string(mpc_status status);
size_t mpc_dtype_size(mpc_dtype dtype);

/* Model metadata. Inputs and extra outputs are in declaration order; output 0
 * is the loss. States are non-trained tensors the model updates itself
 * (e.g. batch-norm running statistics); mpc_get_param/mpc_set_param reach them
 * by name like parameters. For a null model the name is NULL and the counts
 * are -1 (with mpc_last_error set). */
const char *mpc_model_name(const mpc_model_desc *model);
int32_t mpc_model_num_inputs(const mpc_model_desc *model);
int32_t mpc_model_num_params(const mpc_model_desc *model);
int32_t mpc_model_num_states(const mpc_model_desc *model);
int32_t mpc_model_num_outputs(const mpc_model_desc *model);
mpc_status mpc_model_input_info(const mpc_model_desc *model, int32_t index,
                                mpc_tensor_info *info);
mpc_status mpc_model_param_info(const mpc_model_desc *model, int32_t index,
                                mpc_tensor_info *info);
mpc_status mpc_model_state_info(const mpc_model_desc *model, int32_t index,
                                mpc_tensor_info *info);
mpc_status mpc_model_output_info(const mpc_model_desc *model, int32_t index,
                                 mpc_tensor_info *info);

/* Fills in defaults: cpu target, device 0, seed 0, and NaN hyper-parameters,
 * which mpc_session_create replaces with the model's compiled ones. */
void mpc_session_options_init(mpc_session_options *options);
/* `options` is required (initialise it with mpc_session_options_init). A
 * cuda target fails with MPC_ERROR_NO_DEVICE where no GPU (or no cuda
 * runtime) is available. Parameters and state are initialised from their
 * initialisers, deterministically from options->seed. */
mpc_status mpc_session_create(const mpc_model_desc *model,
                              const mpc_session_options *options,
                              mpc_session **session);
void mpc_session_destroy(mpc_session *session);

/* One training step: forward, backward, optimizer update. `inputs` holds one
 * host pointer per model input, in the input's declared dtype and shape.
 * Labels out of range fail with MPC_ERROR_OUT_OF_RANGE before anything
 * changes. `loss` may be null. */
mpc_status mpc_train_step(mpc_session *session, const void *const *inputs,
                          float *loss);
/* Forward pass in evaluation mode (running batch-norm statistics, no
 * dropout). `outputs` holds one host pointer per extra output (outputs 1..;
 * an entry may be null to skip that output, and `outputs` itself may be null
 * to skip them all), written in the output's declared dtype. */
mpc_status mpc_eval(mpc_session *session, const void *const *inputs,
                    float *loss, void *const *outputs);

/* Forward and backward in training mode without the optimizer update: the
 * gradients are left in the session (see mpc_get_gradient); parameters,
 * optimizer state, running statistics and the step counter are unchanged,
 * so dropout draws the same masks as the next mpc_train_step would. It
 * returns MPC_OK with gradients that overflowed (the loss scale is not
 * changed: that is the train step's decision); it counts their inf and NaN
 * elements into mpc_training_stats.gradients_nonfinite. */
mpc_status mpc_compute_gradients(mpc_session *session,
                                 const void *const *inputs, float *loss);
/* The gradient of a parameter from the last mpc_train_step or
 * mpc_compute_gradients, as fp32 values, `count` elements, with the loss
 * scale divided out (of the last micro-batch, with accumulation); with
 * data parallelism, the mean over the ranks (with accumulation the ranks
 * sum once per optimizer step, their accumulated gradients, so after a
 * train step it is this rank's own last micro-batch's). After a train step
 * of a --shard-optimizer session, which sums only each
 * rank's shard (a reduce-scatter), it fails with MPC_ERROR_INVALID_ARGUMENT
 * and a message: mpc_compute_gradients sums them whole. */
mpc_status mpc_get_gradient(mpc_session *session, const char *name,
                            float *data, size_t count);

/* Parameters and state by name, as fp32 values, `count` elements (which must
 * equal the tensor's element count). f16/bf16 tensors are converted with
 * round to nearest even. A --shard-optimizer build with f32 master weights
 * and half copies keeps each rank's shard of the masters only:
 * there every rank calls mpc_set_param with the same value (it gathers the
 * half copies), and mpc_get_param reads a parameter that a step reads in
 * f32 or that lies in this rank's shard, and fails with
 * MPC_ERROR_INVALID_ARGUMENT for the others (mpc_save_checkpoint gathers
 * them). */
mpc_status mpc_get_param(mpc_session *session, const char *name, float *data,
                         size_t count);
mpc_status mpc_set_param(mpc_session *session, const char *name,
                         const float *data, size_t count);
/* mpc_set_param with the caller's shape checked, not only its element
 * count: `rank` extents in `shape` must be the tensor's, so a weight laid
 * out [in, out] for a model's [out, in] (same count, transposed) fails with
 * MPC_ERROR_INVALID_ARGUMENT and a message naming both shapes. Checkpoints
 * (mpc_load_checkpoint) check shapes the same way. */
mpc_status mpc_set_param_shaped(mpc_session *session, const char *name,
                                const float *data, const int64_t *shape,
                                int32_t rank);

/* For schedules: applies from the next step. Must be finite and >= 0. With
 * a compiled-in schedule (mpc compile --lr-schedule) this is its base. */
mpc_status mpc_set_learning_rate(mpc_session *session, float learning_rate);
/* Optimizer steps applied so far (skipped steps do not count); -1 for a
 * null session or a device that cannot be read (see mpc_last_error). */
int64_t mpc_session_step(const mpc_session *session);

/* The loss scaler's state and the last optimizer step's values, read from
 * the device (on a GPU this waits for the session's work). Adam's bias
 * correction and the built-in schedule count applied optimizer steps only:
 * a skipped step changes neither. */
typedef struct mpc_training_stats {
  int64_t train_steps;     /* mpc_train_step calls (micro-batches) */
  int64_t optimizer_steps; /* optimizer steps applied */
  int64_t skipped_steps;   /* optimizer steps skipped for inf/NaN gradients:
                              a loss scaler's overflows, and without one
                              (mpc compile --nonfinite-updates=skip, the
                              default) any step whose gradients are not
                              all finite; nothing of a skipped step is
                              written, moments and half copies included */
  float loss_scale;        /* the scale the next step uses (1: no scaling) */
  int32_t steps_since_growth; /* clean steps since the last growth/overflow */
  int32_t hysteresis_left;    /* overflows tolerated before a backoff */
  float last_step_scale;   /* the scale the last backward pass used */
  int32_t last_skipped;    /* 1 if the last mpc_train_step ended an
                              optimizer step (every accumulate-th does)
                              and that step was skipped */
  float grad_norm;         /* unscaled global gradient norm of the last
                              optimizer step; NaN where not computed (no
                              loss scaling, no clipping and
                              --nonfinite-updates=apply) */
  float learning_rate;     /* the rate the last optimizer step used */
  int64_t gradients_nonfinite; /* gradient elements that were inf or NaN
                                  after the last mpc_compute_gradients: with
                                  loss scaling, the scaled gradients
                                  overflowed, and a train step would have
                                  been skipped (0 when all were finite) */
  int64_t fp8_saturated;       /* delayed FP8 scaling (mpc compile
                                  --fp8-scaling=delayed): elements that outgrew
                                  their tensor's history in the last optimizer
                                  step and were clipped to the format's largest
                                  value, over all tensors (each tensor's count,
                                  at most 2^24, is row 3 of the state
                                  `fp8.scaling`); 0 without delayed scaling */
} mpc_training_stats;
mpc_status mpc_get_training_stats(mpc_session *session,
                                  mpc_training_stats *stats);

/* The first op whose output held inf or NaN in the last mpc_train_step,
 * mpc_compute_gradients or mpc_eval call, for models compiled with
 * `mpc compile --debug-nonfinite` (others fail with
 * MPC_ERROR_INVALID_ARGUMENT). Steps still return MPC_OK when one is found:
 * with dynamic loss scaling an overflow in the scaled gradients (backward
 * = 1) is expected and handled by skipping the step, while a non-finite
 * forward value or loss (backward = 0) is a bug in the model or its
 * precision. */
typedef struct mpc_nonfinite_report {
  int32_t found;        /* 0: every checked value was finite */
  const char *op;       /* "mpc.scale"; NULL when !found */
  const char *location; /* "model.mlir:12:8" in the model file */
  int32_t backward;     /* 0: forward pass; 1: backward (gradients) */
  int32_t training;     /* 1: train step or gradients; 0: mpc_eval */
  int64_t step;         /* optimizer steps applied before that call */
  int64_t num_elements; /* of the offending tensor */
  int64_t nan_count;
  int64_t inf_count;
  float max_abs_finite; /* largest |value| among the finite ones */
  /* For a cast to f16/bf16: finite values of its source beyond the half
   * type's range (they became inf); -1 for other ops. */
  int64_t outside_half_range;
  /* The loss scale the step ran with (1 without loss scaling); NaN, and
   * training and step 0, when neither found nor fp8_saturated. */
  float loss_scale;
  /* Delayed FP8 scaling (--fp8-scaling=delayed), independent of `found`:
   * the first FP8 GEMM of the call (in the order the step runs them) whose
   * operand saturated: finite values beyond the format's largest at the
   * scale the history gave (448 in e4m3, 57344 in e5m2), clipped to it.
   * Training goes on (the next scales come from this step's amax); a GEMM
   * that saturates step after step needs a larger --fp8-margin or a
   * longer history. fp8_saturated is 0 and the rest NULL/0 otherwise. */
  int32_t fp8_saturated;
  const char *fp8_gemm_op;       /* "mpc.scaled_matmul" */
  const char *fp8_gemm_location; /* the GEMM's "model.mlir:40:10" */
  int32_t fp8_backward;          /* 1: a backward-pass GEMM */
  const char *fp8_operand;       /* "lhs" or "rhs" of the GEMM */
  const char *fp8_format;        /* "e4m3" or "e5m2" */
  /* Its mpc.quantize, located at the tensor it quantizes. */
  const char *fp8_tensor_location;
  int64_t fp8_num_elements;
  int64_t fp8_saturated_count; /* elements clipped */
  float fp8_amax;              /* largest finite magnitude */
  float fp8_scale;             /* the scale it was quantized with */
} mpc_nonfinite_report;
mpc_status mpc_get_nonfinite_report(const mpc_session *session,
                                    mpc_nonfinite_report *report);

/* Checkpoints are safetensors files: every parameter and state tensor under
 * its model name, optimizer state under "optimizer.<slot>.<name>" (slot as
 * PyTorch names it: momentum_buffer, exp_avg, exp_avg_sq; and
 * grad_accumulator with gradient accumulation), and in the header's
 * __metadata__ (all strings): format "mpc", model, optimizer, step (train
 * steps taken), seed, and the loss scaler's state: loss_scale,
 * loss_scale_growth_tracker, loss_scale_hysteresis_left, optimizer_steps
 * (applied + skipped) and skipped_steps.
 * Each tensor's CRC-32 (zlib's) is stored in __metadata__ as
 * "crc32:<name>" (8 hex digits), so the file stays one that PyTorch's
 * safetensors reads.
 * Saving writes `<path>.tmp` and renames it over `path`, so a crash never
 * leaves a half-written checkpoint (MPC_ERROR_IO on failure, `path`
 * untouched); a save killed midway leaves that one file, which the next save
 * reuses (and saves to one path from several threads or processes take
 * turns on it). Loading refuses what is not a regular file (a FIFO would
 * block), checks the model name, every tensor's presence, dtype and shape
 * and its checksum, rejects unknown tensors and tensors holding inf or NaN
 * (MPC_ERROR_FORMAT, naming the tensor), all before it changes anything; it
 * restores tensors, the step counter and the seed (dropout masks depend on
 * both) and the loss scaler, not the hyper-parameters. A file without
 * checksums (written by PyTorch, or by mpc before they existed) loads
 * unverified: mpc_checkpoint_was_verified says which. The gradient
 * accumulator (optimizer.grad_accumulator.*, with --accumulate) may be
 * absent or extra where the checkpoint falls between optimizer steps (its
 * "accumulate" metadata says): it holds nothing then, so a checkpoint moves
 * between accumulation counts and data-parallel world sizes. With data
 * parallelism every rank holds the same tensors; save from rank 0. */
mpc_status mpc_save_checkpoint(mpc_session *session, const char *path);
mpc_status mpc_load_checkpoint(mpc_session *session, const char *path);
/* Pretrained weights: parameters and state tensors by name from a
 * safetensors file (a PyTorch state_dict saved with
 * safetensors.torch.save_file, or an mpc checkpoint, whose optimizer.*
 * tensors are skipped). Each tensor must have the model tensor's shape;
 * F32, F16 and BF16 convert to the model's float dtype (round to nearest
 * even; a value beyond a half type's range is an error, not an inf) and
 * integer dtypes must match. Only those tensors change: optimizer state,
 * step, seed and loss scaler stay, and the half copies follow. With
 * `strict` (torch's load_state_dict default) every parameter and state
 * tensor must be in the file and every tensor of the file must be one of
 * them; without, the model's tensors the file lacks keep their values and
 * the file's others are skipped. Everything is checked before anything
 * changes (MPC_ERROR_FORMAT naming the tensor otherwise). `report` (may be
 * null) receives the counts, and newline-separated names that the session
 * owns until its next mpc_load_weights. */
typedef struct mpc_weights_report {
  int32_t loaded;     /* tensors set */
  int32_t converted;  /* of which converted from another float dtype */
  int32_t missing;    /* model tensors not in the file (unchanged) */
  int32_t unexpected; /* file tensors the model does not have */
  const char *missing_names;
  const char *unexpected_names;
} mpc_weights_report;
mpc_status mpc_load_weights(mpc_session *session, const char *path,
                            int32_t strict, mpc_weights_report *report);

/* 1 if the session's last successful mpc_load_checkpoint checked every
 * tensor against the checksum stored with it; 0 if the file had none (or
 * nothing was loaded). */
int32_t mpc_checkpoint_was_verified(const mpc_session *session);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MPC_RUNTIME_MPC_RUNTIME_H */
