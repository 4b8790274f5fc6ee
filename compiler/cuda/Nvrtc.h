//===- Nvrtc.h - kernel source to cubin + PTX with NVRTC ----------*- C++ -*-===//
//
// This file declares the cuda target's kernel compiler: the model's generated
// CUDA C++ (the source the cpu target compiles through the shim) goes through
// NVRTC, linked as a library, to a cubin for one architecture plus its PTX,
// which the driver JIT-compiles on newer GPUs.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_CUDA_NVRTC_H
#define MPC_COMPILER_CUDA_NVRTC_H

#include "compiler/cuda/Occupancy.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <utility>
#include <vector>

namespace mlir::mpc {

/// `--arch` when none is given: Ampere (A100), the oldest architecture with
/// bf16 tensor cores; its PTX runs on every newer GPU.
constexpr int defaultSmVersion = 80;
/// The first architecture with thread-block clusters (Hopper).
constexpr int minClusterSmVersion = 90;

/// The comment line code generation puts before a kernel generated for an
/// op (`// mpc: from 'mpc.linear' at model.mlir:12:5`), by which NVRTC's
/// errors and warnings are traced back to the op.
constexpr const char *kernelOriginPrefix = "// mpc: from '";

/// What NVRTC produced for one model.
/// What ptxas reported for one kernel (`--ptxas-options=-v`).
struct KernelResources {
  std::string name;   ///< as in the source
  int maxThreads = 0; ///< its __launch_bounds__; 0 if it has none
  int registers = -1; ///< per thread; -1 if ptxas did not say
  int stackBytes = 0, spillStoreBytes = 0, spillLoadBytes = 0;
  int sharedBytes = 0; ///< static shared memory per block
  /// With blocks of maxThreads, on the architecture compiled for.
  std::optional<KernelOccupancy> occupancy;
};

struct CudaImage {
  std::string cubin; ///< ELF for sm_<smVersion>
  std::string ptx;   ///< the same kernels as PTX, for newer GPUs
  /// Every `__global__` function: (source name, lowered name), the latter
  /// for cuModuleGetFunction.
  std::vector<std::pair<std::string, std::string>> kernels;
  /// The same kernels' resources, in the same order.
  std::vector<KernelResources> resources;
  /// The source compiled: the one given, but where ptxas spilled a kernel
  /// at its launch bounds and compileWithNvrtc raised them.
  std::string source;
};

/// One `__global__` function of a kernel source.
struct KernelDeclaration {
  std::string name;
  int maxThreads = 0; ///< from `__launch_bounds__(N[, M])`; 0 without
  int clusterBlocks = 0; ///< from `MPC_CLUSTER_DIMS(N)`; 0 without
};
/// The kernels' `__global__` functions, in source order:
/// `__global__ void [__launch_bounds__(N[, M])] [MPC_CLUSTER_DIMS(N)] <name>(`.
std::vector<KernelDeclaration> findKernels(llvm::StringRef source);

/// The resource table `mpc compile` writes beside a cuda image
/// (<model>_kernels.resources): a header line, then one tab-separated line
/// per kernel, ending in its theoretical occupancy ("-" where unknown).
std::string formatResources(llvm::ArrayRef<KernelResources> resources);

/// Whether this mpc was built with NVRTC (the CUDA toolkit was found).
bool haveNvrtc();

/// For `mpc --version`: the CUDA toolkit this mpc was built with and the
/// NVRTC it runs, or that it has none.
std::string cudaToolkitDescription();

/// The kernels' `__global__` function names, in source order.
std::vector<std::string> findKernelNames(llvm::StringRef source);

/// Compiles `source` for sm_<smVersion>. `savedPath` is where the caller has
/// written the source; messages point there. A kernel that ptxas spilled
/// is compiled again with the registers of one resident block fewer (its
/// `__launch_bounds__` rewritten in `image.source`, which the caller saves
/// where it differs; at most twice). On failure prints diagnostics
/// (`file:line:col: error: ...` at the op a failing kernel was generated
/// for, when its source records one) and returns false.
bool compileWithNvrtc(llvm::StringRef source, int smVersion,
                      llvm::StringRef savedPath, CudaImage &image);

} // namespace mlir::mpc

#endif // MPC_COMPILER_CUDA_NVRTC_H
