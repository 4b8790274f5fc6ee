/*===- loss_scaler.h - the dynamic loss scaler's state machine ----*- C -*-===*
 *
 * The loss scaler: plain data and two functions, unit-testable on the host.
 * The transition itself is mpc_loss_scaler_transition in
 * runtime/device/mpc_training.h, which the fused optimizer's kernel runs on
 * the device state, so host and device cannot disagree. The state is what
 * checkpoints save and what the API reports.
 *
 *   mpc_loss_scaler_config config;
 *   mpc_loss_scaler_config_init(&config);      // GradScaler's defaults
 *   mpc_loss_scaler_state state;
 *   if (mpc_loss_scaler_init(&config, &state) != MPC_OK)
 *     fprintf(stderr, "%s\n", mpc_last_error());
 *   ... loss * state.scale, backward, unscale grads by 1 / state.scale ...
 *   if (mpc_loss_scaler_update(&config, &state, found_inf))
 *     ... apply the optimizer step ...
 *
 * Semantics (one call of mpc_loss_scaler_update per optimizer step; found_inf
 * is nonzero when any gradient of the step was inf or NaN):
 *
 * DYNAMIC is torch.amp.GradScaler's _amp_update_scale_ (aten/src/ATen/native/
 * cuda/AmpKernels.cu and its CPU twin), with DeepSpeed's hysteresis and
 * minimum scale added, both off by default:
 *   found_inf:  the step is skipped; growth_tracker = 0;
 *               if hysteresis_left <= 1:
 *                 scale = max(float(scale * backoff_factor), min_scale)
 *               else:
 *                 hysteresis_left -= 1          (scale unchanged)
 *   finite:     the step is applied; growth_tracker += 1;
 *               if growth_tracker == growth_interval:
 *                 growth_tracker = 0; hysteresis_left = hysteresis;
 *                 new = min(float(scale * growth_factor), max_scale);
 *                 if new is finite: scale = new
 * float(x * f) is the product in double rounded once to float, as
 * GradScaler's kernel computes it (its factors are doubles, its scale fp32);
 * a scale that would grow to inf stays where it is, as in GradScaler.
 *
 * Hysteresis is DeepSpeed's DynamicLossScaler with consecutive_hysteresis=
 * False (its default, and Megatron-LM's only behaviour): `hysteresis` = N
 * means the first N-1 overflows after a growth (or after init) only skip the
 * step, and the N-th and every later one also back off, until the next
 * growth restores hysteresis_left to N. Clean steps in between do *not*
 * restore it. hysteresis = 1 (the default) is exactly GradScaler. Every
 * overflow, tolerated or not, resets growth_tracker, so growth needs
 * growth_interval consecutive clean steps (GradScaler and DeepSpeed agree).
 *
 * min_scale is DeepSpeed's min_loss_scale: a backoff never takes the scale
 * below it (DeepSpeed raises at the minimum; mpc keeps skipping overflowing
 * steps at min_scale). The default 0 is GradScaler's behaviour (no floor).
 * max_scale (default +inf: none) caps growth.
 *
 * STATIC keeps scale = init_scale forever; an overflowing step is still
 * skipped and counted (what fastai's static scaling and Apex's static
 * loss_scale do). growth_tracker and hysteresis_left stay 0.
 *
 * NONE is GradScaler(enabled=False): scale = 1, found_inf is ignored and
 * every step is applied, so a non-finite gradient reaches the weights just
 * as in PyTorch without a scaler (bf16 and fp32 need no scaling, and the
 * kernel may leave out the finite check). total_skipped stays 0;
 * growth_tracker and hysteresis_left stay 0.
 *
 * In every mode total_steps counts calls (applied + skipped); the optimizer's
 * step counter (Adam's bias correction, schedules) is total_steps -
 * total_skipped.
 *
 *===----------------------------------------------------------------------===*/

#ifndef MPC_RUNTIME_LOSS_SCALER_H
#define MPC_RUNTIME_LOSS_SCALER_H

#include "runtime/device/mpc_training.h"
#include "runtime/mpc_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* mpc_loss_scale_mode, mpc_loss_scaler_config and mpc_loss_scaler_state
 * are defined with the device code that shares them. */

/* GradScaler's defaults: dynamic, 2^16, x2 every 2000 clean steps, x0.5 on
 * overflow, no hysteresis, no minimum, no maximum. */
void mpc_loss_scaler_config_init(mpc_loss_scaler_config *config);

/* Checks `config` (MPC_ERROR_INVALID_ARGUMENT with a message naming the field
 * and its value otherwise) without touching any state. */
mpc_status mpc_loss_scaler_check_config(const mpc_loss_scaler_config *config);

/* Checks `config` and sets `state` to the start of training: scale =
 * init_scale (1 for NONE), growth_tracker = 0, hysteresis_left = hysteresis
 * (0 unless DYNAMIC), counters 0. On failure `state` is unchanged. */
mpc_status mpc_loss_scaler_init(const mpc_loss_scaler_config *config,
                                mpc_loss_scaler_state *state);

/* One optimizer step's transition (see the top of this file). Returns 1 when
 * the step is applied and 0 when it is skipped. `config` must have passed
 * mpc_loss_scaler_check_config; null pointers return 0 (with
 * mpc_last_error set) and change nothing. */
int32_t mpc_loss_scaler_update(const mpc_loss_scaler_config *config,
                               mpc_loss_scaler_state *state, int32_t found_inf);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MPC_RUNTIME_LOSS_SCALER_H */
