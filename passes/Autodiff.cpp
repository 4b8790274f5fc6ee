//===- Autodiff.cpp - derive the training step --------------------*- C++ -*-===//
//
// This file implements mpc-autodiff: reverse-mode differentiation of a
// model's forward body into a training step that also returns the gradient
// of the loss with respect to every parameter.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "mpc-autodiff"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCAUTODIFFPASS
#include "passes/Passes.h.inc"

namespace {

struct MpcAutodiffPass : impl::MpcAutodiffPassBase<MpcAutodiffPass> {
  using Base::Base;
  void runOnOperation() override;
  LogicalResult differentiate(ModelOp model);
};

/// Values that depend on a parameter: only they can carry a gradient.
llvm::DenseSet<Value> findActive(ModelOp model) {
  llvm::DenseSet<Value> active(model.getParams().begin(),
                               model.getParams().end());
  for (Operation &op : model.getBody().front().without_terminator())
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return active.contains(v); }))
      active.insert(op.result_begin(), op.result_end());
  return active;
}

/// Values the loss depends on: only they need a gradient.
llvm::DenseSet<Value> findUseful(ModelOp model, Value loss) {
  llvm::DenseSet<Value> useful{loss};
  Block &body = model.getBody().front();
  for (Operation &op : llvm::reverse(body.without_terminator()))
    if (llvm::any_of(op.getResults(),
                     [&](Value v) { return useful.contains(v); }))
      useful.insert(op.operand_begin(), op.operand_end());
  return useful;
}

LogicalResult MpcAutodiffPass::differentiate(ModelOp model) {
  // Algorithm:
  // 1. Find the active values (depend on a parameter) and the useful ones
  //    (the loss depends on them); an op gets backward work only when its
  //    result is both, so unused branches cost nothing.
  // 2. Seed the loss's gradient with 1.
  // 3. Walk the body backwards; for each op with a gradient on its result,
  //    ask its DifferentiableOpInterface for the operand gradients it needs,
  //    summing gradients of values used more than once.
  // 4. Return each parameter's gradient (zero if the loss ignores it) in
  //    mpc.output's gradients group.
  OutputOp output = model.getOutputOp();
  if (!output.getGradients().empty())
    return output.emitError()
           << "model @" << model.getSymName()
           << " already returns gradients; mpc-autodiff runs once";
  Value loss = output.getLoss();
  llvm::DenseSet<Value> active = findActive(model);
  llvm::DenseSet<Value> useful = findUseful(model, loss);
  auto needsGradient = [&](Value v) {
    return active.contains(v) && useful.contains(v);
  };

  OpBuilder builder(output);
  llvm::DenseMap<Value, Value> gradients;
  auto accumulate = [&](Value value, Value gradient, Location loc) {
    auto [it, inserted] = gradients.try_emplace(value, gradient);
    if (!inserted)
      it->second = AddOp::create(builder, loc, it->second, gradient);
  };
  if (needsGradient(loss)) {
    auto lossType = cast<RankedTensorType>(loss.getType());
    Value seed = ConstantOp::create(
        builder, output.getLoc(),
        DenseElementsAttr::get(
            lossType, builder.getFloatAttr(lossType.getElementType(), 1.0)));
    seed.getDefiningOp()->setAttr(kGradientSeedAttr, builder.getUnitAttr());
    gradients[loss] = seed;
  }

  Block &body = model.getBody().front();
  size_t forwardSize = body.getOperations().size();
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    // Ops differentiate their first result; the others (attention's
    // logsumexp) are statistics that the loss must not depend on.
    if (op->getNumResults() == 0)
      continue;
    for (Value other : llvm::drop_begin(op->getResults()))
      if (needsGradient(other) && gradients.lookup(other))
        return op->emitError()
               << "'" << op->getName() << "' is differentiated through its "
               << "first result only, but the loss depends on result #"
               << cast<OpResult>(other).getResultNumber()
               << " through a parameter";
    if (!needsGradient(op->getResult(0)))
      continue;
    Value resultGradient = gradients.lookup(op->getResult(0));
    if (!resultGradient)
      continue;
    auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
    if (!differentiable)
      return op->emitError() << "'" << op->getName()
                             << "' is not differentiable, but the loss "
                                "depends on its result through a parameter";
    SmallVector<bool> needed;
    for (Value operand : op->getOperands())
      needed.push_back(needsGradient(operand));
    SmallVector<Value> operandGradients;
    if (failed(differentiable.buildVjp(builder, resultGradient, needed,
                                       operandGradients)))
      return failure();
    for (auto [operand, gradient, need] :
         llvm::zip(op->getOperands(), operandGradients, needed))
      if (need && gradient)
        accumulate(operand, gradient, op->getLoc());
  }

  SmallVector<Value> parameterGradients;
  for (BlockArgument param : model.getParams()) {
    Value gradient = gradients.lookup(param);
    if (!gradient) {
      auto type = cast<RankedTensorType>(param.getType());
      gradient = ConstantOp::create(
          builder, param.getLoc(),
          DenseElementsAttr::get(type,
                                 builder.getFloatAttr(type.getElementType(),
                                                      0.0)));
    }
    parameterGradients.push_back(gradient);
  }
  // The step returns the loss and the gradients only: extra outputs are
  // evaluation's (mpc_eval), and computing them every training step (the
  // f32 logits of a language model) would cost memory and bandwidth that
  // nothing reads.
  OutputOp::create(builder, output.getLoc(), output.getLoss(), ValueRange(),
                   parameterGradients, builder.getStrArrayAttr({}));
  output.erase();
  numBackwardOps += body.getOperations().size() - forwardSize;
  return success();
}

void MpcAutodiffPass::runOnOperation() {
  for (ModelOp model : getOperation().getOps<ModelOp>())
    if (failed(differentiate(model)))
      return signalPassFailure();
}

} // namespace
} // namespace mlir::mpc
