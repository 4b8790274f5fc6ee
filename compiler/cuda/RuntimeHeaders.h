//===- RuntimeHeaders.h - where generated code finds runtime/ ---*- C++ -*-===//
//
// Generated kernels and host code include runtime headers by their path
// under the repository root (`#include "runtime/device/mpc_device.h"`); the
// host compiler and NVRTC get the directory above `runtime/` as an include
// path.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_CUDA_RUNTIMEHEADERS_H
#define MPC_COMPILER_CUDA_RUNTIMEHEADERS_H

#include <string>

namespace mlir::mpc {

/// `<prefix>/include/mpc` for an installed mpc (`cmake --install`: found
/// from the executable, `<prefix>/bin/mpc`), else the source tree this mpc
/// was built from.
const std::string &runtimeIncludeRoot();

/// libmpcrt.a, for `mpc compile --shared`: `<prefix>/<libdir>/libmpcrt.a`
/// for an installed mpc, else the one of the build this mpc belongs to.
std::string runtimeLibraryPath();

} // namespace mlir::mpc

#endif // MPC_COMPILER_CUDA_RUNTIMEHEADERS_H
