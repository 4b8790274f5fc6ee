//===- Compiler.h - the mpc compile pipeline ----------------------*- C++ -*-===//
//
// This file declares the entry point `mpc compile` calls once its options
// are valid.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_DRIVER_COMPILER_H
#define MPC_COMPILER_DRIVER_COMPILER_H

#include "compiler/options/CompileOptions.h"

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir::mpc {

/// Loads, verifies and compiles a model. Diagnostics go to stderr as
/// `file:line:col: error: ...`. Returns the process exit code.
int runCompile(const CompileOptions &options, llvm::raw_ostream &out);

} // namespace mlir::mpc

#endif // MPC_COMPILER_DRIVER_COMPILER_H
