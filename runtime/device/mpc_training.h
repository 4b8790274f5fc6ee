/*===- mpc_training.h - loss scaler and optimizer state ----------*- C++ -*-===*
 *
 * What the fused optimizer's kernels and the runtime share: the loss
 * scaler's configuration and state, its per-step transition, the learning
 * rate schedule, and the block of training state (mpc_train_control) that
 * lives in device memory at the end of the optimizer arena. The same code
 * runs in generated kernels (NVRTC or the cpu shim) and in the runtime's
 * host reference (loss_scaler.cpp), so the two cannot drift apart.
 *
 * Only C types (float, double, int, long long) appear here: NVRTC has no
 * <stdint.h> without extra include paths.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_DEVICE_MPC_TRAINING_H
#define MPC_RUNTIME_DEVICE_MPC_TRAINING_H

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define MPC_HOST_DEVICE __host__ __device__
#define MPC_ISFINITE(x) isfinite(x)
#define MPC_SQRT(x) sqrt(x)
// cos(pi x): cospi needs no Payne-Hanek argument reduction, whose local
// array would give the kernel a stack frame (ptxas -v, tests/cuda).
#define MPC_COSPI(x) cospi(x)
#define MPC_POW(x, y) pow(x, y)
#else
#include <math.h>
#define MPC_HOST_DEVICE
#define MPC_ISFINITE(x) isfinite(x)
#define MPC_SQRT(x) sqrt(x)
#define MPC_COSPI(x) cos(3.14159265358979323846 * (x))
#define MPC_POW(x, y) pow(x, y)
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* inf and NaN without <math.h> macros, which NVRTC lacks. */
static inline MPC_HOST_DEVICE float mpc_float_from_bits(unsigned int bits) {
  union {
    unsigned int bits;
    float value;
  } pun;
  pun.bits = bits;
  return pun.value;
}
static inline MPC_HOST_DEVICE float mpc_inf(void) {
  return mpc_float_from_bits(0x7f800000u);
}
static inline MPC_HOST_DEVICE float mpc_nan(void) {
  return mpc_float_from_bits(0x7fc00000u);
}

typedef enum mpc_loss_scale_mode {
  MPC_LOSS_SCALE_NONE = 0,
  MPC_LOSS_SCALE_STATIC = 1,
  MPC_LOSS_SCALE_DYNAMIC = 2,
} mpc_loss_scale_mode;

/* See runtime/loss_scaler.h for the semantics. STATIC reads only
 * init_scale; NONE reads nothing but the mode. */
typedef struct mpc_loss_scaler_config {
  mpc_loss_scale_mode mode; /* DYNAMIC */
  float init_scale;         /* 65536 (2^16); STATIC: the fixed scale */
  double growth_factor;     /* 2.0; finite and > 1 */
  double backoff_factor;    /* 0.5; in (0, 1) */
  int growth_interval;      /* 2000 consecutive clean steps; >= 1 */
  int hysteresis;           /* 1 (none); N tolerates N-1 overflows */
  float min_scale;          /* 0 (none); finite, in [0, init_scale] */
  float max_scale;          /* +inf (none); >= init_scale */
} mpc_loss_scaler_config;

/* Plain data, in device memory during training. */
typedef struct mpc_loss_scaler_state {
  float scale;             /* the loss is multiplied by this */
  int growth_tracker;      /* clean steps since the last overflow or growth */
  int hysteresis_left;     /* overflows left before a backoff */
  int reserved;            /* 0; keeps the 64-bit fields 8-byte aligned */
  long long total_skipped; /* steps skipped for inf/NaN gradients */
  long long total_steps;   /* optimizer steps, applied + skipped */
} mpc_loss_scaler_state;

/* One optimizer step's transition; returns 1 when the step is applied and 0
 * when it is skipped. The products are taken in double and rounded once to
 * float, as GradScaler's kernel does with its double factors. */
