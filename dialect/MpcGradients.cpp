//===- MpcGradients.cpp - vector-Jacobian products of mpc ops -----*- C++ -*-===//
//
// This file implements DifferentiableOpInterface for every differentiable op:
// given the loss's gradient with respect to the op's result, each op builds
// the gradients with respect to the operands that need one, in mpc ops. The
// rule lives with the op; mpc-autodiff only walks the body in reverse.
//
// Broadcasting ops reduce their operand gradients back to the operand's
// shape (unbroadcast). Non-differentiable operands (integer indices, the
// condition of where, batch-norm running statistics) get no gradient.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <numeric>

using namespace mlir;
using namespace mlir::mpc;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

Value reshapeTo(OpBuilder &b, Location loc, Value value, Type type) {
  if (value.getType() == type)
    return value;
  return ReshapeOp::create(b, loc, type, value);
}

/// A scalar constant of `element` type, broadcast by its users.
Value scalar(OpBuilder &b, Location loc, Type element, double value) {
  auto type = RankedTensorType::get({}, element);
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
}

/// Sums `grad` over the dims that broadcasting added or stretched, so that
/// it has `target`'s shape.
Value unbroadcast(OpBuilder &b, Location loc, Value grad,
                  RankedTensorType target) {
  RankedTensorType gradType = tensorType(grad);
  if (gradType.getShape() == target.getShape())
    return grad;
  int64_t offset = gradType.getRank() - target.getRank();
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < gradType.getRank(); ++d)
    if (d < offset || (target.getDimSize(d - offset) == 1 &&
                       gradType.getDimSize(d) != 1))
      dims.push_back(d);
  Value summed = grad;
  if (!dims.empty())
    summed = ReduceSumOp::create(b, loc, grad, dims, /*keepdim=*/false);
  return reshapeTo(b, loc, summed, target);
}

/// The gradient of a reduction's input: the result's gradient reshaped to
/// keep the reduced dims, then broadcast over them.
Value expandReduced(OpBuilder &b, Location loc, Value grad,
                    RankedTensorType input, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> keptShape(input.getShape());
  for (int64_t d : dims)
    keptShape[d] = 1;
  auto keptType = RankedTensorType::get(keptShape, input.getElementType());
  Value kept = reshapeTo(b, loc, grad, keptType);
  return BroadcastOp::create(b, loc, input, kept);
}

/// [..., K] -> [M, K]: the 2-d view a GEMM sees.
Value flattenTo2d(OpBuilder &b, Location loc, Value value) {
  RankedTensorType type = tensorType(value);
  int64_t columns = type.getShape().back();
  auto flat = RankedTensorType::get(
      {type.getNumElements() / columns, columns}, type.getElementType());
  return reshapeTo(b, loc, value, flat);
}

void resizeGrads(Operation *op, SmallVectorImpl<Value> &grads) {
  grads.assign(op->getNumOperands(), Value());
}

} // namespace

//===----------------------------------------------------------------------===//
// GEMM-like ops
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &grads) {
  // y = x · Wᵀ + b over rows x2 = [M, K]: dx = dy · W, dW = dyᵀ · x,
  // db = the column sums of dy.
  resizeGrads(*this, grads);
  Location loc = getLoc();
  Value dy2 = flattenTo2d(b, loc, dy);
  if (needed[0]) {
    Value dx2 = MatmulOp::create(b, loc, dy2, getWeight(), false, false);
    grads[0] = reshapeTo(b, loc, dx2, getInput().getType());
  }
  if (needed[1]) {
    Value x2 = flattenTo2d(b, loc, getInput());
    grads[1] = MatmulOp::create(b, loc, dy2, x2, /*transpose_lhs=*/true,
                                /*transpose_rhs=*/false);
  }
  if (getBias() && needed[2])
    grads[2] = ReduceSumOp::create(b, loc, dy2, ArrayRef<int64_t>{0}, false);
  return success();
}

/// C = op(A) · op(B), for matmul and batch_matmul alike.
template <typename OpTy>
static void matmulVjp(OpTy op, OpBuilder &b, Value dc, ArrayRef<bool> needed,
                      SmallVectorImpl<Value> &grads) {
  resizeGrads(op, grads);
  Location loc = op.getLoc();
  bool ta = op.getTransposeLhs(), tb = op.getTransposeRhs();
  Value a = op.getLhs(), bm = op.getRhs();
  if (needed[0])
    grads[0] = ta ? OpTy::create(b, loc, bm, dc, /*transpose_lhs=*/tb,
                                 /*transpose_rhs=*/true)   // op(B) · dCᵀ
                  : OpTy::create(b, loc, dc, bm, /*transpose_lhs=*/false,
                                 /*transpose_rhs=*/!tb);   // dC · op(B)ᵀ
  if (needed[1])
    grads[1] = tb ? OpTy::create(b, loc, dc, a, /*transpose_lhs=*/true,
                                 /*transpose_rhs=*/ta)     // dCᵀ · op(A)
                  : OpTy::create(b, loc, a, dc, /*transpose_lhs=*/!ta,
                                 /*transpose_rhs=*/false); // op(A)ᵀ · dC
}

