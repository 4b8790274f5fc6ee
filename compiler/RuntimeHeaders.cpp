//===- RuntimeHeaders.cpp - where generated code finds runtime/ -----------===//

#include "compiler/RuntimeHeaders.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir::mpc;

namespace {
/// An address in this program, for getMainExecutable.
int anchor;
} // namespace

const std::string &mlir::mpc::runtimeIncludeRoot() {
  static const std::string root = [] {
    std::string executable =
        llvm::sys::fs::getMainExecutable(nullptr, &anchor);
    if (!executable.empty()) {
      // <prefix>/bin/mpc -> <prefix>/include/mpc
      llvm::SmallString<256> installed(
          llvm::sys::path::parent_path(llvm::sys::path::parent_path(executable)));
      llvm::sys::path::append(installed, "include", "mpc");
      llvm::SmallString<256> probe(installed);
      llvm::sys::path::append(probe, "runtime", "device", "mpc_device.h");
      if (llvm::sys::fs::exists(probe))
        return std::string(installed);
    }
    return std::string(MPC_SOURCE_ROOT);
  }();
  return root;
}
