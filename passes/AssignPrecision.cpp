//===- AssignPrecision.cpp - storage precision of every value -----*- C++ -*-===//
//
// This file implements mpc-assign-precision: Apex's opt levels O0-O3 decided
// at compile time, from each op's PrecisionPolicyOpInterface category.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#define DEBUG_TYPE "mpc-assign-precision"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCASSIGNPRECISIONPASS
#include "passes/Passes.h.inc"

namespace {

bool isFloatTensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && isa<FloatType>(type.getElementType());
}

Type elementOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

/// The wider of two float types: f32 over either half type.
Type widest(Type a, Type b) {
  if (!a)
    return b;
  return a.getIntOrFloatBitWidth() >= b.getIntOrFloatBitWidth() ? a : b;
}

/// Results that stay f32 whatever their op runs in: cross-entropy's loss
/// and attention's logsumexp (a statistic, as softmax's would be).
bool keepsF32Result(Value result) {
  Operation *op = result.getDefiningOp();
  if (isa<CrossEntropyOp, MseLossOp>(op))
    return true;
  if (auto attention = dyn_cast<AttentionOp>(op))
    return result == attention.getLse();
  return false;
}

/// Assigns types within one model.
class PrecisionAssigner {
public:
  PrecisionAssigner(ModelOp model, AmpLevel level, Type half, bool keepNormFp32,
                    MasterWeights masterWeights, llvm::Statistic &numCasts)
      : model(model), level(level), half(half), keepNormFp32(keepNormFp32),
        masterWeights(masterWeights), f32(Float32Type::get(model.getContext())),
        builder(model), numCasts(numCasts) {}

  LogicalResult run();

private:
  /// `value` as `element`, through one cast per (value, type), placed right
  /// after the value's definition so every user shares it.
  Value castTo(Value value, Type element);
  /// The element type `op` runs in, or null to leave it alone.
  FailureOr<Type> computeType(Operation *op);
  bool isNormParameter(Operation *op, unsigned operandIndex) const;
  /// The type a norm's parameter operand keeps, if not the op's type.
  std::optional<Type> normParameterType(Operation *op,
                                        unsigned operandIndex) const;

  ModelOp model;
  AmpLevel level;
  Type half;
  bool keepNormFp32;
  MasterWeights masterWeights;
  Type f32;
  OpBuilder builder;
  llvm::Statistic &numCasts;
  llvm::DenseMap<std::pair<Value, Type>, Value> casts;
};

Value PrecisionAssigner::castTo(Value value, Type element) {
  if (elementOf(value) == element)
    return value;
  auto [it, inserted] = casts.try_emplace({value, element}, Value());
  if (!inserted)
    return it->second;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointAfterValue(value);
  auto type = cast<RankedTensorType>(value.getType()).clone(element);
  it->second = CastOp::create(builder, value.getLoc(), type, value);
  ++numCasts;
  return it->second;
}

std::optional<Type>
PrecisionAssigner::normParameterType(Operation *op,
                                     unsigned operandIndex) const {
  if (!isNormParameter(op, operandIndex) || op->hasAttr("mpc.precision"))
    return std::nullopt;
  // Without master weights a norm's parameters are stored in bf16: its
  // kernels read them as stored (they compute in f32), with no cast. Batch
  // norm's running statistics stay f32 state all the same.
  Value operand = op->getOperand(operandIndex);
  bool storedParam = masterWeights != MasterWeights::F32 &&
                     isa<BlockArgument>(operand) &&
                     llvm::is_contained(ModelOp(model).getParams(), operand);
  // Batch norm's running statistics are f32 state it updates in place, so
  // its affine parameters stay f32 with them (but stored bf16 parameters).
  if (isa<BatchNormOp>(op))
    return storedParam ? elementOf(operand) : f32;
  if (!keepNormFp32)
    return std::nullopt;
  if (storedParam)
    return elementOf(operand);
  return f32;
}

bool PrecisionAssigner::isNormParameter(Operation *op,
                                        unsigned operandIndex) const {
  // gamma and beta (and batch norm's running statistics) follow operand 0.
  return isa<LayerNormOp, RmsNormOp, BatchNormOp>(op) && operandIndex > 0;
}

FailureOr<Type> PrecisionAssigner::computeType(Operation *op) {
  if (auto attr = op->getAttrOfType<StringAttr>("mpc.precision")) {
    StringRef name = attr.getValue();
    if (name == "f32")
      return f32;
    if (name == "f16")
      return Type(Float16Type::get(op->getContext()));
    if (name == "bf16")
      return Type(BFloat16Type::get(op->getContext()));
    return op->emitError() << "mpc.precision must be \"f32\", \"f16\" or "
                              "\"bf16\", got \""
                           << name << "\"";
  }
  auto policy = dyn_cast<PrecisionPolicyOpInterface>(op);
  if (!policy || isa<CastOp>(op))
    return Type();
  // A constant operand does not widen an op, as a Python scalar does not in
  // PyTorch's type promotion: where(mask, scores, -inf) stays in half.
  Type first, wide, wideConstant;
  for (Value operand : op->getOperands()) {
    if (!isFloatTensor(operand))
      continue;
    first = first ? first : elementOf(operand);
    if (operand.getDefiningOp<ConstantOp>())
      wideConstant = widest(wideConstant, elementOf(operand));
    else
      wide = widest(wide, elementOf(operand));
  }
  if (!wide)
    wide = wideConstant;
  switch (policy.getPrecisionClass()) {
  case PrecisionClass::Lower:
    return half;
  case PrecisionClass::KeepF32:
    // O1 stores their results in f32, as autocast does. O2 and O3 keep
    // activations in half; the kernels still compute in f32.
    return level == AmpLevel::O1 ? f32 : half;
  case PrecisionClass::Promote:
    return wide;
  case PrecisionClass::Follow:
    return first;
  }
  llvm_unreachable("unknown precision class");
}