LogicalResult MatmulOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &grads) {
  matmulVjp(*this, b, dy, needed, grads);
  return success();
}

LogicalResult BatchMatmulOp::buildVjp(OpBuilder &b, Value dy,
                                      ArrayRef<bool> needed,
                                      SmallVectorImpl<Value> &grads) {
  matmulVjp(*this, b, dy, needed, grads);
  return success();
}

LogicalResult Conv2dOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  Location loc = getLoc();
  auto stride = b.getDenseI64ArrayAttr(getStrideOrDefault());
  auto padding = b.getDenseI64ArrayAttr(getPaddingOrDefault());
  auto dilation = b.getDenseI64ArrayAttr(getDilationOrDefault());
  auto groups = b.getI64IntegerAttr(getGroupsOrDefault());
  if (needed[0])
    grads[0] = Conv2dGradInputOp::create(b, loc, getInput().getType(), dy,
                                         getWeight(), stride, padding,
                                         dilation, groups);
  if (needed[1])
    grads[1] = Conv2dGradWeightOp::create(b, loc, getWeight().getType(), dy,
                                          getInput(), stride, padding,
                                          dilation, groups);
  if (getBias() && needed[2])
    grads[2] = ReduceSumOp::create(b, loc, dy, ArrayRef<int64_t>{0, 2, 3},
                                   false);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  if (needed[0])
    grads[0] = unbroadcast(b, getLoc(), dy, getLhs().getType());
  if (needed[1])
    grads[1] = unbroadcast(b, getLoc(), dy, getRhs().getType());
  return success();
}

LogicalResult SubOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  if (needed[0])
    grads[0] = unbroadcast(b, getLoc(), dy, getLhs().getType());
  if (needed[1])
    grads[1] = unbroadcast(b, getLoc(), NegOp::create(b, getLoc(), dy),
                           getRhs().getType());
  return success();
}

LogicalResult MulOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  Location loc = getLoc();
  if (needed[0])
    grads[0] = unbroadcast(b, loc, MulOp::create(b, loc, dy, getRhs()),
                           getLhs().getType());
  if (needed[1])
    grads[1] = unbroadcast(b, loc, MulOp::create(b, loc, dy, getLhs()),
                           getRhs().getType());
  return success();
}

LogicalResult DivOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &grads) {
  // d(a / c)/da = 1 / c; d(a / c)/dc = -(a / c) / c.
  resizeGrads(*this, grads);
  Location loc = getLoc();
  if (needed[0])
    grads[0] = unbroadcast(b, loc, DivOp::create(b, loc, dy, getRhs()),
                           getLhs().getType());
  if (needed[1]) {
    Value quotient = DivOp::create(b, loc, MulOp::create(b, loc, dy,
                                                         getResult()),
                                   getRhs());
    grads[1] = unbroadcast(b, loc, NegOp::create(b, loc, quotient),
                           getRhs().getType());
  }
  return success();
}

LogicalResult NegOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = NegOp::create(b, getLoc(), dy);
  return success();
}

LogicalResult ReluOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  // The mask from the output, which is positive where the input is: the
  // output is usually kept anyway (the next layer's input), so the input
  // need not be, and a batch norm's kernel can apply the ReLU without
  // storing what it normalised (cuDNN's BN-activation backward reads y).
  grads[0] = ReluGradOp::create(b, getLoc(), dy, getResult());
  return success();
}

LogicalResult GeluOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = GeluGradOp::create(b, getLoc(), dy, getInput(),
                                getApproximate());
  return success();
}

LogicalResult SiluOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = SiluGradOp::create(b, getLoc(), dy, getInput());
  return success();
}

LogicalResult ClampOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = ClampGradOp::create(b, getLoc(), dy, getInput(), getMinAttr(),
                                 getMaxAttr());
  return success();
}

LogicalResult TanhOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = TanhGradOp::create(b, getLoc(), dy, getResult());
  return success();
}

LogicalResult SigmoidOp::buildVjp(OpBuilder &b, Value dy,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = SigmoidGradOp::create(b, getLoc(), dy, getResult());
  return success();
}

LogicalResult ExpOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = MulOp::create(b, getLoc(), dy, getResult());
  return success();
}

LogicalResult LogOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                              SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = DivOp::create(b, getLoc(), dy, getInput());
  return success();
}

LogicalResult SqrtOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  // d sqrt(x) = 1 / (2 sqrt(x)).
  resizeGrads(*this, grads);
  Location loc = getLoc();
  grads[0] = DivOp::create(b, loc, ScaleOp::create(b, loc, dy, b.getF64FloatAttr(0.5)),
                           getResult());
  return success();
}

