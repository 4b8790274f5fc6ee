//===- loss_scaler.cpp - the loss scaler's state machine --------*- C++ -*-===//
//
// This file implements the host reference of the loss scaler described in
// loss_scaler.h: config defaults and validation, and the per-step transition.
// The fused optimizer kernel mirrors mpc_loss_scaler_update; keep the two in
// step (same operation order, same double-then-float rounding).
//
//===----------------------------------------------------------------------===//

#include "runtime/loss_scaler.h"

#include "runtime/error.h"

#include <cmath>

using mpcrt::set_error;

namespace {

mpc_status check_positive_scale(const char *mode, float init_scale) {
  if (!std::isfinite(init_scale) || !(init_scale > 0.0f))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "loss scaler (%s): init_scale must be finite and > 0, "
                     "got %g",
                     mode, static_cast<double>(init_scale));
  return MPC_OK;
}

mpc_status check_dynamic(const mpc_loss_scaler_config &c) {
  if (mpc_status status = check_positive_scale("dynamic", c.init_scale))
    return status;
  // GradScaler asserts growth_factor > 1 and backoff_factor < 1; a backoff of
  // 0 (or below) would zero the scale for good.
  if (!std::isfinite(c.growth_factor) || !(c.growth_factor > 1.0))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "loss scaler (dynamic): growth_factor must be finite and "
                     "> 1, got %g",
                     c.growth_factor);
  if (!(c.backoff_factor > 0.0 && c.backoff_factor < 1.0))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "loss scaler (dynamic): backoff_factor must be in (0, 1), "
                     "got %g",
                     c.backoff_factor);
  if (c.growth_interval < 1)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "loss scaler (dynamic): growth_interval must be >= 1, "
                     "got %d",
                     c.growth_interval);
  if (c.hysteresis < 1)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "loss scaler (dynamic): hysteresis must be >= 1 (1 is "
                     "none), got %d",
                     c.hysteresis);
  if (!std::isfinite(c.min_scale) || !(c.min_scale >= 0.0f))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "loss scaler (dynamic): min_scale must be finite and "
                     ">= 0, got %g",
                     static_cast<double>(c.min_scale));
  if (c.min_scale > c.init_scale)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "loss scaler (dynamic): min_scale %g is above init_scale "
                     "%g",
                     static_cast<double>(c.min_scale),
                     static_cast<double>(c.init_scale));
  // NaN fails this too; +inf (no cap) passes.
  if (!(c.max_scale >= c.init_scale))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "loss scaler (dynamic): max_scale %g is below init_scale "
                     "%g",
                     static_cast<double>(c.max_scale),
                     static_cast<double>(c.init_scale));
  return MPC_OK;
}

} // namespace

// ----------------------------------------------------------------------------
// C API

extern "C" void mpc_loss_scaler_config_init(mpc_loss_scaler_config *config) {
  if (!config)
    return;
  config->mode = MPC_LOSS_SCALE_DYNAMIC;
  config->init_scale = 65536.0f;
  config->growth_factor = 2.0;
  config->backoff_factor = 0.5;
  config->growth_interval = 2000;
  config->hysteresis = 1;
  config->min_scale = 0.0f;
  config->max_scale = INFINITY;
}

extern "C" mpc_status
mpc_loss_scaler_check_config(const mpc_loss_scaler_config *config) {
  if (!config)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "loss scaler: config is null");
  switch (mpcrt::raw_enum(config->mode)) {
  case MPC_LOSS_SCALE_NONE:
    return MPC_OK;
  case MPC_LOSS_SCALE_STATIC:
    return check_positive_scale("static", config->init_scale);
  case MPC_LOSS_SCALE_DYNAMIC:
    return check_dynamic(*config);
  }
  return set_error(MPC_ERROR_INVALID_ARGUMENT,
                   "loss scaler: unknown mode %d (0 none, 1 static, "
                   "2 dynamic)",
                   mpcrt::raw_enum(config->mode));
}

extern "C" mpc_status mpc_loss_scaler_init(const mpc_loss_scaler_config *config,
                                           mpc_loss_scaler_state *state) {
  if (!state)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "loss scaler: state is null");
  if (mpc_status status = mpc_loss_scaler_check_config(config))
    return status;
  mpc_loss_scaler_state fresh = {};
  switch (mpcrt::raw_enum(config->mode)) {
  case MPC_LOSS_SCALE_NONE:
    fresh.scale = 1.0f;
    break;
  case MPC_LOSS_SCALE_STATIC:
    fresh.scale = config->init_scale;
    break;
  default: // MPC_LOSS_SCALE_DYNAMIC (checked above)
    fresh.scale = config->init_scale;
    fresh.hysteresis_left = config->hysteresis;
    break;
  }
  *state = fresh;
  return MPC_OK;
}

extern "C" int32_t mpc_loss_scaler_update(const mpc_loss_scaler_config *config,
                                          mpc_loss_scaler_state *state,
                                          int32_t found_inf) {
  if (!config || !state) {
    set_error(MPC_ERROR_INVALID_ARGUMENT, "loss scaler: %s is null",
              !config ? "config" : "state");
    return 0;
  }
  state->total_steps += 1;
  int32_t mode = mpcrt::raw_enum(config->mode);
  if (mode == MPC_LOSS_SCALE_NONE)
    return 1; // GradScaler(enabled=False): no check, every step applies.
  if (mode == MPC_LOSS_SCALE_STATIC) {
    if (!found_inf)
      return 1;
    state->total_skipped += 1;
    return 0;
  }

  // Dynamic: GradScaler's _amp_update_scale_ plus DeepSpeed's hysteresis and
  // min_loss_scale. The products are taken in double and rounded once to
  // float, as GradScaler's kernel does with its double factors.
  if (found_inf) {
    state->total_skipped += 1;
    state->growth_tracker = 0;
    if (state->hysteresis_left <= 1) {
      float next = static_cast<float>(static_cast<double>(state->scale) *
                                      config->backoff_factor);
      state->scale = next < config->min_scale ? config->min_scale : next;
    } else {
      state->hysteresis_left -= 1;
    }
    return 0;
  }
  int32_t successful = state->growth_tracker + 1;
  if (successful >= config->growth_interval) {
    // `>=` rather than GradScaler's `==` only so that a tracker restored
    // from a corrupt checkpoint cannot run away; from a valid state the two
    // agree.
    float next = static_cast<float>(static_cast<double>(state->scale) *
                                    config->growth_factor);
    if (next > config->max_scale)
      next = config->max_scale;
    if (std::isfinite(next)) // GradScaler never grows the scale to inf.
      state->scale = next;
    state->growth_tracker = 0;
    state->hysteresis_left = config->hysteresis;
  } else {
    state->growth_tracker = successful;
  }
  return 1;
}
