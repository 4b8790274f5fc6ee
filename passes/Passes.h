//===- Passes.h - mpc passes --------------------------------------*- C++ -*-===//
//
// This file declares every mpc pass and its registration.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_PASSES_PASSES_H
#define MPC_PASSES_PASSES_H

#include "dialect/MpcDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::mpc {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// The passes `mpc compile` runs on a verified model.
void buildTrainingPipeline(OpPassManager &pm);
/// Registers `mpc-train-pipeline`.
void registerMpcPipelines();

} // namespace mlir::mpc

#endif // MPC_PASSES_PASSES_H
