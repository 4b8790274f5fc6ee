//===- init.cpp - deterministic parameter initialisers ----------*- C++ -*-===//
//
// This file implements the initialisers of mpc_init_kind with PyTorch's
// formulas (torch.nn.init), drawing from a counter-based generator:
//
//   uniform(low, high)     low + (high - low) * u,  u in [0, 1)
//   normal(mean, std)      mean + std * z,  z by Box-Muller from two uniforms
//   kaiming_uniform(a)     bound = gain * sqrt(3 / fan_in), gain = sqrt(2 / (1
//   + a^2)) kaiming_normal(a)      std = gain / sqrt(fan_in)
//   xavier_uniform(gain)   bound = sqrt(3) * std
//   xavier_normal(gain)    std = gain * sqrt(2 / (fan_in + fan_out))
//
// Values are computed in double and rounded once to fp32, then (RNE) to the
// tensor's dtype.
//
//===----------------------------------------------------------------------===//

#include "runtime/init.h"

#include "runtime/error.h"
#include "runtime/half.h"

#include <cmath>

namespace mpcrt {

// ----------------------------------------------------------------------------
// Philox4x32-10

void philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                   uint32_t out[4]) {
  // Constants from the paper (and Random123, cuRAND, PyTorch).
  const uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  const uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(M0) * c0;
    uint64_t p1 = static_cast<uint64_t>(M1) * c2;
    uint32_t hi0 = static_cast<uint32_t>(p0 >> 32),
             lo0 = static_cast<uint32_t>(p0);
    uint32_t hi1 = static_cast<uint32_t>(p1 >> 32),
             lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += W0;
    k1 += W1;
  }
  out[0] = c0;
  out[1] = c1;
  out[2] = c2;
  out[3] = c3;
}

namespace {

// Two 32-bit words -> a double in [0, 1) with 53 random bits.
double unit_uniform(uint32_t high, uint32_t low) {
  uint64_t bits = ((static_cast<uint64_t>(high) << 32) | low) >> 11;
  return static_cast<double>(bits) * 0x1.0p-53;
}

struct element_draw {
  double uniform; // [0, 1)
  double normal;  // N(0, 1)
};

// The random numbers of element `element` of tensor `tensor_index`.
element_draw draw(uint64_t seed, uint32_t tensor_index, uint64_t element) {
  const uint32_t key[2] = {static_cast<uint32_t>(seed),
                           static_cast<uint32_t>(seed >> 32)};
  const uint32_t counter[4] = {static_cast<uint32_t>(element),
                               static_cast<uint32_t>(element >> 32),
                               tensor_index, 0};
  uint32_t words[4];
  philox4x32_10(counter, key, words);
  element_draw result;
  result.uniform = unit_uniform(words[0], words[1]);
  // Box-Muller: u1 in (0, 1] keeps the log finite.
  double u1 = 1.0 - result.uniform;
  double u2 = unit_uniform(words[2], words[3]);
  const double two_pi = 6.283185307179586476925286766559;
  result.normal = std::sqrt(-2.0 * std::log(u1)) * std::cos(two_pi * u2);
  return result;
}

void store(mpc_dtype dtype, void *data, int64_t index, double value) {
  mpc_store_from_f32(dtype, data, index, static_cast<float>(value));
}

bool needs_fans(int32_t kind) {
  return kind == MPC_INIT_KAIMING_UNIFORM || kind == MPC_INIT_KAIMING_NORMAL ||
         kind == MPC_INIT_XAVIER_UNIFORM || kind == MPC_INIT_XAVIER_NORMAL;
}

const char *init_name(int32_t kind) {
  static const char *const names[] = {
      "zeros",          "ones",           "constant",
      "normal",         "uniform",        "kaiming_uniform",
      "kaiming_normal", "xavier_uniform", "xavier_normal"};
  if (kind < 0 || kind > MPC_INIT_XAVIER_NORMAL)
    return "?";
  return names[kind];
}

} // namespace

// ----------------------------------------------------------------------------
// Fans and checks

void compute_fans(const mpc_tensor_desc &tensor, double *fan_in,
                  double *fan_out) {
  double receptive = 1.0;
  for (int32_t d = 2; d < tensor.rank; ++d)
    receptive *= static_cast<double>(tensor.shape[d]);
  *fan_in = static_cast<double>(tensor.shape[1]) * receptive;
  *fan_out = static_cast<double>(tensor.shape[0]) * receptive;
}