LogicalResult RsqrtOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                SmallVectorImpl<Value> &grads) {
  // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3.
  resizeGrads(*this, grads);
  Location loc = getLoc();
  Value y = getResult();
  Value cube = MulOp::create(b, loc, MulOp::create(b, loc, dy, y),
                             MulOp::create(b, loc, y, y));
  grads[0] = ScaleOp::create(b, loc, cube, b.getF64FloatAttr(-0.5));
  return success();
}

LogicalResult ScaleOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = ScaleOp::create(b, getLoc(), dy, getFactorAttr());
  return success();
}

LogicalResult WhereOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  Location loc = getLoc();
  Value zero = scalar(b, loc, tensorType(dy).getElementType(), 0.0);
  if (needed[1])
    grads[1] = unbroadcast(b, loc,
                           WhereOp::create(b, loc, getCondition(), dy, zero),
                           getOnTrue().getType());
  if (needed[2])
    grads[2] = unbroadcast(b, loc,
                           WhereOp::create(b, loc, getCondition(), zero, dy),
                           getOnFalse().getType());
  return success();
}

LogicalResult DropoutOp::buildVjp(OpBuilder &b, Value dy,
                                  ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &grads) {
  // The mask is a function of (seed, step, element index), so dropout of dy
  // with the same rate and seed applies the forward pass's mask and scale.
  resizeGrads(*this, grads);
  grads[0] = DropoutOp::create(b, getLoc(), dy, getRateAttr(), getSeedAttr());
  return success();
}

LogicalResult CastOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                               SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = CastOp::create(b, getLoc(), getInput().getType(), dy);
  return success();
}

LogicalResult BroadcastOp::buildVjp(OpBuilder &b, Value dy,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = unbroadcast(b, getLoc(), dy, getInput().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

LogicalResult ReduceSumOp::buildVjp(OpBuilder &b, Value dy,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = expandReduced(b, getLoc(), dy, getInput().getType(), getDims());
  return success();
}

LogicalResult ReduceMeanOp::buildVjp(OpBuilder &b, Value dy,
                                     ArrayRef<bool> needed,
                                     SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  int64_t count = 1;
  for (int64_t d : getDims())
    count *= getInput().getType().getDimSize(d);
  Value expanded =
      expandReduced(b, getLoc(), dy, getInput().getType(), getDims());
  grads[0] = ScaleOp::create(b, getLoc(), expanded, b.getF64FloatAttr(1.0 / count));
  return success();
}

LogicalResult ReduceMaxOp::buildVjp(OpBuilder &b, Value dy,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = ReduceMaxGradOp::create(b, getLoc(), getInput().getType(), dy,
                                     getInput(), getResult(), getDimsAttr(),
                                     getKeepdimAttr());
  return success();
}

LogicalResult SoftmaxOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = SoftmaxGradOp::create(b, getLoc(), dy, getResult(), getDimAttr());
  return success();
}

LogicalResult LogSoftmaxOp::buildVjp(OpBuilder &b, Value dy,
                                     ArrayRef<bool> needed,
                                     SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] =
      LogSoftmaxGradOp::create(b, getLoc(), dy, getResult(), getDimAttr());
  return success();
}

LogicalResult LayerNormOp::buildVjp(OpBuilder &b, Value dy,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  auto grad = LayerNormGradOp::create(b, getLoc(), dy, getInput(), getGamma(),
                                      getEpsAttr());
  grads[0] = needed[0] ? grad.getInputGrad() : Value();
  grads[1] = needed[1] ? grad.getGammaGrad() : Value();
  grads[2] = needed[2] ? grad.getBetaGrad() : Value();
  return success();
}

LogicalResult RmsNormOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  auto grad = RmsNormGradOp::create(b, getLoc(), dy, getInput(), getGamma(),
                                    getEpsAttr());
  grads[0] = needed[0] ? grad.getInputGrad() : Value();
  grads[1] = needed[1] ? grad.getGammaGrad() : Value();
  return success();
}

LogicalResult BatchNormOp::buildVjp(OpBuilder &b, Value dy,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  // Running statistics (operands 3 and 4) are updated, not differentiated.
  resizeGrads(*this, grads);
  // The statistics are computed again from the input, unless
  // mpc-save-batch-norm-statistics later hands over the forward's.
  auto grad = BatchNormGradOp::create(b, getLoc(), dy, getInput(), getGamma(),
                                      /*stats=*/Value(),
                                      /*relu_beta=*/Value(), getEpsAttr());
  grads[0] = needed[0] ? grad.getInputGrad() : Value();
  grads[1] = needed[1] ? grad.getGammaGrad() : Value();
  grads[2] = needed[2] ? grad.getBetaGrad() : Value();
  return success();
}

