//===- compiled_model.h - the model a test program is built with --------===//
//
// End-to-end test programs are built once per compiled model with
// -DMPC_MODEL=<name> (the model's mpc_add_model target provides its
// directory): this includes the model's generated header and names its
// descriptor function MPC_MODEL_DESC.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_TESTS_E2E_COMPILED_MODEL_H
#define MPC_TESTS_E2E_COMPILED_MODEL_H

#define MPC_STRINGIFY2(x) #x
#define MPC_STRINGIFY(x) MPC_STRINGIFY2(x)
#define MPC_CONCAT2(a, b) a##b
#define MPC_CONCAT(a, b) MPC_CONCAT2(a, b)
#include MPC_STRINGIFY(MPC_MODEL.h)
#define MPC_MODEL_DESC MPC_CONCAT(mpc_model_, MPC_MODEL)

#endif // MPC_TESTS_E2E_COMPILED_MODEL_H
