//===- FoldCasts.cpp - remove casts that change nothing -----------*- C++ -*-===//
//
// This file implements mpc-fold-casts: mpc.cast's value-preserving folds
// (CastOp's folder and canonicalization patterns, so that canonicalize and
// this pass agree), then one cast per (value, type).
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Dominance.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Rewrite/FrozenRewritePatternSet.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "mpc-fold-casts"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCFOLDCASTSPASS
#include "passes/Passes.h.inc"

namespace {

SmallVector<CastOp> collectCasts(ModuleOp module) {
  SmallVector<CastOp> casts;
  module.walk([&](CastOp cast) { casts.push_back(cast); });
  return casts;
}

struct MpcFoldCastsPass : impl::MpcFoldCastsPassBase<MpcFoldCastsPass> {
  using Base::Base;

  LogicalResult initialize(MLIRContext *context) override {
    RewritePatternSet set(context);
    CastOp::getCanonicalizationPatterns(set, context);
    patterns = FrozenRewritePatternSet(std::move(set));
    return success();
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // 1. Fold: only casts (and the ones the patterns create) are visited.
    //    The constants they read are visited too, so that one a fold leaves
    //    unused is erased.
    SmallVector<CastOp> casts = collectCasts(module);
    size_t before = casts.size();
    llvm::SetVector<Operation *> ops;
    for (CastOp cast : casts) {
      if (auto constant = cast.getInput().getDefiningOp<ConstantOp>())
        ops.insert(constant);
      ops.insert(cast);
    }
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
    // Leave constants where they are: moving them is canonicalize's business.
    config.enableConstantCSE(false);
    (void)applyOpPatternsGreedily(ops.getArrayRef(), patterns, config);
    casts = collectCasts(module);
    numFolded += before - casts.size();

    // 2. Merge: of the casts of one value to one type, each is replaced by
    //    an earlier one that dominates it.
    DominanceInfo &dominance = getAnalysis<DominanceInfo>();
    llvm::MapVector<std::pair<Value, Type>, SmallVector<CastOp>> groups;
    for (CastOp cast : casts)
      groups[{cast.getInput(), cast.getType()}].push_back(cast);
    IRRewriter rewriter(&getContext());
    for (auto &[key, group] : groups) {
      SmallVector<CastOp> kept;
      for (CastOp cast : group) {
        auto dominating = llvm::find_if(kept, [&](CastOp other) {
          return dominance.properlyDominates(other.getOperation(),
                                             cast.getOperation());
        });
        if (dominating == kept.end()) {
          kept.push_back(cast);
          continue;
        }
        rewriter.replaceOp(cast, dominating->getResult());
        ++numMerged;
      }
    }
  }

  FrozenRewritePatternSet patterns;
};

} // namespace
} // namespace mlir::mpc