static inline MPC_HOST_DEVICE int
mpc_loss_scaler_transition(const mpc_loss_scaler_config *config,
                           mpc_loss_scaler_state *state, int found_inf) {
  state->total_steps += 1;
  if (config->mode == MPC_LOSS_SCALE_NONE)
    return 1; /* GradScaler(enabled=False): no check, every step applies. */
  if (config->mode == MPC_LOSS_SCALE_STATIC) {
    if (!found_inf)
      return 1;
    state->total_skipped += 1;
    return 0;
  }
  /* Dynamic: GradScaler's _amp_update_scale_ plus DeepSpeed's hysteresis
   * and min_loss_scale. */
  if (found_inf) {
    state->total_skipped += 1;
    state->growth_tracker = 0;
    if (state->hysteresis_left <= 1) {
      float next = (float)((double)state->scale * config->backoff_factor);
      state->scale = next < config->min_scale ? config->min_scale : next;
    } else {
      state->hysteresis_left -= 1;
    }
    return 0;
  }
  int successful = state->growth_tracker + 1;
  /* `>=` rather than GradScaler's `==` only so that a tracker restored from
   * a corrupt checkpoint cannot run away; from a valid state they agree. */
  if (successful >= config->growth_interval) {
    float next = (float)((double)state->scale * config->growth_factor);
    if (next > config->max_scale)
      next = config->max_scale;
    if (MPC_ISFINITE(next)) /* GradScaler never grows the scale to inf. */
      state->scale = next;
    state->growth_tracker = 0;
    state->hysteresis_left = config->hysteresis;
  } else {
    state->growth_tracker = successful;
  }
  return 1;
}

/* The built-in schedule: the rate for the optimizer step that follows
 * `applied` applied steps. Linear warmup from base / warmup to base over
 * `warmup` steps, then a cosine from base to min_lr over `decay` steps,
 * then min_lr. */
static inline MPC_HOST_DEVICE double
mpc_warmup_cosine_lr(double base, double min_lr, long long warmup,
                     long long decay, long long applied) {
  if (applied < warmup)
    return base * (double)(applied + 1) / (double)warmup;
  long long into = applied - warmup;
  if (decay <= 0 || into >= decay)
    return decay <= 0 ? base : min_lr;
  double progress = (double)into / (double)decay;
  double cosine = MPC_COSPI(progress);
  return min_lr + (base - min_lr) * 0.5 * (1.0 + cosine);
}

/* Chunks of the flat gradients that the gradient statistics kernel sums
 * apart, a block each; each leaves one partial. */
#define MPC_GRAD_STATS_BLOCKS 256

/* What may change from one step to the next, written by the runtime into
 * the control block before every step (mpc_step_context has the same
 * values). Kernels read them from here, not from their arguments, so that a
 * step captured as a CUDA graph replays with the current values: a graph
 * keeps the argument values it was captured with. */
typedef struct mpc_step_values {
  long long step;      /* train steps (micro-batches) so far: dropout masks
                          are drawn from (seed, step) */
  float learning_rate; /* the base rate, before any schedule */
  float momentum;
  float weight_decay;
  /* Ranks whose gradients the step sums (data parallel): the mean divides
   * by ranks x micro-batches. 1 in a session of one process. */
  int world_size;
} mpc_step_values;

/* Training state in device memory (the end of the optimizer arena, at the
 * descriptor's control_offset). The scaler is the persistent part; the step
 * values come from the runtime; the rest is written during a step and read
 * by the next kernels (and by the runtime's step statistics). Nothing here
 * waits on the host. */
typedef struct mpc_train_control {
  mpc_loss_scaler_state scaler;
  mpc_step_values values;
  /* Written by mpc.loss_scale's kernel: the scale this step's backward pass
   * used, which the optimizer (and mpc_get_gradient) divide out. */
  float step_scale;
  /* Written by the optimizer's prepare kernel for the update kernel. */
  int found_inf;          /* some gradient of the step was inf or NaN */
  int applied;            /* 1: the update runs; 0: the step is skipped */
  float grad_norm;        /* unscaled global L2 norm; NaN: not computed */
  float grad_multiplier;  /* scaled gradient -> the gradient used: unscale,
                             1/N of accumulation, clipping */
  float learning_rate;    /* after the schedule */
  float step_size;        /* Adam: lr / (1 - beta1^t) */
  float bias_correction2_sqrt; /* Adam: sqrt(1 - beta2^t) */
  /* Gradient statistics, one per chunk of the statistics kernel. One
   * array after the other: a --shard-optimizer step sums both over the
   * ranks in one collective (each rank has summed its shard's chunks). */
  float partial_sumsq[MPC_GRAD_STATS_BLOCKS];
  float partial_nonfinite[MPC_GRAD_STATS_BLOCKS];
} mpc_train_control;


#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MPC_RUNTIME_DEVICE_MPC_TRAINING_H */
