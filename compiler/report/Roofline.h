//===- Roofline.h - peak figures of GPUs for `--report-gpu` -------*- C++
//-*-===//
//
// This file declares the small table of GPUs that `mpc compile --report`
// bounds a training step against, and the roofline bound of one kernel:
// max(FLOPs / peak throughput, bytes / memory bandwidth).
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_REPORT_ROOFLINE_H
#define MPC_COMPILER_REPORT_ROOFLINE_H

#include "compiler/codegen/KernelCost.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace mlir::mpc {

/// Datasheet peaks of one GPU (dense, no structured sparsity).
struct GpuSpec {
  const char *name;        ///< as --report-gpu spells it
  const char *description; ///< the exact part the figures are for
  double halfTensorTflops; ///< f16/bf16 tensor cores, fp32 accumulation
  double fp8TensorTflops;  ///< e4m3/e5m2 tensor cores; 0 without them
  double fp32Tflops;       ///< fp32 on the CUDA cores (no TF32)
  double bandwidthGBs;     ///< memory bandwidth, 10^9 bytes per second
  // What the modelled time needs besides (KernelModel.h).
  int smVersion;         ///< compute capability, as --arch spells it (90)
  int sms;               ///< streaming multiprocessors
  double boostClockGHz;  ///< the SMs' boost clock
  double l2BandwidthGBs; ///< L2 to SMs, 10^9 bytes per second (assumed)
};

/// Every GPU the tool knows, in the order its messages list them.
llvm::ArrayRef<GpuSpec> knownGpus();

/// The GPU named `name` (as --report-gpu spells it), or null.
const GpuSpec *findGpu(llvm::StringRef name);

/// Parses `--report-gpu=<name>` against the tool's GPU table; returns an
/// error message naming the known GPUs, or nothing on success.
std::optional<std::string> parseReportGpu(const std::string &text,
                                          std::string &gpu);

/// The roofline time bound of one kernel on `gpu`: GEMMs with half inputs
/// run at the tensor-core peak, FP8 GEMMs at the FP8 peak (the half one on
/// a GPU without FP8 tensor cores), everything else at the fp32 peak.
struct KernelBound {
  double seconds = 0;
  bool memoryBound = false;
};
KernelBound rooflineBound(const KernelRecord &kernel, const GpuSpec &gpu);

} // namespace mlir::mpc

#endif // MPC_COMPILER_REPORT_ROOFLINE_H
