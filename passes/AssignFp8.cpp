//===- AssignFp8.cpp - the training step's GEMMs on FP8 operands --*- C++
//-*-===//
//
// This file implements mpc-assign-fp8: each eligible linear and matmul of
// the training step becomes a scaled_matmul of quantized operands (e4m3
// for what the forward pass computes, e5m2 for gradients), each tensor
// quantized once however many GEMMs read it.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#define DEBUG_TYPE "mpc-assign-fp8"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCASSIGNFP8PASS
#include "passes/Passes.h.inc"

namespace {

/// cuBLASLt's FP8 matmuls want the contracted dim and the output's leading
/// dims to be multiples of 16 bytes, 16 FP8 elements.
constexpr int64_t kFp8Alignment = 16;

/// Whether the loss reads `value`, directly or through reshapes: the
/// classifier's logits.
bool readByLoss(Value value) {
  for (Operation *user : value.getUsers()) {
    if (isa<CrossEntropyOp, CrossEntropyGradOp, MseLossOp>(user))
      return true;
    if (auto reshape = dyn_cast<ReshapeOp>(user);
        reshape && readByLoss(reshape.getResult()))
      return true;
  }
  return false;
}

/// Whether `value` is the loss's gradient (through reshapes): the
/// classifier's backward GEMMs read it.
bool isLossGradient(Value value) {
  return throughReshapes(value).getDefiningOp<CrossEntropyGradOp>() != nullptr;
}

class Fp8Assigner {
public:
  Fp8Assigner(ModelOp model, bool unscaled, llvm::Statistic &numGemms,
              llvm::Statistic &numQuantized)
      : model(model), unscaled(unscaled), forward(findForwardOps(model)),
        builder(model), numGemms(numGemms), numQuantized(numQuantized) {}

  void run();

private:
  /// e4m3 for what the forward pass computes (activations, weights), e5m2
  /// for gradients.
  Type formatOf(Value operand);
  /// `operand` in `format` with its inverse scale: the root it reshapes,
  /// quantized once (after its definition, so every reader shares it), and
  /// reshaped to `shape`.
  std::pair<Value, Value> quantized(Value operand, ArrayRef<int64_t> shape,
                                    Type format, Location loc);
  /// `matrix` (a quantized operand) transposed, copied once.
  Value transposed(Value matrix, Location loc);
  /// Whether op(lhs) · op(rhs) of these sizes may run in FP8.
  static bool aligned(int64_t k, int64_t n, int64_t lhsColumns,
                      int64_t rhsColumns);
  LogicalResult rewriteLinear(LinearOp linear);
  LogicalResult rewriteMatmul(MatmulOp matmul);
  /// The scaled GEMM replacing `op`: op(lhs) · op(rhs) (+ bias), lhs and
  /// rhs read as matrices of `lhsShape` and `rhsShape` (a linear's input
  /// flattened), the product of `resultType`; where the result's only
  /// reader widens it to f32, the GEMM writes f32 and replaces the cast
  /// instead.
  void replaceGemm(Operation *op, Value lhs, ArrayRef<int64_t> lhsShape,
                   Value rhs, Value bias, bool transposeLhs, bool transposeRhs,
                   RankedTensorType resultType);

  ModelOp model;
  bool unscaled;
  llvm::DenseSet<Operation *> forward;
  OpBuilder builder;
  llvm::Statistic &numGemms;
  llvm::Statistic &numQuantized;
  llvm::DenseMap<std::pair<Value, Type>, QuantizeOp> quantizations;
  /// Transposed copies of quantized matrices, one each.
  llvm::DenseMap<Value, Value> transposes;
};

Type Fp8Assigner::formatOf(Value operand) {
  Value root = throughReshapes(operand);
  Operation *def = root.getDefiningOp();
  MLIRContext *context = model.getContext();
  if (!def || forward.contains(def))
    return Float8E4M3FNType::get(context);
  return Float8E5M2Type::get(context);
}

std::pair<Value, Value> Fp8Assigner::quantized(Value operand,
                                               ArrayRef<int64_t> shape,
                                               Type format, Location loc) {
  Value root = throughReshapes(operand);
  auto [it, inserted] = quantizations.try_emplace({root, format}, nullptr);
  if (inserted) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfterValue(root);
    it->second =
        QuantizeOp::create(builder, root.getLoc(), root, format, unscaled);
    ++numQuantized;
  }
  QuantizeOp quantize = it->second;
  Value result = quantize.getResult();
  if (quantize.getResult().getType().getShape() != shape)
    result = ReshapeOp::create(
        builder, loc, quantize.getResult().getType().clone(shape), result);
  return {result, quantize.getScaleInv()};
}

Value Fp8Assigner::transposed(Value matrix, Location loc) {
  auto [it, inserted] = transposes.try_emplace(matrix, Value());
  if (inserted) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfterValue(matrix);
    it->second =
        TransposeOp::create(builder, loc, matrix, ArrayRef<int64_t>{1, 0});
  }
  return it->second;
}

bool Fp8Assigner::aligned(int64_t k, int64_t n, int64_t lhsColumns,
                          int64_t rhsColumns) {
  return k % kFp8Alignment == 0 && n % kFp8Alignment == 0 &&
         lhsColumns % kFp8Alignment == 0 && rhsColumns % kFp8Alignment == 0;
}

