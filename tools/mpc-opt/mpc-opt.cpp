//===- mpc-opt.cpp - mpc pass driver ------------------------------*- C++ -*-===//
//
// mlir-opt for the mpc dialect: parses models, runs any mpc pass or pipeline,
// prints the result. The tool lit tests drive. Input MLIR 22's parser would
// crash on is reported first (dialect/ParserWorkarounds.h).
//
//===----------------------------------------------------------------------===//

#include "dialect/ParserWorkarounds.h"
#include "dialect/Register.h"
#include "passes/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

int main(int argc, char **argv) {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::mpc::registerMpcPasses();
  mlir::mpc::registerMpcPipelines();

  mlir::DialectRegistry registry;
  mlir::mpc::registerAllDialects(registry);
  auto [inputFilename, outputFilename] = mlir::registerAndParseCLIOptions(
      argc, argv, "mpc optimizer driver: the mpc dialect and its passes\n",
      registry);
  // Standard input can be read once only, so it is not scanned; a file that
  // cannot be read is MlirOptMain's to report.
  if (inputFilename != "-") {
    if (std::unique_ptr<llvm::MemoryBuffer> input =
            mlir::openInputFile(inputFilename)) {
      llvm::SourceMgr sourceMgr;
      unsigned id = sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
      if (failed(mlir::mpc::rejectParserCrashes(sourceMgr, id)))
        return 1;
    }
  }
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
}
