//===- Recompute.cpp - recompute activations in the backward pass --------===//
//
// This file implements mpc-recompute: selective activation recomputation
// (Megatron-LM's selective recompute, llm.c's `-r 1` for GELU). A forward
// op named in `ops` whose result the backward pass reads is computed again
// just before its first backward reader, so that the forward result dies
// as soon as the forward pass is done with it.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"

#define DEBUG_TYPE "mpc-recompute"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCRECOMPUTEPASS
#include "passes/Passes.h.inc"

namespace {

struct MpcRecomputePass : impl::MpcRecomputePassBase<MpcRecomputePass> {
  using Base::Base;

  void runOnOperation() override {
    llvm::DenseSet<StringRef> names;
    for (const std::string &name : ops)
      names.insert(name);
    for (ModelOp model : getOperation().getOps<ModelOp>()) {
      if (model.getOutputOp().getGradients().empty())
        continue; // not a training step
      llvm::DenseSet<Operation *> forward = findForwardOps(model);
      Block &body = model.getBody().front();
      llvm::DenseMap<Operation *, int64_t> position;
      for (auto [index, op] : llvm::enumerate(body.without_terminator()))
        position[&op] = index;
      SmallVector<Operation *> candidates;
      for (Operation &op : body.without_terminator())
        if (forward.contains(&op) && op.getNumResults() == 1 &&
            isElementwise(&op) && names.contains(op.getName().stripDialect()))
          candidates.push_back(&op);
      for (Operation *op : candidates) {
        SmallVector<OpOperand *> backwardUses;
        for (OpOperand &use : op->getResult(0).getUses())
          if (!forward.contains(use.getOwner()) &&
              !isa<OutputOp>(use.getOwner()))
            backwardUses.push_back(&use);
        if (backwardUses.empty())
          continue;
        Operation *first = backwardUses.front()->getOwner();
        for (OpOperand *use : backwardUses)
          if (position.lookup(use->getOwner()) < position.lookup(first))
            first = use->getOwner();
        // Only where nothing lives longer for it: every operand is read at
        // or after the recomputation anyway (a GELU's input, which its
        // gradient reads).
        bool operandsLive = llvm::all_of(op->getOperands(), [&](Value v) {
          return llvm::any_of(v.getUsers(), [&](Operation *user) {
            auto it = position.find(user);
            return it == position.end() || it->second >= position.lookup(first);
          });
        });
        if (!operandsLive)
          continue;
        OpBuilder builder(first);
        Operation *copy = builder.clone(*op);
        for (OpOperand *use : backwardUses)
          use->set(copy->getResult(0));
        ++numRecomputed;
      }
    }
  }
};

} // namespace
} // namespace mlir::mpc