mpc_status check_initializer(const mpc_tensor_desc &tensor, const char *what) {
  int32_t kind = tensor.init_kind;
  int32_t count = tensor.num_init_args;
  const double *args = tensor.init_args;
  if (kind < MPC_INIT_ZEROS || kind > MPC_INIT_XAVIER_NORMAL)
    return set_error(MPC_ERROR_INVALID_ARGUMENT, "%s: unknown init_kind %d",
                     what, kind);
  int32_t min_args = 0, max_args = 0;
  switch (kind) {
  case MPC_INIT_CONSTANT:
    min_args = max_args = 1;
    break;
  case MPC_INIT_NORMAL:
    min_args = 1;
    max_args = 2;
    break;
  case MPC_INIT_UNIFORM:
    min_args = max_args = 2;
    break;
  case MPC_INIT_KAIMING_UNIFORM:
  case MPC_INIT_KAIMING_NORMAL:
  case MPC_INIT_XAVIER_UNIFORM:
  case MPC_INIT_XAVIER_NORMAL:
    max_args = 1;
    break;
  default:
    break;
  }
  if (count < min_args || count > max_args)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: initialiser '%s' takes %d to %d arguments, got %d",
                     what, init_name(kind), min_args, max_args, count);
  for (int32_t i = 0; i < count; ++i)
    if (!std::isfinite(args[i]))
      return set_error(MPC_ERROR_INVALID_ARGUMENT,
                       "%s: initialiser '%s' argument %d is not finite", what,
                       init_name(kind), i);
  if (kind == MPC_INIT_NORMAL && !(args[count - 1] > 0))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: initialiser 'normal' needs std > 0, got %g", what,
                     args[count - 1]);
  if (kind == MPC_INIT_UNIFORM && !(args[0] < args[1]))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: initialiser 'uniform' needs low < high, got (%g, %g)",
                     what, args[0], args[1]);
  if ((kind == MPC_INIT_KAIMING_UNIFORM || kind == MPC_INIT_KAIMING_NORMAL) &&
      count == 1 && !(args[0] >= 0))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: initialiser '%s' needs a negative slope >= 0, got %g",
                     what, init_name(kind), args[0]);
  if ((kind == MPC_INIT_XAVIER_UNIFORM || kind == MPC_INIT_XAVIER_NORMAL) &&
      count == 1 && !(args[0] > 0))
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: initialiser '%s' needs a gain > 0, got %g", what,
                     init_name(kind), args[0]);
  if (needs_fans(kind) && tensor.rank < 2)
    return set_error(MPC_ERROR_INVALID_ARGUMENT,
                     "%s: initialiser '%s' needs a tensor of rank >= 2 to "
                     "compute fans, got rank %d",
                     what, init_name(kind), tensor.rank);
  return MPC_OK;
}

// ----------------------------------------------------------------------------
// Initialisation

void initialize_tensor(const mpc_tensor_desc &tensor, uint64_t seed,
                       uint32_t tensor_index, void *data) {
  const int64_t count = tensor.num_elements;
  const double *args = tensor.init_args;
  if (count == 0)
    return; // fans of an empty tensor are 0; nothing to draw
  // Every kind reduces to: constant, or offset + scale * uniform, or
  // mean + std * normal.
  enum { CONSTANT, UNIFORM, NORMAL } family = CONSTANT;
  double a = 0.0, b = 0.0; // constant: a; uniform: [a, b); normal: (a, b)
  double fan_in = 0.0, fan_out = 0.0;
  if (needs_fans(tensor.init_kind))
    compute_fans(tensor, &fan_in, &fan_out);
  switch (tensor.init_kind) {
  case MPC_INIT_ZEROS:
    a = 0.0;
    break;
  case MPC_INIT_ONES:
    a = 1.0;
    break;
  case MPC_INIT_CONSTANT:
    a = args[0];
    break;
  case MPC_INIT_NORMAL:
    family = NORMAL;
    a = tensor.num_init_args == 2 ? args[0] : 0.0;
    b = args[tensor.num_init_args - 1];
    break;
  case MPC_INIT_UNIFORM:
    family = UNIFORM;
    a = args[0];
    b = args[1];
    break;
  case MPC_INIT_KAIMING_UNIFORM:
  case MPC_INIT_KAIMING_NORMAL: {
    double slope = tensor.num_init_args == 1 ? args[0] : 0.0;
    double gain = std::sqrt(2.0 / (1.0 + slope * slope));
    if (tensor.init_kind == MPC_INIT_KAIMING_UNIFORM) {
      family = UNIFORM;
      b = gain * std::sqrt(3.0 / fan_in);
      a = -b;
    } else {
      family = NORMAL;
      b = gain / std::sqrt(fan_in);
    }
    break;
  }
  case MPC_INIT_XAVIER_UNIFORM:
  case MPC_INIT_XAVIER_NORMAL: {
    double gain = tensor.num_init_args == 1 ? args[0] : 1.0;
    double std_dev = gain * std::sqrt(2.0 / (fan_in + fan_out));
    if (tensor.init_kind == MPC_INIT_XAVIER_UNIFORM) {
      family = UNIFORM;
      b = std::sqrt(3.0) * std_dev;
      a = -b;
    } else {
      family = NORMAL;
      b = std_dev;
    }
    break;
  }
  default:
    break;
  }
  for (int64_t i = 0; i < count; ++i) {
    double value = a;
    if (family == UNIFORM) {
      value =
          a +
          (b - a) * draw(seed, tensor_index, static_cast<uint64_t>(i)).uniform;
    } else if (family == NORMAL) {
      value = a + b * draw(seed, tensor_index, static_cast<uint64_t>(i)).normal;
    }
    store(tensor.dtype, data, i, value);
  }
}

} // namespace mpcrt
