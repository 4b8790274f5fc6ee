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

#include "dialect/MpcEnums.h.inc"
#include "dialect/MpcOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/MpcAttrs.h.inc"

#endif // MPC_DIALECT_MPCDIALECT_H
