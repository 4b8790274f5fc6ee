//===- ParserWorkarounds.h - input MLIR 22's parser crashes on ---*- C++ -*-===//
//
// MLIR 22's parser crashes, instead of reporting an error, on a few inputs.
// mpc and mpc-opt scan the source for them first and report each at its
// file:line:col, so that a user's typo never ends in a stack dump.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_PARSERWORKAROUNDS_H
#define MPC_DIALECT_PARSERWORKAROUNDS_H

#include "mlir/Support/LLVM.h"

namespace llvm {
class MemoryBuffer;
class SourceMgr;
} // namespace llvm

namespace mlir::mpc {
/// Reports, through `sourceMgr` (as `file:line:col: error: ...`), every
/// construct of buffer `bufferId` that MLIR 22's parser would crash on, and
/// fails if there was one:
///   - `array<index: ...>`: the dense array parser takes index for a float
///     type and segfaults (llvm/llvm-project#179045, fixed after 22 by
///     llvm/llvm-project#179075).
LogicalResult rejectParserCrashes(llvm::SourceMgr &sourceMgr,
                                  unsigned bufferId);
} // namespace mlir::mpc

#endif // MPC_DIALECT_PARSERWORKAROUNDS_H
