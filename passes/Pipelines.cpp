//===- Pipelines.cpp - the mpc pass pipelines ---------------------*- C++ -*-===//
//
// This file implements the training pipeline that `mpc compile` runs and
// registers it as `mpc-train-pipeline` for mpc-opt.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialect/MpcOps.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::mpc;

/// Canonicalize, without CastOp's folds when they are off.
static std::unique_ptr<Pass>
createCanonicalizer(const PipelineOptions &options) {
  if (options.foldCasts)
    return createCanonicalizerPass();
  return createCanonicalizerPass(GreedyRewriteConfig(),
                                 /*disabledPatterns=*/{kFoldCastsLabel.str()});
}

void mlir::mpc::buildForwardPipeline(OpPassManager &pm, AmpLevel level,
                                     HalfType half,
                                     const PipelineOptions &options) {
  // Before precision is assigned: mpc.attention has its own rule (half
  // operands, f32 statistics), not the written-out ops'.
  if (options.recognizeAttention)
    pm.addPass(createMpcRecognizeAttentionPass());
  MpcAssignPrecisionPassOptions precision;
  precision.level = level;
  precision.half = half;
  precision.masterWeights = options.masterWeights;
  pm.addPass(createMpcAssignPrecisionPass(precision));
  // The lint runs before anything folds a cast of a constant into the
  // rounded constant, which would hide the value the user wrote.
  MpcCheckNumericsPassOptions numerics;
  numerics.werror = options.werrorNumerics;
  numerics.staticLossScale = options.staticLossScale;
  numerics.optimizerEps = options.optimizerEps;
  pm.addPass(createMpcCheckNumericsPass(numerics));
  if (options.foldCasts)
    pm.addPass(createMpcFoldCastsPass());
  pm.addPass(createCanonicalizer(options));
  pm.addPass(createCSEPass());
}

void mlir::mpc::buildTrainingPipeline(OpPassManager &pm,
                                      const PipelineOptions &options) {
  pm.addPass(createMpcAutodiffPass());
  // Directly after autodiff, which marks the seed it replaces.
  pm.addPass(createMpcInsertLossScalingPass(options.lossScaling));
  pm.addPass(createMpcFuseOptimizerPass(options.optimizer));
  // Fold the reshapes and casts autodiff leaves behind, and share values it
  // computed twice.
  pm.addPass(createCanonicalizer(options));
  pm.addPass(createCSEPass());
  pm.addPass(createMpcSaveBatchNormStatisticsPass());
  pm.addPass(createMpcSaveMaxPoolIndicesPass());
  // After CSE: a layer's forward GEMM and its gradient's read one weight
  // and one input, which then are quantized once.
  if (options.fp8.gemms != Fp8Gemms::None)
    pm.addPass(createMpcAssignFp8Pass(options.fp8));
  // Last: CSE would merge a recomputation with the value it repeats.
  if (!options.recompute.ops.empty())
    pm.addPass(createMpcRecomputePass(options.recompute));
}

void mlir::mpc::registerMpcPipelines() {
  PassPipelineRegistration<>(
      "mpc-train-pipeline",
      "The passes `mpc compile` runs at O0: derive the training step, then "
      "clean up",
      [](OpPassManager &pm) {
        buildForwardPipeline(pm, AmpLevel::O0, HalfType::F16);
        buildTrainingPipeline(pm);
      });
}
