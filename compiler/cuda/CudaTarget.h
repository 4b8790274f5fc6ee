//===- CudaTarget.h - what the cuda target adds to a library ------*- C++ -*-===//
//
// This file declares the pieces of generated code that differ on the cuda
// target: the preamble of the host code (launches and GEMMs go to the
// device runtime, runtime/cuda/mpc_cuda_host.h) and the source that embeds
// NVRTC's cubin and PTX in lib<model>.a.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_CUDA_CUDATARGET_H
#define MPC_COMPILER_CUDA_CUDATARGET_H

#include "compiler/cuda/Nvrtc.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace mlir::mpc {

/// Host-code lines, after the runtime includes, that turn MPC_LAUNCH and
/// mpc_rt_gemm into driver-API launches and cuBLASLt calls on the session's
/// stream, for the kernels of `<model>_cuda_image`.
std::string cudaHostPreamble(llvm::StringRef model);

/// Host-code lines defining `<model>_cuda_host_kernels`: the host build of
/// every kernel in `kernels` (mpc_cuda_host_kernel, with its
/// __launch_bounds__), which a host stand-in of the driver runs where there
/// is no GPU.
std::string cudaHostKernelTable(llvm::StringRef model,
                                llvm::ArrayRef<KernelDeclaration> kernels);

/// C++ source defining `<model>_cuda_image` (runtime/cuda/mpc_cuda.h): the
/// cubin and PTX, included from the files at `cubinPath` and `ptxPath`
/// (absolute paths) with the assembler's .incbin, and the kernel symbols.
std::string cudaImageSource(llvm::StringRef model, int smVersion,
                            const CudaImage &image, llvm::StringRef cubinPath,
                            llvm::StringRef ptxPath);

} // namespace mlir::mpc

#endif // MPC_COMPILER_CUDA_CUDATARGET_H
