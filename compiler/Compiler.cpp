//===- Compiler.cpp - the mpc compile pipeline --------------------*- C++ -*-===//
//
// This file implements `mpc compile`: parse and verify the model, then run
// the stages of the pipeline up to the one `--emit` asks for.
//
//===----------------------------------------------------------------------===//

#include "compiler/Compiler.h"

#include "dialect/MpcOps.h"
#include "dialect/Register.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::mpc;

namespace mlir::mpc {

namespace {

/// Checks what the verifier cannot: the file holds exactly one model.
LogicalResult checkSingleModel(ModuleOp module) {
  ModelOp model;
  for (Operation &op : module.getBody()->getOperations()) {
    auto candidate = dyn_cast<ModelOp>(op);
    if (!candidate)
      return op.emitError() << "expects only mpc.model at the top level of "
                               "a model file, got '"
                            << op.getName() << "'";
    if (model) {
      InFlightDiagnostic diag = op.emitError()
                                << "expects one mpc.model per file";
      diag.attachNote(model.getLoc()) << "first model here";
      return diag;
    }
    model = candidate;
  }
  if (!model)
    return module.emitError() << "expects an mpc.model, found none";
  return success();
}

} // namespace

int runCompile(const CompileOptions &options, llvm::raw_ostream &out) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFileOrSTDIN(options.inputFile, /*IsText=*/true);
  if (std::error_code ec = buffer.getError()) {
    llvm::errs() << "mpc compile: error: cannot read '" << options.inputFile
                 << "': " << ec.message() << "\n";
    return 1;
  }

  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  // A located message is enough; the op itself can be pages long.
  context.printOpOnDiagnostic(false);
  context.loadAllAvailableDialects();

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module || failed(checkSingleModel(*module)))
    return 1;

  if (std::optional<std::string> missing = findUnimplemented(options)) {
    llvm::errs() << "mpc compile: error: " << *missing << "\n";
    return 1;
  }
  // EmitStage::Mlir: the model as parsed and verified.
  module->print(out);
  out << "\n";
  return 0;
}

} // namespace mlir::mpc
