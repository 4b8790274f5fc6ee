//===- model_desc.h - checking a model descriptor ---------------*- C++ -*-===//
//
// Internal to libmpcrt: the checks of a generated descriptor (mpc_model.h)
// that sessions (mpc_runtime.cpp) and metadata queries (model_desc.cpp)
// start with. Each sets the error (error.h) and returns its status.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_RUNTIME_MODEL_DESC_H
#define MPC_RUNTIME_MODEL_DESC_H

#include "runtime/mpc_model.h"

namespace mpcrt {

/// "params", "grads", "optimizer" or "activations"; "?" out of range.
const char *arena_name(int32_t arena);

/// Checks only what identifies the model; enough for the metadata queries.
mpc_status check_model_header(const mpc_model_desc *model);

/// Checks the whole descriptor against the runtime's ABI: every tensor
/// within its arena, the step functions present, the loss scaler's
/// configuration valid. Generated descriptors are trusted to be well
/// formed; this catches a library built against another runtime.
mpc_status check_model(const mpc_model_desc *model);

} // namespace mpcrt

#endif // MPC_RUNTIME_MODEL_DESC_H
