//===- OnnxImport.h - `mpc import`: ONNX training graphs to mpc ---*- C++
//-*-===//
//
// This file declares the entry point of `mpc import model.onnx -o
// model.mlir`: an ONNX graph that torch.onnx.export wrote in training mode
// from a module returning its loss becomes an `mpc.model`.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_IMPORT_ONNXIMPORT_H
#define MPC_COMPILER_IMPORT_ONNXIMPORT_H

#include <string>

namespace mlir::mpc {

struct ImportOptions {
  std::string inputFile;
  /// Where the model goes; "-" is stdout.
  std::string outputFile = "-";
  /// When set, the initializers' values are written there as safetensors,
  /// under the parameter and state names (mpc_load_weights reads them).
  std::string weightsFile;
  /// The model's symbol; empty: the input's file name, made an identifier.
  std::string modelName;
};

/// Whether this mpc was built with ONNX (Debian's libonnx-dev).
bool haveOnnx();

/// Reads, checks and translates the model. Errors go to stderr as
/// `mpc import: error: ...`, naming the ONNX node. Returns the process exit
/// code.
int runImport(const ImportOptions &options);

} // namespace mlir::mpc

#endif // MPC_COMPILER_IMPORT_ONNXIMPORT_H
