//===- MpcDialect.h - mpc dialect declaration ---------------------*- C++ -*-===//
//
// This file declares the mpc dialect, its enums and attributes.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_MPCDIALECT_H
#define MPC_DIALECT_MPCDIALECT_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include <string>

#include "dialect/MpcEnums.h.inc"
#include "dialect/MpcOpsDialect.h.inc"


#include <cmath>

namespace mlir::mpc {
/// Parses a float literal as an f64 APFloat (attribute parameters).
FailureOr<llvm::APFloat> parseF64(AsmParser &parser);
/// Parses `true` or `false`.
FailureOr<bool> parseBoolKeyword(AsmParser &parser);
} // namespace mlir::mpc

#define GET_ATTRDEF_CLASSES
#include "dialect/MpcAttrs.h.inc"

namespace mlir::mpc {
/// The shortest decimal spelling of `value` that reads back exactly and that
/// the MLIR lexer takes as one number (`0.02`, `200`, `1.0e-05`), for
/// printing initialiser arguments and for diagnostics.
std::string formatDecimal(double value);
/// Kernels compute in f32, so a float attribute (an F64Attr in ODS) means
/// its value rounded to f32: 1e39 is inf there and 1e-50 is 0.
inline bool isFiniteAsF32(double value) {
  return std::isfinite(static_cast<float>(value));
}
inline bool isPositiveAsF32(double value) {
  return isFiniteAsF32(value) && static_cast<float>(value) > 0.0f;
}
} // namespace mlir::mpc

#endif // MPC_DIALECT_MPCDIALECT_H
