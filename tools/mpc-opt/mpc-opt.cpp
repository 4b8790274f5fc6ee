//===- mpc-opt.cpp - mpc pass driver ------------------------------*- C++ -*-===//
//
// mlir-opt for the mpc dialect: parses models, runs any mpc pass or pipeline,
// prints the result. The tool lit tests drive.
//
//===----------------------------------------------------------------------===//

#include "dialect/Register.h"
#include "passes/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::mpc::registerMpcPasses();
  mlir::mpc::registerMpcPipelines();

  mlir::DialectRegistry registry;
  mlir::mpc::registerAllDialects(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "mpc optimizer driver: the mpc dialect and its passes\n",
      registry));
}
