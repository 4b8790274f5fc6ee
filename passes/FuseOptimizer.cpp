//===- FuseOptimizer.cpp - choose the fused optimizer -----------*- C++ -*-===//
//
// This file implements mpc-fuse-optimizer: it checks the optimizer's
// hyper-parameters and the model's parameters, and records the optimizer as
// `mpc.optimizer` on the model. Code generation (compiler/codegen/EmitOptimizer.cpp)
// emits the fused update from it.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include <cmath>

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCFUSEOPTIMIZERPASS
#include "passes/Passes.h.inc"

namespace {

struct MpcFuseOptimizerPass
    : impl::MpcFuseOptimizerPassBase<MpcFuseOptimizerPass> {
  using Base::Base;

  /// The first hyper-parameter torch.optim (or the schedule) would reject,
  /// or "".
  std::string checkOptions() const {
    auto text = [](double value) { return formatDecimal(value); };
    auto nonNegative = [](double value) {
      return isFiniteAsF32(value) && value >= 0;
    };
    if (!nonNegative(lr))
      return "lr must be finite in f32 and >= 0, got " + text(lr);
    if (!nonNegative(momentum))
      return "momentum must be finite in f32 and >= 0, got " + text(momentum);
    if (!nonNegative(weightDecay))
      return "weight-decay must be finite in f32 and >= 0, got " + text(weightDecay);
    if (kind == OptimizerKind::Sgd && nesterov && momentum <= 0)
      return "nesterov needs a momentum > 0 (as torch.optim.SGD)";
    if (kind != OptimizerKind::Sgd && nesterov)
      return "nesterov is an option of sgd";
    if (!(beta1 >= 0 && beta1 < 1))
      return "beta1 must be in [0, 1), got " + text(beta1);
    if (!(beta2 >= 0 && beta2 < 1))
      return "beta2 must be in [0, 1), got " + text(beta2);
    if (!nonNegative(eps))
      return "eps must be finite in f32 and >= 0, got " + text(eps);
    if (!nonNegative(clipNorm))
      return "clip-norm must be finite in f32 and >= 0 (0: none), got " +
             text(clipNorm);
    if (accumulate < 1 || accumulate > INT32_MAX)
      return "accumulate must be in [1, 2^31), got " +
             std::to_string(accumulate);
    if (warmupSteps < 0 || decaySteps < 0)
      return "warmup-steps and decay-steps must be >= 0";
    if (schedule == LrSchedule::WarmupCosine && warmupSteps + decaySteps < 1)
      return "the warmup_cosine schedule needs warmup-steps or decay-steps";
    if (!nonNegative(minLr) || minLr > lr)
      return "min-lr must be in [0, lr " + text(lr) + "], got " + text(minLr);
    if (shardOptimizer && !dataParallel)
      return "shard-optimizer shards the state over the ranks of "
             "data-parallel";
    // The sum over ranks is of f32 gradients; bf16 parameters have bf16
    // gradients.
    if (dataParallel && masterWeights != MasterWeights::F32)
      return "data-parallel sums f32 gradients; master-weights=" +
             stringifyMasterWeights(masterWeights).str() +
             " has bf16 ones (not supported yet)";
    return "";
  }

  LogicalResult fuse(ModelOp model) {
    if (std::string error = checkOptions(); !error.empty())
      return model.emitError() << "mpc-fuse-optimizer: " << error;
    if (model.getNumParams() > 0 &&
        model.getOutputOp().getGradients().empty())
      return model.emitError()
             << "mpc-fuse-optimizer runs after mpc-autodiff: model @"
             << model.getSymName() << " returns no gradients";
    // The moments' storage: bf16 when asked; else f32 beside f32 (master)
    // weights, and at O3 the parameters' own half type (Apex's pure half).
    Type stateType;
    if (model.getNumParams() > 0) {
      Type param = cast<RankedTensorType>(model.getParams()[0].getType())
                       .getElementType();
      if (masterWeights != MasterWeights::F32 && !param.isBF16())
        return model.emitError()
               << "mpc-fuse-optimizer: master-weights="
               << stringifyMasterWeights(masterWeights)
               << " updates bf16 parameters, but they are " << param
               << " (mpc-assign-precision's master-weights stores them in "
                  "bf16)";
      if (optimizerState == OptimizerState::BF16)
        stateType = BFloat16Type::get(model.getContext());
      else if (masterWeights != MasterWeights::F32)
        stateType = Float32Type::get(model.getContext());
    }
    // One update runs over the flat parameter buffer, in one storage type.
    if (model.getNumParams() > 0) {
      BlockArgument first = model.getParams().front();
      Type element = cast<RankedTensorType>(first.getType()).getElementType();
      for (BlockArgument param : model.getParams())
        if (cast<RankedTensorType>(param.getType()).getElementType() !=
            element)
          return model.emitError()
                 << "mpc-fuse-optimizer: the fused update needs every "
                    "parameter in one storage type, but %"
                 << model.getArgName(first) << " is " << element << " and %"
                 << model.getArgName(param) << " is "
                 << cast<RankedTensorType>(param.getType()).getElementType();
    }
    model->setAttr(kOptimizerAttr,
                   OptimizerAttr::get(
                       model.getContext(), kind, APFloat(lr.getValue()),
                       APFloat(momentum.getValue()), nesterov,
                       APFloat(weightDecay.getValue()),
                       APFloat(beta1.getValue()), APFloat(beta2.getValue()),
                       APFloat(eps.getValue()), APFloat(clipNorm.getValue()),
                       accumulate, schedule, warmupSteps, decaySteps,
                       APFloat(minLr.getValue()), skipNonfinite, dataParallel,
                       shardOptimizer, stateType, masterWeights));
    return success();
  }

  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(fuse(model)))
        return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::mpc
