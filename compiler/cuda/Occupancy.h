//===- Occupancy.h - a kernel's theoretical occupancy -----*- C++ -*-===//
//
// How many blocks of a kernel an SM holds at once, and what stops it holding
// more, as CUDA's own occupancy calculator (the toolkit's cuda_occupancy.h)
// works it out from the kernel's registers and static shared memory (what
// ptxas reported) and its block size, for an architecture's published
// limits. No GPU is needed.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_CUDA_OCCUPANCY_H
#define MPC_COMPILER_CUDA_OCCUPANCY_H

#include <optional>
#include <string>

namespace mlir::mpc {

struct KernelOccupancy {
  int blocksPerSm = 0; ///< resident blocks per SM
  int warpsPerSm = 0;  ///< resident warps per SM
  int maxWarpsPerSm = 0;
  /// What bounds blocksPerSm: "warps" (the SM's thread limit), "registers",
  /// "shared", "blocks" (the SM's block limit), joined by '+' where several
  /// bound it equally.
  std::string limitedBy;

  double fraction() const {
    return maxWarpsPerSm ? double(warpsPerSm) / maxWarpsPerSm : 0.0;
  }
};

/// The occupancy of a kernel of `registers` per thread and `sharedBytes` of
/// static shared memory per block, launched with blocks of `blockSize`
/// threads, on sm_<smVersion>. Nothing for an architecture whose limits are
/// not known here (sm_75, 80, 86, 89 and 90 are), for a block it could not
/// launch, or where mpc was built without the CUDA toolkit.
std::optional<KernelOccupancy> theoreticalOccupancy(int smVersion,
                                                    int blockSize,
                                                    int registers,
                                                    int sharedBytes);

} // namespace mlir::mpc

#endif // MPC_COMPILER_CUDA_OCCUPANCY_H
