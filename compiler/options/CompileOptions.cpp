//===- CompileOptions.cpp - what `mpc compile` was asked to do ----*- C++ -*-===//
//
// This file implements parsing of the structured option values and the list
// of options that later stages of the compiler will honour.
//
//===----------------------------------------------------------------------===//

#include "compiler/options/CompileOptions.h"

#include "dialect/MpcDialect.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cmath>

namespace mlir::mpc {

std::optional<std::string> parseLossScale(const std::string &text,
                                          LossScale &out) {
  llvm::StringRef value(text);
  if (value == "dynamic") {
    out.mode = LossScaleMode::Dynamic;
    return std::nullopt;
  }
  if (value == "none") {
    out.mode = LossScaleMode::None;
    return std::nullopt;
  }
  double scale = 0;
  // The scale multiplies the f32 loss: it must be a positive f32.
  if (value.consume_front("static:") && !value.getAsDouble(scale) &&
      isPositiveAsF32(scale)) {
    out.mode = LossScaleMode::Static;
    out.staticScale = scale;
    return std::nullopt;
  }
  return "invalid --loss-scale='" + text +
         "': expected dynamic, none or static:<scale>, a positive number "
         "finite in f32 (e.g. static:512)";
}

std::optional<std::string> parseArch(const std::string &text, int &smVersion) {
  llvm::StringRef value(text);
  unsigned version = 0;
  if (!value.consume_front("sm_") || value.getAsInteger(10, version))
    return "invalid --arch='" + text + "': expected sm_<version>, e.g. sm_80";
  // NVRTC in CUDA 13 rejects anything older than Turing.
  if (version < 75)
    return "invalid --arch='" + text +
           "': mpc targets sm_75 (Turing) and newer";
  smVersion = static_cast<int>(version);
  return std::nullopt;
}

std::optional<std::string> findUnimplemented(const CompileOptions &options) {
  if (options.target == Target::Cuda && options.profileEmulated)
    return std::string("--profile-emulated is for the cpu target (which it "
                       "makes emulate blocks)");
#if !defined(__x86_64__)
  if (options.hostCpu == HostCpu::X86_64_V3 ||
      options.hostCpu == HostCpu::X86_64_V4)
    return std::string("--cpu=x86-64-v3 and x86-64-v4 are for x86-64 hosts; "
                       "use --cpu=native or generic");
#endif
  if (options.target != Target::Cuda && !options.cudnn)
    return std::string("--no-cudnn is for the cuda target: the cpu target's "
                       "convolutions are always im2col and GEMMs");
  if (options.target == Target::Cuda && options.emulateBlocks)
    return std::string("--emulate-blocks is for the cpu target: the cuda "
                       "target's host builds of its kernels always emulate");
  return std::nullopt;
}

PipelineOptions makePipelineOptions(const CompileOptions &options) {
  PipelineOptions pipeline;
  pipeline.werrorNumerics = options.werrorNumerics;
  pipeline.foldCasts = options.foldCasts;
  pipeline.recompute.ops.assign(options.recompute.begin(),
                                options.recompute.end());

  MpcInsertLossScalingPassOptions &scaling = pipeline.lossScaling;
  if (options.lossScale.mode)
    scaling.mode = stringifyLossScaleMode(*options.lossScale.mode).str();
  bool isStatic = options.lossScale.mode == LossScaleMode::Static;
  scaling.initScale =
      isStatic ? options.lossScale.staticScale : options.initScale;
  scaling.growthFactor = options.growthFactor;
  scaling.backoffFactor = options.backoffFactor;
  scaling.growthInterval = options.growthInterval;
  scaling.hysteresis = options.hysteresis;
  scaling.minScale = options.minScale;
  if (isStatic)
    pipeline.staticLossScale = options.lossScale.staticScale;

  pipeline.recognizeAttention = options.fuse;
  MpcFuseOptimizerPassOptions &optimizer = pipeline.optimizer;
  optimizer.kind = options.optimizer;
  optimizer.lr = options.learningRate;
  optimizer.momentum = options.momentum;
  optimizer.nesterov = options.nesterov;
  optimizer.weightDecay = options.weightDecay;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  optimizer.clipNorm = options.clipNorm;
  optimizer.accumulate = options.accumulate;
  optimizer.schedule = options.schedule;
  optimizer.warmupSteps = options.warmupSteps;
  optimizer.decaySteps = options.decaySteps;
  optimizer.minLr = options.minLr;
  optimizer.skipNonfinite = options.skipNonfiniteUpdates;
  optimizer.dataParallel = options.dataParallel;
  optimizer.shardOptimizer = options.shardOptimizer;
  optimizer.optimizerState = options.optimizerState;
  optimizer.masterWeights = options.masterWeights;
  pipeline.masterWeights = options.masterWeights;
  pipeline.fp8.gemms = options.fp8;
  pipeline.fp8.unscaled = options.fp8Scaling == Fp8Scaling::None;
  if (options.fp8Scaling == Fp8Scaling::Delayed) {
    pipeline.fp8.history = options.fp8History;
    pipeline.fp8.margin = options.fp8Margin;
  }
  pipeline.fp8.halfTflops = options.fp8Gpu.halfTflops;
  pipeline.fp8.fp8Tflops = options.fp8Gpu.fp8Tflops;
  pipeline.fp8.bandwidthGbs = options.fp8Gpu.bandwidthGbs;
  if (options.optimizer != OptimizerKind::Sgd)
    pipeline.optimizerEps = options.eps;
  return pipeline;
}

} // namespace mlir::mpc
