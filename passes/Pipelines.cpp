//===- Pipelines.cpp - the mpc pass pipelines ---------------------*- C++ -*-===//
//
// This file implements the training pipeline that `mpc compile` runs and
// registers it as `mpc-train-pipeline` for mpc-opt.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void mlir::mpc::buildForwardPipeline(OpPassManager &pm, AmpLevel level,
                                     HalfType half) {
  MpcAssignPrecisionPassOptions precision;
  precision.level = level;
  precision.half = half;
  pm.addPass(createMpcAssignPrecisionPass(precision));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void mlir::mpc::buildTrainingPipeline(OpPassManager &pm) {
  pm.addPass(createMpcAutodiffPass());
  // Fold the reshapes and casts autodiff leaves behind, and share values it
  // computed twice.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
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
