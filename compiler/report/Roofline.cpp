//===- Roofline.cpp - peak figures of GPUs for `--report-gpu` -----*- C++
//-*-===//
//
// This file holds the GPU table of `mpc compile --report` and the roofline
// bound of a kernel. Figures are NVIDIA's datasheet peaks, dense (the
// datasheets also print twice the tensor figure "with sparsity", which
// dense training never reaches).
//
//===----------------------------------------------------------------------===//

#include "compiler/report/Roofline.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::mpc;

namespace {

constexpr GpuSpec gpus[] = {
    // NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column): FP16/BF16
    // Tensor Core 1,979 TFLOPS with sparsity, i.e. 989.5 dense; FP8 3,958
    // sparse, 1,979 dense; FP32 67 TFLOPS; GPU memory bandwidth 3.35 TB/s.
    // 132 SMs, boost 1,980 MHz (NVIDIA H100 whitepaper).
    {"h100", "H100 SXM5 80GB", 989.5, 1979.0, 67.0, 3350.0, 90, 132, 1.98,
     5500.0},
    // NVIDIA H200 Tensor Core GPU datasheet (H200 SXM): same compute as
    // H100 SXM (1,979 TFLOPS sparse FP16/BF16, 3,958 FP8, FP32 67 TFLOPS);
    // 4.8 TB/s.
    {"h200", "H200 SXM 141GB", 989.5, 1979.0, 67.0, 4800.0, 90, 132, 1.98,
     5500.0},
    // NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM): FP16/BF16
    // Tensor Core 312 TFLOPS (624 sparse), no FP8; FP32 19.5 TFLOPS;
    // 2,039 GB/s. 108 SMs, boost 1,410 MHz (NVIDIA A100 whitepaper).
    {"a100", "A100 SXM4 80GB", 312.0, 0.0, 19.5, 2039.0, 80, 108, 1.41, 4000.0},
    // NVIDIA L4 Tensor Core GPU datasheet: FP16/BF16 Tensor Core 242.5
    // TFLOPS with sparsity (121 dense), FP8 485 (242.5 dense); FP32 30.3
    // TFLOPS; 300 GB/s. 58 SMs, boost 2,040 MHz.
    {"l4", "L4 24GB", 121.0, 242.5, 30.3, 300.0, 89, 58, 2.04, 1500.0},
};
// L2 bandwidths are not on the datasheets: they are assumptions of the
// modelled time (KernelModel.cpp), not measured here. They matter only for
// kernels whose blocks fetch more distinct sectors than DRAM must deliver.

} // namespace

ArrayRef<GpuSpec> mlir::mpc::knownGpus() { return gpus; }

const GpuSpec *mlir::mpc::findGpu(StringRef name) {
  for (const GpuSpec &gpu : gpus)
    if (name == gpu.name)
      return &gpu;
  return nullptr;
}

KernelBound mlir::mpc::rooflineBound(const KernelRecord &kernel,
                                     const GpuSpec &gpu) {
  bool tensorCores = kernel.kind == KernelKind::Gemm ||
                     kernel.kind == KernelKind::TensorCoreKernel;
  double tflops =
      tensorCores && kernel.halfInputs ? gpu.halfTensorTflops : gpu.fp32Tflops;
  if (tensorCores && kernel.fp8Inputs && gpu.fp8TensorTflops > 0)
    tflops = gpu.fp8TensorTflops;
  double compute = double(kernel.cost.flops) / (tflops * 1e12);
  double memory = double(kernel.cost.bytes()) / (gpu.bandwidthGBs * 1e9);
  return {std::max(compute, memory), memory >= compute};
}

std::optional<std::string> mlir::mpc::parseReportGpu(const std::string &text,
                                                     std::string &gpu) {
  if (findGpu(llvm::StringRef(text).lower())) {
    gpu = llvm::StringRef(text).lower();
    return std::nullopt;
  }
  SmallVector<StringRef> names;
  for (const GpuSpec &known : knownGpus())
    names.push_back(known.name);
  return "unknown --report-gpu='" + text + "': expected one of " +
         llvm::join(names, ", ");
}
