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
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

#define DEBUG_TYPE "mpc-assign-fp8"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCASSIGNFP8PASS
#include "passes/Passes.h.inc"

namespace {

/// cuBLASLt's FP8 matmuls want the contracted dim and the output's leading
/// dims to be multiples of 16 bytes, 16 FP8 elements.
constexpr int64_t kFp8Alignment = 16;

/// Whether `value` (through reshapes) is read by an op of one of `Ts`.
template <typename... Ts> bool readBy(Value value) {
  for (Operation *user : value.getUsers()) {
    if (isa<Ts...>(user))
      return true;
    if (auto reshape = dyn_cast<ReshapeOp>(user);
        reshape && readBy<Ts...>(reshape.getResult()))
      return true;
  }
  return false;
}

/// Whether `value` (through reshapes) is the gradient a GELU's gradient
/// multiplies: its DGELU epilogue's GEMM wrote it.
bool isGeluGradient(Value value) {
  for (OpOperand &use : value.getUses()) {
    if (auto gelu = dyn_cast<GeluGradOp>(use.getOwner());
        gelu && use.getOperandNumber() == 0)
      return true;
    if (auto reshape = dyn_cast<ReshapeOp>(use.getOwner());
        reshape && isGeluGradient(reshape.getResult()))
      return true;
  }
  return false;
}

/// Whether current scaling finds the amax of `value` in the kernels that
/// store it, not in a pass of its own (mpc-form-kernels puts the
/// quantization in their group): a layer norm's result, or its input
/// gradient, with the residual gradient added or not; an attention's
/// output, or the sum its gradient's dq, dk and dv are scattered into.
bool amaxFoundByProducer(Value value) {
  auto isInputGradient = [](Value v) {
    auto result = dyn_cast<OpResult>(v);
    return result && isa<LayerNormGradOp>(result.getOwner()) &&
           result.getResultNumber() == 0;
  };
  if (value.getDefiningOp<LayerNormOp>() || isInputGradient(value))
    return true;
  if (auto result = dyn_cast<OpResult>(value);
      result && isa<AttentionOp>(result.getOwner()) &&
      result.getResultNumber() == 0)
    return true;
  auto add = value.getDefiningOp<AddOp>();
  if (!add)
    return false;
  if (llvm::any_of(add->getOperands(), [&](Value operand) {
        return operand.hasOneUse() && isInputGradient(operand);
      }))
    return true;
  // The scatter: sums of slice_grads of reshapes of the gradient's results.
  Value scattered = add.getLhs();
  while (Operation *op = scattered.getDefiningOp()) {
    if (!isa<AddOp, SliceGradOp, ReshapeOp>(op))
      return isa<AttentionGradOp>(op);
    scattered = op->getOperand(0);
  }
  return false;
}

/// Whether the loss reads `value`: the classifier's logits.
bool readByLoss(Value value) {
  return readBy<CrossEntropyOp, CrossEntropyGradOp, MseLossOp>(value);
}

/// Whether `value` is the loss's gradient (through reshapes): the
/// classifier's backward GEMMs read it.
bool isLossGradient(Value value) {
  return throughReshapes(value).getDefiningOp<CrossEntropyGradOp>() != nullptr;
}

/// Whether the backward pass computes `value` (through reshapes): a
/// gradient, e5m2 in FP8.
bool isGradient(Value value, const llvm::DenseSet<Operation *> &forward) {
  Operation *def = throughReshapes(value).getDefiningOp();
  return def && !forward.contains(def);
}

} // namespace

GemmDims gemmDims(Operation *gemm) {
  if (auto linear = dyn_cast<LinearOp>(gemm)) {
    auto weight = cast<RankedTensorType>(linear.getWeight().getType());
    int64_t k = weight.getDimSize(1);
    return {
        cast<RankedTensorType>(linear.getInput().getType()).getNumElements() /
            k,
        weight.getDimSize(0), k};
  }
  if (auto matmul = dyn_cast<MatmulOp>(gemm)) {
    auto result = cast<RankedTensorType>(matmul.getResult().getType());
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
    return {result.getDimSize(0), result.getDimSize(1),
            lhs.getDimSize(matmul.getTransposeLhs() ? 0 : 1)};
  }
  auto scaled = cast<ScaledMatmulOp>(gemm);
  return {scaled.getResult().getType().getDimSize(0),
          scaled.getResult().getType().getDimSize(1),
          scaled.getLhs().getType().getDimSize(1)};
}

