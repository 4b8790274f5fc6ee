//===- Occupancy.cpp - a kernel's theoretical occupancy -------------------===//
//
// The calculator is the toolkit's header-only cuda_occupancy.h; what it
// needs of a GPU are the architecture's published per-SM limits (NVIDIA's
// CUDA C++ Programming Guide, "Compute Capabilities", and the tuning guides
// of each architecture), written here per sm version.
//
//===----------------------------------------------------------------------===//

#include "compiler/cuda/Occupancy.h"

#ifdef MPC_HAVE_NVRTC
#include <cuda_occupancy.h>
#endif

using namespace mlir::mpc;

#ifndef MPC_HAVE_NVRTC

std::optional<KernelOccupancy> mlir::mpc::theoreticalOccupancy(int, int, int,
                                                               int) {
  return std::nullopt;
}

#else

namespace {
/// The per-SM limits of one architecture.
struct SmLimits {
  int smVersion;
  int maxThreadsPerSm;
  size_t sharedPerSm;         ///< the largest carve-out
  size_t sharedPerBlockOptin; ///< what one block may opt into
  size_t reservedPerBlock;    ///< the driver's, per resident block
  int sms;                    ///< of the reference part (T4, A100, A10,
                              ///< L4, H100 SXM); not used per SM
};

constexpr SmLimits knownLimits[] = {
    {75, 1024, 64 * 1024, 64 * 1024, 0, 40},
    {80, 2048, 164 * 1024, 163 * 1024, 1024, 108},
    {86, 1536, 100 * 1024, 99 * 1024, 1024, 72},
    {89, 1536, 100 * 1024, 99 * 1024, 1024, 58},
    {90, 2048, 228 * 1024, 227 * 1024, 1024, 132},
};
} // namespace

std::optional<KernelOccupancy>
mlir::mpc::theoreticalOccupancy(int smVersion, int blockSize, int registers,
                                int sharedBytes) {
  const SmLimits *limits = nullptr;
  for (const SmLimits &known : knownLimits)
    if (known.smVersion == smVersion)
      limits = &known;
  if (!limits || blockSize <= 0 || registers < 0 || sharedBytes < 0)
    return std::nullopt;

  cudaOccDeviceProp device;
  device.computeMajor = smVersion / 10;
  device.computeMinor = smVersion % 10;
  device.maxThreadsPerBlock = 1024;
  device.maxThreadsPerMultiprocessor = limits->maxThreadsPerSm;
  device.regsPerBlock = 64 * 1024;
  device.regsPerMultiprocessor = 64 * 1024;
  device.warpSize = 32;
  device.sharedMemPerBlock = 48 * 1024;
  device.sharedMemPerMultiprocessor = limits->sharedPerSm;
  device.numSms = limits->sms;
  device.sharedMemPerBlockOptin = limits->sharedPerBlockOptin;
  device.reservedSharedMemPerBlock = limits->reservedPerBlock;

  cudaOccFuncAttributes kernel;
  kernel.maxThreadsPerBlock = blockSize;
  kernel.numRegs = registers;
  kernel.sharedSizeBytes = sharedBytes;

  cudaOccDeviceState state; // the default cache and carve-out preference
  cudaOccResult result;
  if (cudaOccMaxActiveBlocksPerMultiprocessor(
          &result, &device, &kernel, &state, blockSize,
          /*dynamicSmemSize=*/0) != CUDA_OCC_SUCCESS ||
      result.activeBlocksPerMultiprocessor <= 0)
    return std::nullopt;

  KernelOccupancy occupancy;
  occupancy.blocksPerSm = result.activeBlocksPerMultiprocessor;
  occupancy.warpsPerSm = occupancy.blocksPerSm * ((blockSize + 31) / 32);
  occupancy.maxWarpsPerSm = limits->maxThreadsPerSm / 32;
  for (auto [bit, name] : {std::pair{OCC_LIMIT_WARPS, "warps"},
                           std::pair{OCC_LIMIT_REGISTERS, "registers"},
                           std::pair{OCC_LIMIT_SHARED_MEMORY, "shared"},
                           std::pair{OCC_LIMIT_BLOCKS, "blocks"}})
    if (result.limitingFactors & bit)
      occupancy.limitedBy +=
          (occupancy.limitedBy.empty() ? "" : "+") + std::string(name);
  return occupancy;
}

#endif
