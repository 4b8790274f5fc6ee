//===- init.h - deterministic parameter initialisers ------------*- C++ -*-===//
//
// Internal to libmpcrt. Every element's random numbers come from Philox4x32-10
// keyed by the session seed, with the counter (element index, tensor index),
// so a value depends only on (seed, tensor, element): not on the order of
// initialisation, the number of threads, or the other tensors in the model.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_INIT_H
#define MPC_RUNTIME_INIT_H

#include "runtime/mpc_model.h"

namespace mpcrt {

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
/// 3", SC 2011): four 32-bit random words for one 128-bit counter and a
/// 64-bit key.
void philox4x32_10(const uint32_t counter[4], const uint32_t key[2],
                   uint32_t out[4]);

/// fan_in and fan_out as PyTorch's _calculate_fan_in_and_fan_out: with
/// receptive = product of dims 2.., fan_in = shape[1] * receptive and
/// fan_out = shape[0] * receptive. Needs rank >= 2.
void compute_fans(const mpc_tensor_desc &tensor, double *fan_in,
                  double *fan_out);

/// Checks a tensor's init_kind, argument count and values and, for the
/// kaiming and xavier kinds, its rank. `what` names the tensor in the message
/// ("model 'mlp': param 'w1'").
mpc_status check_initializer(const mpc_tensor_desc &tensor, const char *what);

/// Writes the initial value of every element of `tensor` (in its dtype) to
/// `data`. `tensor_index` numbers params then states.
void initialize_tensor(const mpc_tensor_desc &tensor, uint64_t seed,
                       uint32_t tensor_index, void *data);

} // namespace mpcrt

#endif // MPC_RUNTIME_INIT_H
