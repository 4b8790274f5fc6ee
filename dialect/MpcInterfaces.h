//===- MpcInterfaces.h - mpc op interfaces ------------------------*- C++ -*-===//
//
// This file declares PrecisionPolicyOpInterface and DifferentiableOpInterface.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_MPCINTERFACES_H
#define MPC_DIALECT_MPCINTERFACES_H

#include "dialect/MpcDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"

#include "dialect/MpcInterfaces.h.inc"

#endif // MPC_DIALECT_MPCINTERFACES_H