LogicalResult PrecisionAssigner::run() {
  // Algorithm:
  // 1. O3 (and O2 without master weights) stores parameters in half; O2
  //    and O3 cast every float input and parameter (but norm parameters
  //    kept in f32) to half once, at the top.
  // 2. Walk the body in program order. For each op, find the element type it
  //    runs in from its category (or an mpc.precision override), cast its
  //    float operands to that type, and give its float results that type
  //    (cross-entropy's loss stays f32).
  // 3. Cast the loss and the extra outputs back to their declared types.
  if (masterWeights != MasterWeights::F32) {
    StringRef option = stringifyMasterWeights(masterWeights);
    if (level != AmpLevel::O2)
      return model.emitError()
             << "master-weights=" << option
             << " needs O2 with bf16: it stores the parameters in bf16 in "
                "place of O2's f32 master weights";
    if (!half.isBF16())
      return model.emitError()
             << "master-weights=" << option << " needs bf16, not " << half
             << ": f16's 10-bit mantissa and narrow range lose updates "
                "without f32 master weights";
    if (masterWeights == MasterWeights::Nearest)
      model.emitWarning() << "master-weights=nearest rounds every update of "
                             "the bf16 parameters to nearest: small updates "
                             "round away (none rounds stochastically)";
  }
  if (level == AmpLevel::O0)
    return success();
  Block &body = model.getBody().front();
  OutputOp output = model.getOutputOp();
  SmallVector<Type> declaredOutputs;
  for (Value value : output->getOperands())
    declaredOutputs.push_back(value.getType());

  bool halfParams =
      level == AmpLevel::O3 || masterWeights != MasterWeights::F32;
  if (level == AmpLevel::O3) {
    InFlightDiagnostic warning =
        model.emitWarning()
        << "--amp=O3 stores parameters in " << half
        << " and updates them there: there are no f32 master weights, so "
           "small updates can round away";
    if (half.isBF16())
      warning << " (--amp=O2 --master-weights=none stores them in bf16 and "
                 "rounds each update stochastically)";
  }
  if (halfParams) {
    for (BlockArgument param : model.getParams())
      param.setType(cast<RankedTensorType>(param.getType()).clone(half));
  }
  if (level == AmpLevel::O2 || level == AmpLevel::O3) {
    SmallVector<Value> modelValues(model.getInputs());
    llvm::append_range(modelValues, model.getParams());
    for (Value value : modelValues) {
      if (!isFloatTensor(value) || elementOf(value) == half)
        continue;
      SmallVector<OpOperand *> halfUses;
      for (OpOperand &use : value.getUses()) {
        Operation *user = use.getOwner();
        // An op overridden with mpc.precision reads the value as declared,
        // not rounded to half first.
        bool keepsF32 = isa<OutputOp>(user) ||
                        user->hasAttr("mpc.precision") ||
                        normParameterType(user, use.getOperandNumber());
        if (!keepsF32)
          halfUses.push_back(&use);
      }
      if (halfUses.empty())
        continue;
      Value halfValue = castTo(value, half);
      for (OpOperand *use : halfUses)
        use->set(halfValue);
    }
  }

  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    if (!isa<CastOp>(op))
      ops.push_back(&op);
  for (Operation *op : ops) {
    FailureOr<Type> type = computeType(op);
    if (failed(type))
      return failure();
    if (!*type)
      continue;
    for (OpOperand &operand : op->getOpOperands())
      if (isFloatTensor(operand.get()))
        operand.set(castTo(operand.get(),
                           normParameterType(op, operand.getOperandNumber())
                               .value_or(*type)));
    for (Value result : op->getResults())
      if (isFloatTensor(result) && !keepsF32Result(result))
        result.setType(cast<RankedTensorType>(result.getType()).clone(*type));
  }

  for (auto [operand, declared] :
       llvm::zip(output->getOpOperands(), declaredOutputs))
    operand.set(castTo(operand.get(),
                       cast<RankedTensorType>(declared).getElementType()));
  return success();
}

struct MpcAssignPrecisionPass
    : impl::MpcAssignPrecisionPassBase<MpcAssignPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    MLIRContext *context = &getContext();
    Type halfType = half == HalfType::F16 ? Type(Float16Type::get(context))
                                          : Type(BFloat16Type::get(context));
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(PrecisionAssigner(model, level, halfType, keepNormFp32,
                                   masterWeights, numCasts)
                     .run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace mlir::mpc
