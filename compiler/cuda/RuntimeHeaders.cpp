//===- RuntimeHeaders.cpp - where generated code finds runtime/ -----------===//

#include "compiler/cuda/RuntimeHeaders.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <optional>

using namespace mlir::mpc;

namespace {
/// An address in this program, for getMainExecutable.
int anchor;

/// <prefix> of an installed mpc (<prefix>/bin/mpc), if this is one.
std::optional<std::string> installPrefix() {
  std::string executable = llvm::sys::fs::getMainExecutable(nullptr, &anchor);
  if (executable.empty())
    return std::nullopt;
  llvm::SmallString<256> prefix(
      llvm::sys::path::parent_path(llvm::sys::path::parent_path(executable)));
  llvm::SmallString<256> probe(prefix);
  llvm::sys::path::append(probe, "include", "mpc", "runtime");
  llvm::sys::path::append(probe, "device", "mpc_device.h");
  if (!llvm::sys::fs::exists(probe))
    return std::nullopt;
  return std::string(prefix);
}
} // namespace

const std::string &mlir::mpc::runtimeIncludeRoot() {
  static const std::string root = [] {
    if (std::optional<std::string> prefix = installPrefix()) {
      llvm::SmallString<256> installed(*prefix);
      llvm::sys::path::append(installed, "include", "mpc");
      return std::string(installed);
    }
    return std::string(MPC_SOURCE_ROOT);
  }();
  return root;
}

std::string mlir::mpc::runtimeLibraryPath() {
  llvm::SmallString<256> path(installPrefix().value_or(MPC_BINARY_DIR));
  llvm::sys::path::append(path, installPrefix() ? MPC_INSTALL_LIBDIR : "lib",
                          "libmpcrt.a");
  return std::string(path);
}
