//===- Report.h - `mpc compile --report` --------------------------*- C++ -*-===//
//
// This file declares the precision report: what `mpc compile --report`
// prints before any training runs.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_REPORT_REPORT_H
#define MPC_COMPILER_REPORT_REPORT_H

#include "compiler/options/CompileOptions.h"
#include "mlir/IR/BuiltinOps.h"

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace mlir::mpc {

/// Prints the precision report of the verified model `module` (before any
/// pass ran) at the level and half type of `options`: per forward op its
/// category, assigned type and the reason; the casts inserted and the bytes
/// they write; the memory of the generated library beside O0's; and the
/// kernels of one training step with their FLOPs, bytes and roofline bound
/// on `options.reportGpu`. As tables, or one JSON object when
/// `options.reportJson`. Runs the pipeline on clones; `module` is left as
/// it was. Returns the process exit code.
int printReport(ModuleOp module, const CompileOptions &options,
                llvm::raw_ostream &out);

} // namespace mlir::mpc

#endif // MPC_COMPILER_REPORT_REPORT_H
