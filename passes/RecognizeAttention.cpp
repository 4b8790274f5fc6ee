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
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
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

/// What a constant added to the scores hides, when it is 0 where a key is
/// visible and -inf where it is not.
enum class AdditiveMask { None, Causal, Other };

/// Reads an additive `[.., T, S]` constant mask (its leading dims 1):
/// all zeros is None, -inf exactly above the diagonal Causal, else Other.
AdditiveMask additiveMask(Value value, ArrayRef<int64_t> scoreShape) {
  DenseElementsAttr dense;
  if (!matchPattern(value, m_Constant(&dense)) ||
      !isa<FloatType>(dense.getElementType()))
    return AdditiveMask::Other;
  auto type = cast<RankedTensorType>(dense.getType());
  int64_t rows = scoreShape[scoreShape.size() - 2];
  int64_t columns = scoreShape.back();
  if (type.getRank() < 2 ||
      type.getShape().take_back(2) != ArrayRef<int64_t>{rows, columns} ||
      type.getNumElements() != rows * columns)
    return AdditiveMask::Other;
  bool zeros = true, causal = rows == columns;
  int64_t index = 0;
  for (APFloat element : dense.getValues<APFloat>()) {
    int64_t row = index / columns, column = index % columns;
    ++index;
    bool hidden = element.isInfinity() && element.isNegative();
    if (!hidden && !element.isZero())
      return AdditiveMask::Other;
    zeros &= !hidden;
    causal &= hidden == (column > row);
  }
  if (zeros)
    return AdditiveMask::None;
  return causal ? AdditiveMask::Causal : AdditiveMask::Other;
}

/// The positive factor a query is scaled by before the scores: `q / c` or
/// `q * c` of a scalar constant, or `mpc.scale`; nullopt when it is not.
std::optional<double> queryFactor(Operation *op) {
  if (auto scale = dyn_cast<ScaleOp>(op))
    return scale.getFactor().convertToDouble();
  if (!isa<DivOp, MulOp>(op))
    return std::nullopt;
  DenseElementsAttr dense;
  if (!matchPattern(op->getOperand(1), m_Constant(&dense)) ||
      !dense.isSplat() || !isa<FloatType>(dense.getElementType()) ||
      cast<RankedTensorType>(op->getOperand(1).getType()).getNumElements() !=
          1 ||
      op->getOperand(0).getType() != op->getResult(0).getType())
    return std::nullopt;
  double constant = dense.getSplatValue<APFloat>().convertToDouble();
  return isa<DivOp>(op) ? 1.0 / constant : constant;
}

/// What one match found, before anything is rewritten.
struct Match {
  BatchMatmulOp scores, product;
  SmallVector<ScaleOp> scales; // of the scores, nearest the softmax first
  Operation *queryScale = nullptr;
  double scale = 1.0;
  WhereOp where;
  AddOp additive; // + a constant 0/-inf mask
  SoftmaxOp softmax;
  Value query, key, value, mask;
  /// The key's transpose, when the scores read kᵀ written out rather than
  /// `transpose_rhs`: the key is its input, under `keyPermutation`.
  TransposeOp keyTranspose;
  SmallVector<int64_t> keyPermutation;
  bool causal = false;
  /// [B*H, T, D] operands (as nn.MultiheadAttention exports them): the
  /// attention runs on them reshaped to [1, B*H, T, D].
  bool merged = false;
  AttentionLayout layout = AttentionLayout::BHTD;
  TransposeOp outputTranspose;
};

