//===- KernelModel.h - a kernel's modelled time from its counters -*- C++
//-*-===//
//
// `mpc compile --report --report-counters=<file>`: what the block emulator
// counted for each kernel (MPC_EMULATION_COUNTERS, from a build of the same
// model with --profile-emulated) priced on the GPU of --report-gpu. The
// roofline bound (Roofline.h) assumes every kernel perfect; the modelled
// time adds what the counters show costs more: sectors fetched beyond the
// bytes needed, shared-memory wavefronts and bank conflicts, and load
// latency that too few resident warps cannot hide. KernelModel.cpp states
// the model, its constants and what it cannot see.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_REPORT_KERNELMODEL_H
#define MPC_COMPILER_REPORT_KERNELMODEL_H

#include "compiler/report/Roofline.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace mlir::mpc {

/// The classes of warp instructions the emulator counts (instructionClassNames).
constexpr int instructionClasses = 9;

/// Warp instructions of one class as the emulator counted them, with the
/// lanes that took part in each summed: lanes / instructions is 32 where
/// none diverged.
struct InstructionClass {
  double instructions = 0, lanes = 0;
};

/// One kernel's counters, summed over its launches in the counted steps and
/// scaled to whole grids (runtime/device/mpc_emulator.h, launch_counters).
struct EmulatedCounters {
  int64_t launches = 0;
  unsigned grid = 0, block = 0;
  double sharedBytesPerBlock = 0;
  double loadRequests = 0, storeRequests = 0, atomicRequests = 0;
  double loadSectors = 0;
  /// Over loads, stores and atomics.
  double sectors = 0, idealSectors = 0, lines = 0;
  double distinctSectors = 0, distinctLoadSectors = 0;
  double storeSectors = 0, atomicSectors = 0;
  double sharedRequests = 0, sharedWavefronts = 0, sharedIdealWavefronts = 0;
  /// mma.sync m16n8k16 products.
  double mmaProducts = 0;
  /// Global-load rounds summed over warps: the loads each warp waits for
  /// one after another (launch_counters::load_rounds). Counters written
  /// before it was counted give every load request a round.
  double loadRounds = 0;
  /// By class, in the order of instructionClassNames: the memory
  /// instructions (requests) and the warp-wide ones (shuffles, votes,
  /// __syncwarp, __syncthreads). Counters written before the warp-wide
  /// classes were counted leave those 0.
  InstructionClass classes[instructionClasses];
};

/// The names of EmulatedCounters::classes, as the emulator's JSON has them.
extern const char *const instructionClassNames[instructionClasses];

/// Reads the JSON that MPC_EMULATION_COUNTERS names, by kernel name; on
/// failure says why on `errors` and returns nothing.
std::optional<llvm::StringMap<EmulatedCounters>>
readEmulatedCounters(llvm::StringRef path, llvm::raw_ostream &errors);

/// What the compiled kernel adds to its counters (the cuda target, from
/// NVRTC's PTX and ptxas): how many instructions it has for each memory
/// instruction, and its registers.
struct CompiledKernel {
  /// PTX instructions over PTX memory instructions (global and shared
  /// loads, stores and atomics, ldmatrix and cp.async): the emulator counts
  /// the latter as requests, and a warp issues the former about this many
  /// times as often (Nsight Compute on GPT-2 small: within 0.5x to 1.5x of
  /// its warp instructions for every kernel family above 1 % of the step).
  double instructionsPerRequest = 0;
  /// ptxas's registers a thread (0: unknown, assumed 32).
  int registers = 0;
  /// ptxas's spill stores and loads, bytes a thread: local memory traffic
  /// the counters do not see (the emulator runs the source, not SASS).
  int spillStoreBytes = 0, spillLoadBytes = 0;
};

/// Reads each kernel's CompiledKernel from a model's PTX, by the lowered
/// names `kernels` maps source names to (CudaImage::kernels), with its
/// registers and spills from `resources` by source name (what ptxas said;
/// its instructionsPerRequest is ignored).
llvm::StringMap<CompiledKernel> analyseCompiledKernels(
    llvm::StringRef ptx,
    llvm::ArrayRef<std::pair<std::string, std::string>> kernels,
    const llvm::StringMap<CompiledKernel> &resources);

/// A kernel's modelled time: the largest of its terms, each the time one
/// resource needs for the kernel's work.
struct ModelledTime {
  double seconds = 0;
  /// The largest term: "dram", "l2", "l1", "tensor", "fp32", "latency";
  /// "gemm" for a cuBLASLt call; "not counted" when no counters came.
  const char *limitedBy = "";
  double dram = 0, l2 = 0, l1 = 0, tensor = 0, fp32 = 0, latency = 0;
  /// Warp instructions / (SMs x 4 schedulers x clock): 0 without a
  /// CompiledKernel.
  double issue = 0;
  /// issue + l1, the SM's pipes one after the other (0 without issue).
  double sm = 0;
  /// The warp instructions that assumes (requests x instructionsPerRequest).
  double warpInstructions = 0;
  /// Resident warps an SM runs the kernel with (the latency term's).
  double warpsPerSm = 0;
  /// L1 wavefronts of local memory the l1 term includes for ptxas's
  /// spills: each spilled word stored and loaded once a thread, at least.
  double spillWavefronts = 0;
};

/// The modelled time of a generated kernel that moves at least
/// `idealBytes` and computes `flops` on the CUDA cores, from its counters.
/// With `compiled`, also the issue term, and occupancy at its registers.
ModelledTime modelKernel(double idealBytes, double flops,
                         const EmulatedCounters &counters, const GpuSpec &gpu,
                         const CompiledKernel &compiled = {});

/// A cuBLASLt GEMM, from its shape alone: its roofline bound at the
/// efficiency measured for cuBLASLt (KernelModel.cpp says where from).
ModelledTime modelGemm(double boundSeconds);

} // namespace mlir::mpc

#endif // MPC_COMPILER_REPORT_KERNELMODEL_H