void Fp8Assigner::replaceGemm(Operation *op, Value lhs,
                              ArrayRef<int64_t> lhsShape, Value rhs, Value bias,
                              bool transposeLhs, bool transposeRhs,
                              RankedTensorType resultType) {
  builder.setInsertionPoint(op);
  Location loc = op->getLoc();
  auto [lhsQ, lhsScale] = quantized(lhs, lhsShape, formatOf(lhs), loc);
  auto [rhsQ, rhsScale] =
      quantized(rhs, cast<RankedTensorType>(rhs.getType()).getShape(),
                formatOf(rhs), loc);
  Value result = op->getResult(0);
  // What replaces a forward op is forward too: the next GEMM's operands
  // take their format from it.
  bool isForward = forward.contains(op);
  auto defined = [&](Value value) {
    if (isForward)
      forward.insert(value.getDefiningOp());
    return value;
  };
  // A weight's gradient widened to f32 for the master weights: the GEMM
  // writes f32 from its accumulator, one rounding fewer (and no bias then).
  CastOp widening;
  if (result.hasOneUse() && !bias)
    if (auto cast = dyn_cast<CastOp>(*result.getUsers().begin());
        cast && cast.getResult().getType().getElementType().isF32())
      widening = cast;
  RankedTensorType type = resultType;
  if (widening)
    type = type.clone(widening.getResult().getType().getElementType());
  // FP8 tensor cores read both operands along K, their contiguous dim:
  // lhs [M, K] and rhs [N, K]. Other layouts read a transposed copy.
  if (transposeLhs)
    lhsQ = transposed(lhsQ, loc);
  if (!transposeRhs)
    rhsQ = transposed(rhsQ, loc);
  Value product = defined(ScaledMatmulOp::create(
      builder, loc, type, lhsQ, lhsScale, rhsQ, rhsScale, bias));
  ++numGemms;
  if (widening) {
    Value widened = product;
    if (widening.getResult().getType() != type)
      widened = defined(ReshapeOp::create(
          builder, loc, widening.getResult().getType(), product));
    widening.getResult().replaceAllUsesWith(widened);
    widening->erase();
    op->erase();
    return;
  }
  if (cast<RankedTensorType>(result.getType()) != type)
    product =
        defined(ReshapeOp::create(builder, loc, result.getType(), product));
  result.replaceAllUsesWith(product);
  op->erase();
}

LogicalResult Fp8Assigner::rewriteLinear(LinearOp linear) {
  auto input = cast<RankedTensorType>(linear.getInput().getType());
  auto weight = cast<RankedTensorType>(linear.getWeight().getType());
  auto result = cast<RankedTensorType>(linear.getResult().getType());
  int64_t k = weight.getDimSize(1), n = weight.getDimSize(0);
  if (readByLoss(linear.getResult()) || !aligned(k, n, k, k))
    return failure();
  if (Value bias = linear.getBias();
      bias && cast<RankedTensorType>(bias.getType()).getElementType() !=
                  result.getElementType())
    return failure();
  if (formatOf(linear.getInput()) != formatOf(linear.getWeight()))
    return failure(); // a linear of a gradient: not one of a layer's GEMMs
  int64_t rows = input.getNumElements() / k;
  replaceGemm(linear, linear.getInput(), {rows, k}, linear.getWeight(),
              linear.getBias(), /*transposeLhs=*/false, /*transposeRhs=*/true,
              result.clone({rows, n}));
  return success();
}

LogicalResult Fp8Assigner::rewriteMatmul(MatmulOp matmul) {
  auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
  auto rhs = cast<RankedTensorType>(matmul.getRhs().getType());
  auto result = cast<RankedTensorType>(matmul.getResult().getType());
  int64_t k = lhs.getDimSize(matmul.getTransposeLhs() ? 0 : 1);
  int64_t n = result.getDimSize(1);
  if (isLossGradient(matmul.getLhs()) || isLossGradient(matmul.getRhs()) ||
      readByLoss(matmul.getResult()) ||
      !aligned(k, n, lhs.getDimSize(1), rhs.getDimSize(1)))
    return failure();
  // FP8 tensor cores take at most one e5m2 operand.
  if (isa<Float8E5M2Type>(formatOf(matmul.getLhs())) &&
      isa<Float8E5M2Type>(formatOf(matmul.getRhs())))
    return failure();
  replaceGemm(matmul, matmul.getLhs(), lhs.getShape(), matmul.getRhs(), Value(),
              matmul.getTransposeLhs(), matmul.getTransposeRhs(), result);
  return success();
}

void Fp8Assigner::run() {
  SmallVector<Operation *> gemms;
  model.getBody().front().walk([&](Operation *op) {
    if (isa<LinearOp, MatmulOp>(op))
      gemms.push_back(op);
  });
  for (Operation *op : gemms) {
    if (auto linear = dyn_cast<LinearOp>(op))
      (void)rewriteLinear(linear);
    else
      (void)rewriteMatmul(cast<MatmulOp>(op));
  }
  // The reshapes that fed the half operands, where nothing else reads
  // them (canonicalize has run: nothing else is dead).
  Block &body = model.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
}

struct MpcAssignFp8Pass : impl::MpcAssignFp8PassBase<MpcAssignFp8Pass> {
  using Base::Base;

  void runOnOperation() override {
    if (gemms == Fp8Gemms::None)
      return;
    for (ModelOp model : getOperation().getOps<ModelOp>())
      Fp8Assigner(model, unscaled, numGemms, numQuantized).run();
  }
};

} // namespace
} // namespace mlir::mpc