std::optional<std::string>
whyNotFp8(Operation *gemm, const llvm::DenseSet<Operation *> &forward) {
  if (auto reason = gemm->getAttrOfType<StringAttr>(kFp8ReasonAttr))
    return reason.str();
  auto dimsUnaligned = [](std::initializer_list<int64_t> dims) {
    return llvm::any_of(dims,
                        [](int64_t dim) { return dim % kFp8Alignment != 0; });
  };
  const std::string unaligned =
      "a dim it contracts or writes is not a multiple of 16";
  if (auto linear = dyn_cast<LinearOp>(gemm)) {
    auto weight = cast<RankedTensorType>(linear.getWeight().getType());
    auto result = cast<RankedTensorType>(linear.getResult().getType());
    if (readByLoss(linear.getResult()))
      return std::string("the loss reads its product (the classifier)");
    if (dimsUnaligned({weight.getDimSize(0), weight.getDimSize(1)}))
      return unaligned;
    if (Value bias = linear.getBias();
        bias && cast<RankedTensorType>(bias.getType()).getElementType() !=
                    result.getElementType())
      return std::string("its bias is not of its result's type");
    if (isGradient(linear.getInput(), forward) !=
        isGradient(linear.getWeight(), forward))
      return std::string("it multiplies a gradient by a forward value");
    return std::nullopt;
  }
  if (auto matmul = dyn_cast<MatmulOp>(gemm)) {
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
    auto rhs = cast<RankedTensorType>(matmul.getRhs().getType());
    auto result = cast<RankedTensorType>(matmul.getResult().getType());
    if (isLossGradient(matmul.getLhs()) || isLossGradient(matmul.getRhs()))
      return std::string("it reads the loss's gradient (the classifier)");
    if (readByLoss(matmul.getResult()))
      return std::string("the loss reads its product");
    if (dimsUnaligned({lhs.getDimSize(matmul.getTransposeLhs() ? 0 : 1),
                       result.getDimSize(1), lhs.getDimSize(1),
                       rhs.getDimSize(1)}))
      return unaligned;
    if (isGradient(matmul.getLhs(), forward) &&
        isGradient(matmul.getRhs(), forward))
      return std::string("both operands are gradients (e5m2 x e5m2)");
    return std::nullopt;
  }
  return std::string("only linear and rank-2 matmul run in FP8");
}

namespace {

/// The GPU `gemms=auto` decides for.
struct Fp8Rates {
  double halfFlops, fp8Flops, bytesPerSecond;
};

/// One GEMM as the cost model sees it: op(lhs) [m, k] · op(rhs) [k, n].
struct GemmShape {
  Value lhs, rhs;
  bool transposeLhs, transposeRhs;
  GemmDims dims;
  int64_t resultBytes;
};

GemmShape shapeOf(Operation *op) {
  int64_t resultBytes = cast<RankedTensorType>(op->getResult(0).getType())
                            .getElementTypeBitWidth() /
                        8;
  if (auto linear = dyn_cast<LinearOp>(op))
    return {linear.getInput(), linear.getWeight(), false, true,
            gemmDims(op),      resultBytes};
  auto matmul = cast<MatmulOp>(op);
  return {matmul.getLhs(),          matmul.getRhs(), matmul.getTransposeLhs(),
          matmul.getTransposeRhs(), gemmDims(op),    resultBytes};
}

class Fp8Assigner {
public:
  Fp8Assigner(ModelOp model, bool unscaled, int64_t history, int64_t margin,
              std::optional<Fp8Rates> rates, llvm::Statistic &numGemms,
              llvm::Statistic &numQuantized)
      : model(model), unscaled(unscaled), history(history), margin(margin),
        rates(rates), forward(findForwardOps(model)), builder(model),
        numGemms(numGemms), numQuantized(numQuantized) {}

