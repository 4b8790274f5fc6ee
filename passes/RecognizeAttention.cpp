//===- RecognizeAttention.cpp - written-out attention to mpc.attention ---===//
//
// This file implements mpc-recognize-attention (Passes.td says what it
// matches): models that wrote attention op by op get the fused kernels
// without being rewritten by hand.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#define DEBUG_TYPE "mpc-recognize-attention"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCRECOGNIZEATTENTIONPASS
#include "passes/Passes.h.inc"

namespace {

/// The op defining `value` when it is an `Op` whose result only `user`
/// reads, else null.
template <typename Op> Op soleProducer(Value value) {
  auto op = value.getDefiningOp<Op>();
  return op && value.hasOneUse() ? op : Op();
}

/// A transpose that swaps heads and sequence: [B, T, H, D] <-> [B, H, T, D].
bool isHeadTranspose(TransposeOp op) {
  return op && op.getPermutation() == ArrayRef<int64_t>{0, 2, 1, 3};
}

bool isNegativeInfinity(Value value) {
  DenseElementsAttr dense;
  if (!matchPattern(value, m_Constant(&dense)) || !dense.isSplat() ||
      !isa<FloatType>(dense.getElementType()))
    return false;
  APFloat element = dense.getSplatValue<APFloat>();
  return element.isInfinity() && element.isNegative();
}

/// What one match found, before anything is rewritten.
struct Match {
  BatchMatmulOp scores, product;
  ScaleOp scale;
  WhereOp where;
  SoftmaxOp softmax;
  Value query, key, value, mask;
  bool causal = false;
  AttentionLayout layout = AttentionLayout::BHTD;
  TransposeOp outputTranspose;
};

/// Matches the pattern ending in the softmax `softmax`.
std::optional<Match> matchAttention(SoftmaxOp softmax) {
  Match match;
  match.softmax = softmax;
  auto type = cast<RankedTensorType>(softmax.getType());
  if (type.getRank() != 4 || softmax.getDim() != 3 ||
      !softmax.getResult().hasOneUse())
    return std::nullopt;
  match.product = dyn_cast<BatchMatmulOp>(*softmax->user_begin());
  if (!match.product || match.product.getLhs() != softmax.getResult() ||
      match.product.getTransposeLhs() || match.product.getTransposeRhs())
    return std::nullopt;

  Value scores = softmax.getInput();
  if ((match.where = soleProducer<WhereOp>(scores))) {
    if (!isNegativeInfinity(match.where.getOnFalse()))
      return std::nullopt;
    Value mask = match.where.getCondition();
    auto maskType = cast<RankedTensorType>(mask.getType());
    ArrayRef<int64_t> scoreShape = type.getShape().take_back(2);
    if (maskType.getShape() != scoreShape)
      return std::nullopt;
    if (mask.getDefiningOp<CausalMaskOp>())
      match.causal = true;
    else
      match.mask = mask;
    scores = match.where.getOnTrue();
  }
  if ((match.scale = soleProducer<ScaleOp>(scores)))
    scores = match.scale.getInput();
  match.scores = soleProducer<BatchMatmulOp>(scores);
  if (!match.scores || match.scores.getTransposeLhs() ||
      !match.scores.getTransposeRhs())
    return std::nullopt;

  match.query = match.scores.getLhs();
  match.key = match.scores.getRhs();
  match.value = match.product.getRhs();
  Type element = cast<RankedTensorType>(match.query.getType()).getElementType();
  for (Value operand : {match.key, match.value})
    if (cast<RankedTensorType>(operand.getType()).getElementType() != element)
      return std::nullopt;
  if (match.scale &&
      !isPositiveAsF32(match.scale.getFactor().convertToDouble()))
    return std::nullopt;

  // bthd: read the [B, T, H, D] values under the head transposes, and write
  // the one the output is transposed back into.
  auto q = match.query.getDefiningOp<TransposeOp>();
  auto k = match.key.getDefiningOp<TransposeOp>();
  auto v = match.value.getDefiningOp<TransposeOp>();
  Value output = match.product.getResult();
  auto back = output.hasOneUse() ? dyn_cast<TransposeOp>(*output.user_begin())
                                 : TransposeOp();
  if (isHeadTranspose(q) && isHeadTranspose(k) && isHeadTranspose(v) &&
      isHeadTranspose(back)) {
    match.layout = AttentionLayout::BTHD;
    match.query = q.getInput();
    match.key = k.getInput();
    match.value = v.getInput();
    match.outputTranspose = back;
  }
  return match;
}

void rewrite(Match match) {
  OpBuilder builder(match.product);
  double scale = match.scale ? match.scale.getFactor().convertToDouble() : 1.0;
  Location loc = FusedLoc::get(
      builder.getContext(),
      {match.scores.getLoc(), match.softmax.getLoc(), match.product.getLoc()});
  auto attention = AttentionOp::create(
      builder, loc, match.query, match.key, match.value, match.mask,
      builder.getF64FloatAttr(scale),
      match.causal ? builder.getUnitAttr() : UnitAttr(),
      AttentionLayoutAttr::get(builder.getContext(), match.layout));
  Operation *replaced = match.outputTranspose
                            ? match.outputTranspose.getOperation()
                            : match.product.getOperation();
  replaced->getResult(0).replaceAllUsesWith(attention.getResult());
  // Erase the chain from its end; then what only it read (the head
  // transposes, the mask, the -inf fill) if nothing else does.
  SmallVector<Operation *> chain{match.outputTranspose, match.product,
                                 match.softmax,         match.where,
                                 match.scale,           match.scores};
  llvm::SmallPtrSet<Operation *, 8> erased;
  llvm::SetVector<Operation *> readers;
  for (Operation *op : chain) {
    if (!op)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *producer = operand.getDefiningOp())
        readers.insert(producer);
    erased.insert(op);
    op->erase();
  }
  for (Operation *op : readers)
    if (!erased.contains(op) && op->use_empty() && isOpTriviallyDead(op))
      op->erase();
}

struct MpcRecognizeAttentionPass
    : impl::MpcRecognizeAttentionPassBase<MpcRecognizeAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<SoftmaxOp> softmaxes;
    getOperation().walk([&](SoftmaxOp op) { softmaxes.push_back(op); });
    for (SoftmaxOp softmax : softmaxes) {
      std::optional<Match> match = matchAttention(softmax);
      if (!match)
        continue;
      rewrite(*match);
      ++numRecognized;
    }
  }
};

} // namespace
} // namespace mlir::mpc
