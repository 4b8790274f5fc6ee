//===- OnnxImport.cpp - `mpc import`: ONNX training graphs to mpc ---------===//
//
// Translates an ONNX model that torch.onnx.export wrote with
// `training=TrainingMode.TRAINING, do_constant_folding=False` from a module
// whose forward returns the loss:
//
//   - graph inputs become model inputs; initializers that reach the loss
//     through a differentiable path become parameters, under their
//     state_dict names; batch-norm running statistics become state; every
//     other initializer (a registered buffer such as a causal mask) and
//     every integer-shape computation (Shape, Gather, Concat, ...) is
//     evaluated here, so that only tensors of static shape remain;
//   - the exporter's decompositions are recognised back into mpc ops: GELU
//     from its Erf or Tanh chain, SiLU from x * sigmoid(x), RMSNorm, layer
//     norm (opsets before 17) and the mean squared error from their
//     written-out forms, cross-entropy from SoftmaxCrossEntropyLoss or
//     LogSoftmax + NegativeLogLikelihoodLoss, linear from Gemm or
//     Transpose + MatMul (+ Add);
//   - each op is located at its node: NameLoc("<node> (<OpType>)") around
//     `<file>.onnx:<node number>:1`, so --report, the numerics lint and
//     the first-NaN locator name the node.
//
// Anything else is an error naming the node, its op type and the opset,
// never a guess: the model is checked (onnx::checker), its shapes inferred
// strictly (onnx::shape_inference), and the result verified.
//
// This file reads, checks and infers the model and runs the Importer
// (Importer.h), whose parts are the other files here. The importer is
// compiled with exceptions: libonnx reports through them.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/OnnxImport.h"

#include "dialect/MpcDialect.h"
#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#ifdef MPC_HAVE_ONNX
#include "compiler/import/Importer.h"

#include "onnx/checker.h"
#include "onnx/defs/schema.h"
#include "onnx/shape_inference/implementation.h"
#endif

using namespace mlir;

#ifndef MPC_HAVE_ONNX

bool mlir::mpc::haveOnnx() { return false; }

int mlir::mpc::runImport(const ImportOptions &) {
  llvm::errs() << "mpc import: error: this mpc was built without ONNX; "
                  "install libonnx-dev (tools/setup.sh does) and rebuild\n";
  return 1;
}

#else

bool mlir::mpc::haveOnnx() { return true; }

using namespace mlir::mpc::onnx_import;

int mlir::mpc::runImport(const ImportOptions &options) {
  auto fail = [&](const Twine &message) {
    llvm::errs() << "mpc import: error: " << options.inputFile << ": "
                 << message << "\n";
    return 1;
  };
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(options.inputFile, /*IsText=*/false);
  if (std::error_code ec = buffer.getError())
    return fail("cannot read it: " + ec.message());

  onnx::ModelProto model;
  if (!model.ParseFromArray((*buffer)->getBufferStart(),
                            static_cast<int>((*buffer)->getBufferSize())))
    return fail("not an ONNX model: the protobuf does not parse (a truncated "
                "or corrupted file?)");
  if (!model.has_graph() || model.graph().node_size() == 0)
    return fail("not an ONNX model: it has no graph (a truncated or "
                "corrupted file?)");

  int64_t opset = -1;
  for (const onnx::OperatorSetIdProto &import : model.opset_import())
    if (import.domain().empty() || import.domain() == "ai.onnx")
      opset = import.version();
  if (opset < 0)
    return fail("it imports no default-domain opset");
  if (opset > kMaxOpset)
    return fail("opset " + Twine(opset) + " is newer than " + Twine(kMaxOpset) +
                ", the newest mpc import reads; export "
                "with opset_version=" +
                Twine(kMaxOpset));
  if (opset < kMinOpset)
    return fail("opset " + Twine(opset) + " is older than " + Twine(kMinOpset) +
                ", the oldest mpc import reads; export "
                "with opset_version=" +
                Twine(kMaxOpset));

  try {
    onnx::checker::check_model(model);
    // Without ONNX's data propagation: the importer evaluates the integer
    // subgraphs (Shape, Gather, Slice, Concat, ...) itself and infers again
    // with their values written in (Importer::foldConstants).
    onnx::ShapeInferenceOptions inference(/*check_type=*/true,
                                          /*error_mode=*/1,
                                          /*enable_data_propagation=*/false);
    onnx::shape_inference::InferShapes(
        model, onnx::OpSchemaRegistry::Instance(), inference);
  } catch (const std::exception &error) {
    // Messages can span lines; the first says what is wrong.
    std::string message = error.what();
    return fail("the ONNX checker rejects it: " +
                StringRef(message).trim().split('\n').first);
  }

  DialectRegistry registry;
  registry.insert<mpc::MpcDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  // A verifier message names the node through its location.
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    std::string where;
    diagnostic.getLocation()->walk([&](Location inner) {
      if (auto name = dyn_cast<NameLoc>(inner)) {
        where = "node '" + name.getName().str() + "': ";
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    llvm::errs() << "mpc import: error: " << options.inputFile << ": " << where
                 << diagnostic.str() << "\n";
    return success();
  });

  Importer importer(model, options, opset, context);
  OwningOpRef<ModuleOp> module(ModuleOp::create(UnknownLoc::get(&context)));
  if (mpc::ModelOp translated = importer.translate())
    module->push_back(translated);
  else
    return 1;
  // Attention as the exporter writes it (nn.MultiheadAttention's, or one
  // written out by hand) becomes mpc.attention in what the user reads, as
  // `mpc compile` would make it.
  PassManager passes(&context);
  passes.addPass(mpc::createMpcRecognizeAttentionPass());
  if (failed(passes.run(*module)))
    return 1;
  // Printed on its own, as it was built: its locations as aliases at the end.
  OwningOpRef<mpc::ModelOp> result(
      cast<mpc::ModelOp>(module->getBody()->front()));
  result->getOperation()->remove();
  if (!options.weightsFile.empty() &&
      failed(importer.writeWeights(options.weightsFile)))
    return 1;

  std::string error;
  auto output = mlir::openOutputFile(options.outputFile, &error);
  if (!output)
    return fail(error);
  output->os() << "// Imported by mpc import from " << options.inputFile
               << " (ONNX opset " << opset;
  if (!model.producer_name().empty())
    output->os() << ", written by " << model.producer_name() << " "
                 << model.producer_version();
  output->os() << ").\n// Each op's loc names its ONNX node; line N of the "
                  ".onnx file is the graph's Nth node.\n";
  result->print(output->os(),
                OpPrintingFlags().enableDebugInfo(/*enable=*/true,
                                                  /*prettyForm=*/false));
  output->os() << "\n";
  output->keep();
  return 0;
}

#endif // MPC_HAVE_ONNX
