//===- SaveBatchNormStatistics.cpp - statistics for the backward ---------===//
//
// This file implements mpc-save-batch-norm-statistics: each mpc.batch_norm
// of the training step that a gradient differentiates returns the mean and
// inverse standard deviation it normalised with, and the gradient reads
// them instead of computing them again from the input; a ReLU's gradient
// between them becomes the gradient's mask, computed from the input.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Dominance.h"
#include "llvm/ADT/STLExtras.h"

#define DEBUG_TYPE "mpc-save-batch-norm-statistics"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCSAVEBATCHNORMSTATISTICSPASS
#include "passes/Passes.h.inc"

namespace {

/// The forward op whose statistics `grad` recomputes: a batch norm of the
/// same input, gamma and eps that dominates it.
BatchNormOp forwardOf(BatchNormGradOp grad, DominanceInfo &dominance) {
  for (Operation *user : grad.getInput().getUsers()) {
    auto norm = dyn_cast<BatchNormOp>(user);
    if (norm && norm.getInput() == grad.getInput() &&
        norm.getGamma() == grad.getGamma() &&
        norm.getEps() == grad.getEps() && dominance.dominates(norm, grad))
      return norm;
  }
  return nullptr;
}

/// `norm` rebuilt with its `stats` result (itself if it has one).
BatchNormOp withStats(BatchNormOp norm) {
  if (norm.getStats())
    return norm;
  OpBuilder builder(norm);
  int64_t channels = norm.getGamma().getType().getDimSize(0);
  auto stats = RankedTensorType::get({2, channels}, builder.getF32Type());
  auto saving = BatchNormOp::create(
      builder, norm.getLoc(), norm.getResult().getType(), stats,
      norm.getInput(), norm.getGamma(), norm.getBeta(), norm.getRunningMean(),
      norm.getRunningVar(), norm.getMomentumAttr(), norm.getEpsAttr());
  saving->setDiscardableAttrs(norm->getDiscardableAttrDictionary());
  norm.getResult().replaceAllUsesWith(saving.getResult());
  norm.erase();
  return saving;
}

/// The ReLU gradient that `grad` reads, when it masks `norm`'s output (the
/// ReLU's output or its input, which mpc.relu_grad both accept) and
/// nothing else reads it.
ReluGradOp reluMaskOf(BatchNormGradOp grad, BatchNormOp norm) {
  auto mask = grad.getGrad().getDefiningOp<ReluGradOp>();
  if (!mask || !mask.getResult().hasOneUse())
    return nullptr;
  Value masked = mask.getInput();
  if (auto relu = masked.getDefiningOp<ReluOp>())
    masked = relu.getInput();
  return masked == norm.getResult() ? mask : nullptr;
}

struct MpcSaveBatchNormStatisticsPass
    : impl::MpcSaveBatchNormStatisticsPassBase<
          MpcSaveBatchNormStatisticsPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<BatchNormGradOp> grads;
    getOperation().walk([&](BatchNormGradOp grad) {
      if (!grad.getStats())
        grads.push_back(grad);
    });
    DominanceInfo &dominance = getAnalysis<DominanceInfo>();
    for (BatchNormGradOp grad : grads) {
      BatchNormOp norm = forwardOf(grad, dominance);
      if (!norm)
        continue;
      norm = withStats(norm);
      grad.getStatsMutable().assign(norm.getStats());
      ++numSaved;
      if (ReluGradOp mask = reluMaskOf(grad, norm)) {
        grad.getGradMutable().assign(mask.getGrad());
        grad.getReluBetaMutable().assign(norm.getBeta());
        mask.erase();
        ++numReluMasks;
      }
    }
  }
};

} // namespace
} // namespace mlir::mpc