//===----------------------------------------------------------------------===//
// Embedding and loss
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildVjp(OpBuilder &b, Value dy,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = EmbeddingGradOp::create(b, getLoc(), getTable().getType(), dy,
                                     getIndices());
  return success();
}

LogicalResult CrossEntropyOp::buildVjp(OpBuilder &b, Value dy,
                                       ArrayRef<bool> needed,
                                       SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = CrossEntropyGradOp::create(b, getLoc(), dy, getLogits(),
                                        getTargets(), getIgnoreIndexAttr());
  return success();
}

LogicalResult MseLossOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &grads) {
  // d input = 2 (input - target) dy / N, computed in f32 as the loss is
  // (half operands are widened, the gradients rounded to their type once);
  // d target is its negation.
  resizeGrads(*this, grads);
  Location loc = getLoc();
  auto type = getInput().getType();
  auto wide = type.clone(b.getF32Type());
  auto widen = [&](Value value) -> Value {
    return value.getType() == wide ? value
                                   : CastOp::create(b, loc, wide, value);
  };
  auto narrow = [&](Value value) -> Value {
    return type == wide ? value : CastOp::create(b, loc, type, value);
  };
  SmallVector<int64_t> all(type.getRank());
  std::iota(all.begin(), all.end(), 0);
  Value expanded = expandReduced(b, loc, dy, wide, all);
  Value difference =
      SubOp::create(b, loc, widen(getInput()), widen(getTarget()));
  Value gradient = ScaleOp::create(
      b, loc, MulOp::create(b, loc, difference, expanded),
      b.getF64FloatAttr(2.0 / static_cast<double>(type.getNumElements())));
  if (needed[0])
    grads[0] = narrow(gradient);
  if (needed[1])
    grads[1] = narrow(NegOp::create(b, loc, gradient));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                  SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = reshapeTo(b, getLoc(), dy, getInput().getType());
  return success();
}

LogicalResult TransposeOp::buildVjp(OpBuilder &b, Value dy,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  grads[0] = TransposeOp::create(b, getLoc(), dy, inverse);
  return success();
}

LogicalResult SliceOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = SliceGradOp::create(b, getLoc(), getInput().getType(), dy,
                                 getStartsAttr(),
                                 b.getDenseI64ArrayAttr(getStridesOrDefault()));
  return success();
}

LogicalResult ConcatOp::buildVjp(OpBuilder &b, Value dy, ArrayRef<bool> needed,
                                 SmallVectorImpl<Value> &grads) {
  // Each input's gradient is its slice of dy along the concatenated dim.
  resizeGrads(*this, grads);
  RankedTensorType type = tensorType(dy);
  int64_t dim = getDim(), start = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t extent = tensorType(input).getDimSize(dim);
    if (needed[i]) {
      SmallVector<int64_t> starts(type.getRank(), 0);
      SmallVector<int64_t> limits(type.getShape());
      starts[dim] = start;
      limits[dim] = start + extent;
      grads[i] = SliceOp::create(b, getLoc(), dy, starts, limits,
                                 /*strides=*/nullptr);
    }
    start += extent;
  }
  return success();
}

LogicalResult MaxPool2dOp::buildVjp(OpBuilder &b, Value dy,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = MaxPool2dGradOp::create(
      b, getLoc(), getInput().getType(), dy, getInput(), getKernelAttr(),
      b.getDenseI64ArrayAttr(getStrideOrDefault()),
      b.getDenseI64ArrayAttr(getPaddingOrDefault()));
  return success();
}

LogicalResult AvgPool2dOp::buildVjp(OpBuilder &b, Value dy,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  resizeGrads(*this, grads);
  grads[0] = AvgPool2dGradOp::create(
      b, getLoc(), getInput().getType(), dy, getKernelAttr(),
      b.getDenseI64ArrayAttr(getStrideOrDefault()),
      b.getDenseI64ArrayAttr(getPaddingOrDefault()));
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::buildVjp(OpBuilder &b, Value dy,
                                    ArrayRef<bool> needed,
                                    SmallVectorImpl<Value> &grads) {
  // One backward op for all three: its kernels recompute the probabilities
  // once for dq, dk and dv together.
  resizeGrads(*this, grads);
  auto grad = AttentionGradOp::create(
      b, getLoc(), getQuery().getType(), getKey().getType(),
      getValue().getType(), dy, getQuery(), getKey(), getValue(), getResult(),
      getLse(), getMask(), getScaleAttr(), getCausalAttr(), getLayoutAttr());
  grads[0] = needed[0] ? grad.getQueryGrad() : Value();
  grads[1] = needed[1] ? grad.getKeyGrad() : Value();
  grads[2] = needed[2] ? grad.getValueGrad() : Value();
  return success();
}
