//===- Register.cpp - dialects the mpc tools load -----------------*- C++ -*-===//
//
// This file implements registerAllDialects.
//
//===----------------------------------------------------------------------===//

#include "dialect/Register.h"

#include "dialect/MpcDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

void mlir::mpc::registerAllDialects(DialectRegistry &registry) {
  // func is here for tests that exercise single ops outside a model.
  registry.insert<MpcDialect, func::FuncDialect>();
}
