//===- InsertLossScaling.cpp - seed the backward with the scale -*- C++ -*-===//
//
// This file implements mpc-insert-loss-scaling: the backward seed that
// mpc-autodiff marks becomes mpc.loss_scale, and the scaler's configuration
// is recorded on the model for code generation and the runtime.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include <cmath>

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCINSERTLOSSSCALINGPASS
#include "passes/Passes.h.inc"

namespace {

/// True when the model stores any value in f16: its gradients can underflow
/// (and overflow), which is what loss scaling is for.
bool storesF16(ModelOp model) {
  auto isF16 = [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && tensor.getElementType().isF16();
  };
  bool found = llvm::any_of(model.getBody().getArgumentTypes(), isF16);
  model.walk([&](Operation *op) {
    found = found || llvm::any_of(op->getResultTypes(), isF16);
  });
  return found;
}

struct MpcInsertLossScalingPass
    : impl::MpcInsertLossScalingPassBase<MpcInsertLossScalingPass> {
  using Base::Base;

  /// The option error, or "" when the options are valid for `mode`.
  std::string checkOptions(LossScaleMode resolved) const {
    auto text = [](double value) { return formatDecimal(value); };
    if (resolved == LossScaleMode::None)
      return "";
    if (!isPositiveAsF32(initScale))
      return "init-scale must be finite in f32 and > 0, got " + text(initScale);
    if (resolved == LossScaleMode::Static)
      return "";
    if (!isFiniteAsF32(growthFactor) || !(growthFactor > 1))
      return "growth-factor must be finite in f32 and > 1, got " + text(growthFactor);
    if (!(backoffFactor > 0 && backoffFactor < 1))
      return "backoff-factor must be in (0, 1), got " + text(backoffFactor);
    if (growthInterval < 1 || growthInterval > INT32_MAX)
      return "growth-interval must be in [1, 2^31), got " +
             std::to_string(growthInterval);
    if (hysteresis < 1 || hysteresis > INT32_MAX)
      return "hysteresis must be >= 1 (1 is none), got " +
             std::to_string(hysteresis);
    if (!isFiniteAsF32(minScale) || minScale < 0 || minScale > initScale)
      return "min-scale must be in [0, init-scale " + text(initScale) +
             "], got " + text(minScale);
    return "";
  }

  LogicalResult scale(ModelOp model) {
    LossScaleMode resolved;
    if (mode == "auto")
      resolved = storesF16(model) ? LossScaleMode::Dynamic
                                  : LossScaleMode::None;
    else if (std::optional<LossScaleMode> parsed = symbolizeLossScaleMode(mode))
      resolved = *parsed;
    else
      return model.emitError() << "mpc-insert-loss-scaling: unknown mode '"
                               << mode
                               << "'; expected auto, dynamic, static or none";
    if (std::string error = checkOptions(resolved); !error.empty())
      return model.emitError() << "mpc-insert-loss-scaling: " << error;

    OutputOp output = model.getOutputOp();
    if (model.getNumParams() > 0 && output.getGradients().empty())
      return model.emitError()
             << "mpc-insert-loss-scaling runs after mpc-autodiff: model @"
             << model.getSymName() << " returns no gradients";
    SmallVector<ConstantOp> seeds;
    model.walk([&](ConstantOp constant) {
      if (constant->hasAttr(kGradientSeedAttr))
        seeds.push_back(constant);
    });
    bool gradientsDependOnLoss =
        llvm::any_of(output.getGradients(), [](Value gradient) {
          return !gradient.getDefiningOp<ConstantOp>();
        });
    if (seeds.empty() && gradientsDependOnLoss)
      return model.emitError()
             << "mpc-insert-loss-scaling found no backward seed in model @"
             << model.getSymName()
             << "; run it directly after mpc-autodiff, before anything "
                "folds the seed";
    if (seeds.size() > 1)
      return model.emitError() << "model @" << model.getSymName() << " has "
                               << seeds.size() << " backward seeds";

    // Without scaling the seed stays 1; it only loses its mark.
    for (ConstantOp seed : seeds) {
      if (resolved == LossScaleMode::None) {
        seed->removeAttr(kGradientSeedAttr);
        continue;
      }
      OpBuilder builder(seed);
      auto scale = LossScaleOp::create(builder, seed.getLoc(),
                                       seed.getResult().getType());
      seed.getResult().replaceAllUsesWith(scale.getResult());
      seed.erase();
    }

    bool isStatic = resolved == LossScaleMode::Static;
    model->setAttr(
        kLossScalingAttr,
        LossScalingAttr::get(
            model.getContext(), resolved,
            APFloat(resolved == LossScaleMode::None ? 1.0
                                                    : initScale.getValue()),
            APFloat(growthFactor.getValue()), APFloat(backoffFactor.getValue()),
            isStatic ? 0 : growthInterval, isStatic ? 0 : hysteresis,
            APFloat(isStatic ? 0.0 : minScale.getValue())));
    return success();
  }

  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(scale(model)))
        return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::mpc
