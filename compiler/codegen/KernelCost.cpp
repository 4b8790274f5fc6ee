//===- KernelCost.cpp - what each kernel of a step costs ----------*- C++
//-*-===//
//
// This file implements the helpers of per-kernel accounting: storage bytes
// of values, locations as text, and the forward/backward split of a
// training step.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelCost.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::mpc;

int64_t mlir::mpc::storageBytes(RankedTensorType type) {
  Type element = type.getElementType();
  int64_t bytes = element.isInteger(1)
                      ? 1
                      : static_cast<int64_t>(element.getIntOrFloatBitWidth()) / 8;
  return type.getNumElements() * bytes;
}

int64_t mlir::mpc::elementBytes(Value value) {
  return storageBytes(RankedTensorType::get(
      {1}, cast<RankedTensorType>(value.getType()).getElementType()));
}

KernelCost &KernelCost::reads(Value value) {
  bytesRead += storageBytes(cast<RankedTensorType>(value.getType()));
  return *this;
}

KernelCost &KernelCost::writes(Value value) {
  bytesWritten += storageBytes(cast<RankedTensorType>(value.getType()));
  return *this;
}

KernelCost &KernelCost::readsElements(int64_t elements, Type element) {
  bytesRead += storageBytes(RankedTensorType::get({elements}, element));
  return *this;
}

KernelCost &KernelCost::writesElements(int64_t elements, Type element) {
  bytesWritten += storageBytes(RankedTensorType::get({elements}, element));
  return *this;
}

std::string mlir::mpc::fileLineCol(Location loc) {
  std::string text = "-";
  // An imported op names its ONNX node around the file location.
  std::string name;
  if (auto named = dyn_cast<NameLoc>(loc))
    name = " " + named.getName().str();
  loc->walk([&](Location inner) {
    if (auto file = dyn_cast<FileLineColLoc>(inner)) {
      text = llvm::formatv("{0}:{1}:{2}",
                           llvm::sys::path::filename(file.getFilename()),
                           file.getLine(), file.getColumn())
                 .str() +
             name;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return text;
}

int64_t mlir::mpc::gemmDtypeBytes(StringRef dtype) {
  if (dtype == "MPC_F32")
    return 4;
  return dtype.starts_with("MPC_F8") ? 1 : 2;
}