/// Matches the pattern ending in the softmax `softmax`.
std::optional<Match> matchAttention(SoftmaxOp softmax) {
  Match match;
  match.softmax = softmax;
  auto type = cast<RankedTensorType>(softmax.getType());
  int64_t rank = type.getRank();
  if ((rank != 4 && rank != 3) ||
      static_cast<int64_t>(softmax.getDim()) != rank - 1 ||
      !softmax.getResult().hasOneUse())
    return std::nullopt;
  match.merged = rank == 3;
  match.product = dyn_cast<BatchMatmulOp>(*softmax->user_begin());
  if (!match.product || match.product.getLhs() != softmax.getResult() ||
      match.product.getTransposeLhs() || match.product.getTransposeRhs())
    return std::nullopt;

  ArrayRef<int64_t> scoreShape = type.getShape();
  Value scores = softmax.getInput();
  if ((match.where = soleProducer<WhereOp>(scores))) {
    if (!isNegativeInfinity(match.where.getOnFalse()))
      return std::nullopt;
    Value mask = match.where.getCondition();
    auto maskType = cast<RankedTensorType>(mask.getType());
    if (maskType.getShape() != scoreShape.take_back(2))
      return std::nullopt;
    if (mask.getDefiningOp<CausalMaskOp>())
      match.causal = true;
    else
      match.mask = mask;
    scores = match.where.getOnTrue();
  } else if ((match.additive = soleProducer<AddOp>(scores))) {
    // scores + mask, the mask a constant of zeros and -inf (what
    // nn.MultiheadAttention adds for attn_mask).
    if (match.additive.getType() != match.additive.getLhs().getType())
      return std::nullopt;
    switch (additiveMask(match.additive.getRhs(), scoreShape)) {
    case AdditiveMask::Other:
      return std::nullopt;
    case AdditiveMask::Causal:
      match.causal = true;
      break;
    case AdditiveMask::None:
      break;
    }
    scores = match.additive.getLhs();
  }
  while (ScaleOp scale = soleProducer<ScaleOp>(scores)) {
    match.scales.push_back(scale);
    match.scale *= scale.getFactor().convertToDouble();
    scores = scale.getInput();
  }
  match.scores = soleProducer<BatchMatmulOp>(scores);
  if (!match.scores || match.scores.getTransposeLhs())
    return std::nullopt;

  match.query = match.scores.getLhs();
  if (Operation *producer = match.query.getDefiningOp();
      producer && match.query.hasOneUse()) {
    if (std::optional<double> factor = queryFactor(producer)) {
      match.queryScale = producer;
      match.scale *= *factor;
      match.query = producer->getOperand(0);
    }
  }
  match.key = match.scores.getRhs();
  if (!match.scores.getTransposeRhs()) {
    // kᵀ written out: a transpose whose last two dims, swapped back, give
    // the key.
    match.keyTranspose = match.key.getDefiningOp<TransposeOp>();
    if (!match.keyTranspose)
      return std::nullopt;
    match.keyPermutation.assign(match.keyTranspose.getPermutation().begin(),
                                match.keyTranspose.getPermutation().end());
    std::swap(match.keyPermutation[rank - 1], match.keyPermutation[rank - 2]);
    match.key = match.keyTranspose.getInput();
  }
  match.value = match.product.getRhs();
  Type element = cast<RankedTensorType>(match.query.getType()).getElementType();
  for (Value operand : {match.key, match.value})
    if (cast<RankedTensorType>(operand.getType()).getElementType() != element)
      return std::nullopt;
  if (!isPositiveAsF32(match.scale))
    return std::nullopt;
  if (match.merged || match.keyTranspose)
    return match;

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

/// `value` [N, T, D] as [1, N, T, D].
Value withUnitBatch(OpBuilder &builder, Location loc, Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape{1};
  llvm::append_range(shape, type.getShape());
  return ReshapeOp::create(builder, loc, type.clone(shape), value);
}

void rewrite(Match match) {
  OpBuilder builder(match.product);
  Location loc = FusedLoc::get(
      builder.getContext(),
      {match.scores.getLoc(), match.softmax.getLoc(), match.product.getLoc()});
  Value query = match.query, key = match.key, value = match.value;
  if (match.keyTranspose) {
    bool identity =
        llvm::equal(match.keyPermutation,
                    llvm::seq<int64_t>(0, match.keyPermutation.size()));
    if (!identity)
      key = TransposeOp::create(
          builder, match.keyTranspose.getLoc(), key,
          builder.getDenseI64ArrayAttr(match.keyPermutation));
  }
  if (match.merged) {
    query = withUnitBatch(builder, loc, query);
    key = withUnitBatch(builder, loc, key);
    value = withUnitBatch(builder, loc, value);
  }
  auto attention = AttentionOp::create(
      builder, loc, query, key, value, match.mask,
      builder.getF64FloatAttr(match.scale),
      match.causal ? builder.getUnitAttr() : UnitAttr(),
      AttentionLayoutAttr::get(builder.getContext(), match.layout));
  Value result = attention.getResult();
  if (match.merged)
    result = ReshapeOp::create(builder, loc, match.product.getType(), result);
  Operation *replaced = match.outputTranspose
                            ? match.outputTranspose.getOperation()
                            : match.product.getOperation();
  replaced->getResult(0).replaceAllUsesWith(result);
  // Erase the chain from its end; then what only it read (the head
  // transposes, the mask, the -inf fill) if nothing else does.
  SmallVector<Operation *> chain{match.outputTranspose, match.product,
                                 match.softmax, match.where, match.additive};
  llvm::append_range(chain, llvm::map_range(match.scales, [](ScaleOp op) {
                       return op.getOperation();
                     }));
  chain.append({match.scores, match.queryScale});
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