  LogicalResult run();

private:
  /// `gemms=auto`: the eligible GEMMs in groups decided together (a linear
  /// and its gradient's GEMMs), and whether each group pays.
  SmallVector<SmallVector<Operation *, 6>>
  layerGroups(ArrayRef<Operation *> eligible);
  /// Null where `group` pays in FP8 (then its quantized operands count as
  /// paid for); otherwise why not.
  std::optional<std::string> costReason(ArrayRef<Operation *> group);
  void rewrite(Operation *op);
  /// Delayed scaling: the state table the quantizations share, added to
  /// the model by the first (one column to begin with).
  Value scalingTable();
  /// Delayed scaling: numbers the quantizations' columns, e4m3 first, and
  /// sizes the table to them.
  void numberColumns();

  /// e4m3 for what the forward pass computes (activations, weights), e5m2
  /// for gradients.
  Type formatOf(Value operand) {
    MLIRContext *context = model.getContext();
    if (isGradient(operand, forward))
      return Float8E5M2Type::get(context);
    return Float8E4M3FNType::get(context);
  }
  /// `operand` in `format` with its inverse scale: the root it reshapes,
  /// quantized once (after its definition, so every reader shares it), and
  /// reshaped to `shape`.
  std::pair<Value, Value> quantized(Value operand, ArrayRef<int64_t> shape,
                                    Type format, Location loc);
  /// `matrix` (a quantized operand) transposed, copied once.
  Value transposed(Value matrix, Location loc);
  /// Each transposed copy of a quantization's result (viewed as [rows, its
  /// last dim]) written by the quantization itself, in the same pass.
  void mergeTransposes();
  void rewriteLinear(LinearOp linear);
  void rewriteMatmul(MatmulOp matmul);
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
  int64_t history, margin; ///< history 0: current scaling
  Value table;
  std::optional<Fp8Rates> rates; ///< set for gemms=auto
  llvm::DenseSet<Operation *> forward;
  /// auto: (root, transposed) of the operands chosen groups quantize.
  llvm::DenseSet<std::pair<Value, unsigned>> paidCopies;
  OpBuilder builder;
  llvm::Statistic &numGemms;
  llvm::Statistic &numQuantized;
  llvm::DenseMap<std::pair<Value, Type>, QuantizeOp> quantizations;
  /// Transposed copies of quantized matrices, one each.
  llvm::DenseMap<Value, Value> transposes;
};

std::pair<Value, Value> Fp8Assigner::quantized(Value operand,
                                               ArrayRef<int64_t> shape,
                                               Type format, Location loc) {
  Value root = throughReshapes(operand);
  auto [it, inserted] = quantizations.try_emplace({root, format}, nullptr);
  if (inserted) {
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointAfterValue(root);
    it->second = history > 0
                     ? QuantizeOp::create(builder, root.getLoc(), root, format,
                                          scalingTable(), /*index=*/0, margin)
                     : QuantizeOp::create(builder, root.getLoc(), root, format,
                                          unscaled);
    ++numQuantized;
  }
  QuantizeOp quantize = it->second;
  Value result = quantize.getResult();
  if (quantize.getResult().getType().getShape() != shape)
    result = ReshapeOp::create(
        builder, loc, quantize.getResult().getType().clone(shape), result);
  return {result, quantize.getScaleInv()};
}

Value Fp8Assigner::scalingTable() {
  if (!table) {
    auto type = RankedTensorType::get({4 + history, 1}, builder.getF32Type());
    table = model.addState(
        kFp8ScalingState, type,
        InitializerAttr::get(model.getContext(), InitKind::Zeros,
                             DenseF64ArrayAttr::get(model.getContext(), {})),
        model.getLoc());
  }
  return table;
}

void Fp8Assigner::numberColumns() {
  SmallVector<QuantizeOp> columns;
  model.getBody().front().walk([&](QuantizeOp op) {
    if (op.getScaling())
      columns.push_back(op);
  });
  // e4m3 columns first: the update kernel tells the formats' largest
  // values apart by column.
  llvm::stable_sort(columns, [](QuantizeOp a, QuantizeOp b) {
    return isa<Float8E4M3FNType>(a.getResult().getType().getElementType()) &&
           !isa<Float8E4M3FNType>(b.getResult().getType().getElementType());
  });
  for (auto [column, op] : llvm::enumerate(columns))
    op.setIndex(column);
  table.setType(
      RankedTensorType::get({4 + history, static_cast<int64_t>(columns.size())},
                            builder.getF32Type()));
}

void Fp8Assigner::mergeTransposes() {
  SmallVector<TransposeOp> transposes;
  model.getBody().front().walk([&](TransposeOp op) {
    auto quantize = throughReshapes(op.getInput()).getDefiningOp<QuantizeOp>();
    if (quantize && !quantize.getTransposed() &&
        op.getInput().getType().getShape().back() ==
            quantize.getInput().getType().getShape().back())
      transposes.push_back(op);
  });
  for (TransposeOp transpose : transposes) {
    auto quantize =
        throughReshapes(transpose.getInput()).getDefiningOp<QuantizeOp>();
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPoint(quantize);
    auto merged = QuantizeOp::create(
        builder, quantize.getLoc(), quantize.getResult().getType(),
        quantize.getScaleInv().getType(), transpose.getType(),
        quantize.getInput(), quantize.getScaling(), quantize.getIndexAttr(),
        quantize.getMarginAttr(), quantize.getUnscaledAttr());
    quantize.getResult().replaceAllUsesWith(merged.getResult());
    quantize.getScaleInv().replaceAllUsesWith(merged.getScaleInv());
    quantize->erase();
    transpose.getResult().replaceAllUsesWith(merged.getTransposed());
    Value input = transpose.getInput();
    transpose->erase();
    // The reshape the transpose read, where nothing else reads it.
    if (Operation *reshape = input.getDefiningOp();
        reshape && reshape != merged && isOpTriviallyDead(reshape))
      reshape->erase();
  }
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

void Fp8Assigner::rewriteLinear(LinearOp linear) {
  auto input = cast<RankedTensorType>(linear.getInput().getType());
  auto result = cast<RankedTensorType>(linear.getResult().getType());
  int64_t n = result.getShape().back(), k = input.getShape().back();
  int64_t rows = input.getNumElements() / k;
  replaceGemm(linear, linear.getInput(), {rows, k}, linear.getWeight(),
              linear.getBias(), /*transposeLhs=*/false, /*transposeRhs=*/true,
              result.clone({rows, n}));
}

void Fp8Assigner::rewriteMatmul(MatmulOp matmul) {
  replaceGemm(matmul, matmul.getLhs(),
              cast<RankedTensorType>(matmul.getLhs().getType()).getShape(),
              matmul.getRhs(), Value(), matmul.getTransposeLhs(),
              matmul.getTransposeRhs(),
              cast<RankedTensorType>(matmul.getResult().getType()));
}

SmallVector<SmallVector<Operation *, 6>>
Fp8Assigner::layerGroups(ArrayRef<Operation *> eligible) {
  SmallVector<SmallVector<Operation *, 6>> groups;
  llvm::DenseSet<Operation *> grouped;
  for (Operation *op : eligible) {
    auto linear = dyn_cast<LinearOp>(op);
    if (!linear)
      continue;
    SmallVector<Operation *, 6> group = {op};
    grouped.insert(op);
    Value input = throughReshapes(linear.getInput());
    for (Operation *other : eligible) {
      auto matmul = dyn_cast<MatmulOp>(other);
      if (!matmul || grouped.contains(other) ||
          !isGradient(matmul.getLhs(), forward))
        continue;
      // dX = dy · W and dW = dyᵀ · X (X the linear's input, through
      // reshapes), as LinearOp's VJP builds them.
      bool inputGradient = matmul.getRhs() == linear.getWeight();
      bool weightGradient =
          matmul.getTransposeLhs() && throughReshapes(matmul.getRhs()) == input;
      if (inputGradient || weightGradient) {
        group.push_back(other);
        grouped.insert(other);
      }
    }
    groups.push_back(std::move(group));
  }
  for (Operation *op : eligible)
    if (!grouped.contains(op))
      groups.push_back({op});
  // An MLP's two layers, joined by a GELU, are decided together: the GELU
  // (and its gradient) run in the passes that quantize their output only
  // where the layer that reads it runs in FP8 too.
  for (auto &group : groups) {
    auto linear = dyn_cast<LinearOp>(group.front());
    if (!linear)
      continue;
    for (Operation *user : linear.getResult().getUsers()) {
      auto gelu = dyn_cast<GeluOp>(user);
      if (!gelu)
        continue;
      for (auto &other : groups) {
        auto next =
            dyn_cast_or_null<LinearOp>(other.empty() ? nullptr : other.front());
        if (&other == &group || !next ||
            throughReshapes(next.getInput()) != gelu.getResult())
          continue;
        group.append(other.begin(), other.end());
        other.clear();
      }
    }
  }
  llvm::erase_if(groups, [](const auto &group) { return group.empty(); });
  return groups;
}

std::optional<std::string>
Fp8Assigner::costReason(ArrayRef<Operation *> group) {
  if (rates->fp8Flops <= 0)
    return std::string("the GPU has no FP8 tensor cores");
  double saved = 0, addedBytes = 0;
  llvm::DenseSet<std::pair<Value, unsigned>> copies;
  auto copy = [&](Value operand, bool transposed) {
    Value root = throughReshapes(operand);
    if (paidCopies.contains({root, unsigned(transposed)}) ||
        !copies.insert({root, unsigned(transposed)}).second)
      return;
    auto type = cast<RankedTensorType>(root.getType());
    double elements = double(type.getNumElements());
    // Read by the cast, and by current scaling's amax pass unless the
    // kernel that stores it finds the amax. Under delayed scaling a layer
    // norm's kernel writes the FP8 copy itself (mpc-form-kernels), which
    // is then read once more for the transposed copy.
    bool amaxPass = !unscaled && history == 0 && !amaxFoundByProducer(root);
    bool castByNorm =
        !unscaled && history > 0 && root.getDefiningOp<LayerNormOp>();
    if (castByNorm) // FP8 written; read and written again transposed
      addedBytes += (transposed ? 2 : 1) * elements;
    else if (transposed) // written by the quantizing pass
      addedBytes += elements;
    else // read (once or twice); FP8 written
      addedBytes +=
          ((amaxPass ? 2 : 1) * type.getElementTypeBitWidth() / 8 + 1) *
          elements;
  };
  for (Operation *op : group) {
    GemmShape g = shapeOf(op);
    auto [m, n, k] = g.dims;
    double flops = 2.0 * double(m) * double(n) * double(k);
    double operands = double(m) * k + double(n) * k;
    double result = double(m) * n * g.resultBytes;
    double half = std::max(flops / rates->halfFlops,
                           (2 * operands + result) / rates->bytesPerSecond);
    double fp8 = std::max(flops / rates->fp8Flops,
                          (operands + result) / rates->bytesPerSecond);
    saved += half - fp8;
    copy(g.lhs, false);
    copy(g.rhs, false);
    if (g.transposeLhs)
      copy(g.lhs, true);
    if (!g.transposeRhs)
      copy(g.rhs, true);
    // Epilogues mpc-form-kernels fuses into a half GEMM, whose traffic hid
    // under its compute, run in the passes that quantize the FP8 GEMM's
    // output instead (row groups: the cast, and with current scaling the
    // amax pass before it). A biased linear's GELU costs nothing more
    // there; the GELU's gradient, where the product is the gradient it
    // multiplies (not the GELU's input, which a forward GEMM wrote), adds
    // the reads of the GELU's input (the bias gradient is summed in the
    // cast pass, below).
    Value product = op->getResult(0);
    if (isGeluGradient(product))
      addedBytes += (unscaled || history > 0 ? 1 : 2) * result;
  }
  // A linear's bias gradient, fused into its weight gradient's GEMM in
  // half (BGRADB), is summed by the cast pass that quantizes the output
  // gradient, from its 32-row tiles: only those partial sums (f32, written
  // and read again) are added.
  for (Operation *op : group) {
    auto linear = dyn_cast<LinearOp>(op);
    if (!linear || !linear.getBias())
      continue;
    Value input = throughReshapes(linear.getInput());
    bool weightGradient = llvm::any_of(group, [&](Operation *other) {
      auto matmul = dyn_cast<MatmulOp>(other);
      return matmul && matmul.getTransposeLhs() &&
             throughReshapes(matmul.getRhs()) == input;
    });
    auto type = cast<RankedTensorType>(linear.getResult().getType());
    if (weightGradient)
      addedBytes += double(type.getNumElements()) / 32 * 4 * 2;
  }
  double added = addedBytes / rates->bytesPerSecond;
  if (saved > added) {
    paidCopies.insert(copies.begin(), copies.end());
    return std::nullopt;
  }
  auto duration = [](double seconds) {
    return seconds >= 1e-8 ? llvm::formatv("{0:f2} us", seconds * 1e6).str()
                           : llvm::formatv("{0:f2} ns", seconds * 1e9).str();
  };
  return "FP8 does not pay: its faster products save " + duration(saved) +
         ", quantizing and unfused epilogues add " + duration(added);
}

void Fp8Assigner::rewrite(Operation *op) {
  if (auto linear = dyn_cast<LinearOp>(op))
    rewriteLinear(linear);
  else
    rewriteMatmul(cast<MatmulOp>(op));
}

LogicalResult Fp8Assigner::run() {
  if (history > 0)
    for (BlockArgument arg : model.getBody().front().getArguments())
      if (model.getArgName(arg) == kFp8ScalingState)
        return model.emitOpError()
               << "has a tensor named '" << kFp8ScalingState
               << "', the name of delayed FP8 scaling's state";
  SmallVector<Operation *> eligible;
  model.getBody().front().walk([&](Operation *op) {
    if (isa<LinearOp, MatmulOp>(op) && !whyNotFp8(op, forward))
      eligible.push_back(op);
  });
  SmallVector<Operation *> chosen;
  if (!rates) {
    chosen = eligible;
  } else {
    // Decided before any rewrite: the model sees the half GEMMs.
    MLIRContext *context = model.getContext();
    for (ArrayRef<Operation *> group : layerGroups(eligible)) {
      if (std::optional<std::string> reason = costReason(group)) {
        for (Operation *op : group)
          op->setAttr(kFp8ReasonAttr, StringAttr::get(context, *reason));
        continue;
      }
      llvm::append_range(chosen, group);
    }
    // Program order, as for gemms=all.
    llvm::sort(chosen, [](Operation *a, Operation *b) {
      return a->isBeforeInBlock(b);
    });
  }
  for (Operation *op : chosen)
    rewrite(op);
  // The reshapes that fed the half operands, where nothing else reads
  // them (canonicalize has run: nothing else is dead).
  Block &body = model.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  mergeTransposes();
  if (table)
    numberColumns();
  return success();
}

struct MpcAssignFp8Pass : impl::MpcAssignFp8PassBase<MpcAssignFp8Pass> {
  using Base::Base;

  void runOnOperation() override {
    if (gemms == Fp8Gemms::None)
      return;
    std::optional<Fp8Rates> rates;
    if (gemms == Fp8Gemms::Auto)
      rates = Fp8Rates{halfTflops * 1e12, fp8Tflops * 1e12, bandwidthGbs * 1e9};
    if (history < 0 || margin < 0 || margin > 32 || (history > 0 && unscaled)) {
      getOperation().emitError()
          << "mpc-assign-fp8: expects history >= 0, margin in [0, 32], and "
             "no history with unscaled";
      return signalPassFailure();
    }
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(Fp8Assigner(model, unscaled, history, margin, rates, numGemms,
                             numQuantized)
                     .run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::mpc
