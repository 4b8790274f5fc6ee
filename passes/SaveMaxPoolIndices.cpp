//===- SaveMaxPoolIndices.cpp - argmax for the backward ------------------===//
//
// This file implements mpc-save-max-pool-indices: each mpc.max_pool2d of
// the training step that a gradient differentiates also returns each
// window's argmax (mpc.max_pool2d_with_indices), and the gradient routes
// through them (mpc.max_pool2d_indices_grad) instead of finding the maxima
// again in the input.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Dominance.h"

#define DEBUG_TYPE "mpc-save-max-pool-indices"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCSAVEMAXPOOLINDICESPASS
#include "passes/Passes.h.inc"

namespace {

/// The forward pooling that `grad` differentiates: a max pooling of the
/// same input and window, with `grad`'s output shape, that dominates it.
/// Either a plain one or one a previous gradient already gave indices.
Operation *forwardOf(MaxPool2dGradOp grad, DominanceInfo &dominance) {
  auto sameWindow = [&](auto pool) {
    return pool.getInput() == grad.getInput() &&
           pool.getKernel() == grad.getKernel() &&
           ArrayRef<int64_t>(pool.getStrideOrDefault()) == grad.getStride() &&
           ArrayRef<int64_t>(pool.getPaddingOrDefault()) ==
               grad.getPadding() &&
           pool.getResult().getType() == grad.getGrad().getType() &&
           dominance.dominates(pool.getOperation(), grad.getOperation());
  };
  for (Operation *user : grad.getInput().getUsers()) {
    if (auto pool = dyn_cast<MaxPool2dOp>(user); pool && sameWindow(pool))
      return pool;
    if (auto pool = dyn_cast<MaxPool2dWithIndicesOp>(user);
        pool && sameWindow(pool))
      return pool;
  }
  return nullptr;
}

/// Whether the window's position fits the byte, and the pooling is not a
/// global one (a warp reduces each plane; it reads the input once whether
/// or not the gradient finds the maximum again).
bool worthIndices(MaxPool2dOp pool) {
  ArrayRef<int64_t> kernel = pool.getKernel();
  auto in = pool.getInput().getType();
  auto out = pool.getResult().getType();
  bool global = out.getDimSize(2) == 1 && out.getDimSize(3) == 1 &&
                kernel[0] == in.getDimSize(2) &&
                kernel[1] == in.getDimSize(3) &&
                llvm::all_of(pool.getPaddingOrDefault(),
                             [](int64_t p) { return p == 0; });
  return kernel[0] * kernel[1] <= 127 && !global;
}

/// `pool` rebuilt with its indices.
MaxPool2dWithIndicesOp withIndices(MaxPool2dOp pool) {
  OpBuilder builder(pool);
  auto saving = MaxPool2dWithIndicesOp::create(
      builder, pool.getLoc(), pool.getInput(), pool.getKernelAttr(),
      pool.getStrideAttr(), pool.getPaddingAttr(), pool.getCeilModeAttr());
  saving->setDiscardableAttrs(pool->getDiscardableAttrDictionary());
  pool.getResult().replaceAllUsesWith(saving.getResult());
  pool.erase();
  return saving;
}

struct MpcSaveMaxPoolIndicesPass
    : impl::MpcSaveMaxPoolIndicesPassBase<MpcSaveMaxPoolIndicesPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<MaxPool2dGradOp> grads;
    getOperation().walk([&](MaxPool2dGradOp grad) { grads.push_back(grad); });
    DominanceInfo &dominance = getAnalysis<DominanceInfo>();
    for (MaxPool2dGradOp grad : grads) {
      Operation *forward = forwardOf(grad, dominance);
      if (!forward)
        continue;
      auto saving = dyn_cast<MaxPool2dWithIndicesOp>(forward);
      if (!saving) {
        auto pool = cast<MaxPool2dOp>(forward);
        if (!worthIndices(pool))
          continue;
        saving = withIndices(pool);
      }
      OpBuilder builder(grad);
      auto routed = MaxPool2dIndicesGradOp::create(
          builder, grad.getLoc(), grad.getResult().getType(), grad.getGrad(),
          saving.getIndices(), grad.getKernelAttr(), grad.getStrideAttr(),
          grad.getPaddingAttr());
      routed->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
      grad.getResult().replaceAllUsesWith(routed.getResult());
      grad.erase();
      ++numSaved;
    }
  }
};

} // namespace
} // namespace mlir::mpc
