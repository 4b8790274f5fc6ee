//===- loss_scaler.cpp - the loss scaler's state machine --------*- C++ -*-===//
//
// This file implements the loss scaler's C API described in loss_scaler.h:
// config defaults and validation, initial state, and the per-step
// transition, which is the device code's own (runtime/device/mpc_training.h).
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

int mode_is_valid(mpc_loss_scale_mode mode) {
  int32_t raw = mpcrt::raw_enum(mode);
  return raw == MPC_LOSS_SCALE_NONE || raw == MPC_LOSS_SCALE_STATIC ||
         raw == MPC_LOSS_SCALE_DYNAMIC;
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
  if (mode_is_valid(config->mode) == 0) {
    set_error(MPC_ERROR_INVALID_ARGUMENT, "loss scaler: unknown mode %d",
              mpcrt::raw_enum(config->mode));
    return 0;
  }
  return mpc_loss_scaler_transition(config, state, found_inf);
}
