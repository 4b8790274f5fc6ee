//===- CheckNumerics.cpp - lint values that vanish in half ---------*- C++ -*-===//
//
// This file implements mpc-check-numerics: warnings, at the op a user wrote,
// for constants, scale factors and norm epsilons that round to 0, to a
// subnormal or to infinity in the precision they are used in, and for
// keep_f32 ops that an override runs in half.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cstdio>
#include <optional>

#define DEBUG_TYPE "mpc-check-numerics"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCCHECKNUMERICSPASS
#include "passes/Passes.h.inc"

namespace {

std::string format(const char *spec, double value) {
  char text[32];
  std::snprintf(text, sizeof(text), spec, value);
  return text;
}

std::string typeName(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  type.print(os);
  return text;
}

FloatType floatElementOf(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type ? dyn_cast<FloatType>(type.getElementType()) : FloatType();
}

bool isHalf(FloatType type) { return type && type.getWidth() == 16; }

/// What becomes of `value` in `type`, as `"<value> rounds to 0 in f16;
/// smallest normal is 6.1e-05"`, or nothing when it stays a normal number.
/// Zeros, infinities and NaNs are taken as meant.
std::optional<std::string> describeRounding(APFloat value, FloatType type) {
  if (value.isZero() || value.isInfinity() || value.isNaN())
    return std::nullopt;
  std::string original = format("%g", value.convertToDouble());
  const llvm::fltSemantics &semantics = type.getFloatSemantics();
  bool losesInfo = false;
  value.convert(semantics, APFloat::rmNearestTiesToEven, &losesInfo);
  std::string name = typeName(type);
  std::string smallestNormal = format(
      "%.2g", APFloat::getSmallestNormalized(semantics).convertToDouble());
  if (value.isZero())
    return original + " rounds to 0 in " + name + "; smallest normal is " +
           smallestNormal;
  if (value.isDenormal())
    return original + " is subnormal in " + name +
           (losesInfo ? " and rounds to " + format("%g", value.convertToDouble())
                      : std::string(", with fewer significant bits")) +
           "; smallest normal is " + smallestNormal;
  if (value.isInfinity())
    return original + " overflows to inf in " + name +
           "; largest finite value is " +
           format("%g", APFloat::getLargest(semantics).convertToDouble());
  return std::nullopt;
}

/// The first value of `constant` that does not survive `type`.
std::optional<std::string> describeConstant(ConstantOp constant,
                                            FloatType type) {
  auto dense = dyn_cast<DenseFPElementsAttr>(constant.getValue());
  if (!dense)
    return std::nullopt;
  if (dense.isSplat())
    return describeRounding(dense.getSplatValue<APFloat>(), type);
  for (APFloat value : dense.getValues<APFloat>())
    if (std::optional<std::string> message = describeRounding(value, type))
      return message;
  return std::nullopt;
}

/// Ops that move a value without changing it: a constant seen through them
/// is used at the type they are cast to.
bool movesValues(Operation *op) {
  return isa<ReshapeOp, BroadcastOp, TransposeOp, SliceOp>(op);
}

class NumericsChecker {
public:
  NumericsChecker(bool werror, llvm::Statistic &numFindings)
      : werror(werror), numFindings(numFindings) {}

  void check(Operation *op);
  /// A static loss scale must be finite in the half type the model's
  /// backward pass runs in: the loss gradient starts as the scale itself.
  void checkLossScale(ModelOp model, double scale);
  void checkOptimizerEps(ModelOp model, double eps);
  bool foundAny() const { return found; }

private:
  InFlightDiagnostic report(Operation *op) {
    found = true;
    ++numFindings;
    return werror ? op->emitError() : op->emitWarning();
  }
  void checkConstant(ConstantOp constant);
  void checkNorm(Operation *op, Value input, Value gamma, double eps);
  void checkOverride(Operation *op);

  bool werror;
  llvm::Statistic &numFindings;
  bool found = false;
};

void NumericsChecker::check(Operation *op) {
  if (auto constant = dyn_cast<ConstantOp>(op))
    return checkConstant(constant);
  if (auto scale = dyn_cast<ScaleOp>(op)) {
    FloatType type = floatElementOf(scale.getResult());
    if (std::optional<std::string> message =
            describeRounding(scale.getFactor(), type))
    {
      InFlightDiagnostic diag = report(op);
      diag << "scale factor " << *message;
      diag.attachNote() << "'mpc.scale' runs on " << typeName(type)
                        << " values here";
    }
    return;
  }
  if (auto clamp = dyn_cast<ClampOp>(op)) {
    // The kernel compares in f32 and stores the bound itself where it
    // clamps: a bound that does not survive the result type is not where
    // the values end up.
    FloatType type = floatElementOf(clamp.getResult());
    for (auto [name, bound] :
         {std::pair{"min", clamp.getMin()}, {"max", clamp.getMax()}}) {
      if (!bound)
        continue;
      if (std::optional<std::string> message = describeRounding(*bound, type)) {
        InFlightDiagnostic diag = report(op);
        diag << "clamp " << name << " " << *message;
        diag.attachNote() << "'mpc.clamp' runs on " << typeName(type)
                          << " values here";
      }
    }
    return;
  }
  if (auto norm = dyn_cast<LayerNormOp>(op))
    checkNorm(op, norm.getInput(), norm.getGamma(),
              norm.getEps().convertToDouble());
  else if (auto norm = dyn_cast<RmsNormOp>(op))
    checkNorm(op, norm.getInput(), norm.getGamma(),
              norm.getEps().convertToDouble());
  else if (auto norm = dyn_cast<BatchNormOp>(op))
    checkNorm(op, norm.getInput(), norm.getGamma(),
              norm.getEps().convertToDouble());
  checkOverride(op);
}

void NumericsChecker::checkConstant(ConstantOp constant) {
  FloatType own = floatElementOf(constant.getResult());
  if (!own)
    return;
  // In its own type a value can only be subnormal: the parser has rounded
  // it already, so a 0 or an inf there is what the user wrote.
  if (std::optional<std::string> message = describeConstant(constant, own)) {
    report(constant) << "constant " << *message;
    return;
  }
  // Each type it is cast to, once, with a note at an op that uses it there.
  llvm::SmallPtrSet<Type, 2> reported;
  SmallVector<Value> worklist = {constant.getResult()};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (movesValues(user)) {
        worklist.push_back(user->getResult(0));
        continue;
      }
      auto cast = dyn_cast<CastOp>(user);
      if (!cast)
        continue;
      FloatType type = floatElementOf(cast.getResult());
      if (!reported.insert(type).second)
        continue;
      std::optional<std::string> message = describeConstant(constant, type);
      if (!message)
        continue;
      InFlightDiagnostic diag = report(constant);
      diag << "constant " << *message;
      Operation *use = cast;
      if (!cast->use_empty())
        use = *cast->user_begin();
      diag.attachNote(use->getLoc()) << "used in " << typeName(type) << " here";
    }
  }
}

void NumericsChecker::checkNorm(Operation *op, Value input, Value gamma,
                                double eps) {
  // With f32 parameters the kernel adds eps in f32 (O1, and O2 with
  // keep-norm-fp32); the op runs in half when its parameters are half or
  // the model stores its parameters in half (O3).
  FloatType type = floatElementOf(input);
  if (!isHalf(type))
    return;
  bool halfParameters = isHalf(floatElementOf(gamma));
  bool halfModel = false;
  if (auto model = op->getParentOfType<ModelOp>())
    halfModel = llvm::any_of(model.getParams(), [](BlockArgument param) {
      return isHalf(floatElementOf(param));
    });
  if (!halfParameters && !halfModel)
    return;
  std::optional<std::string> message = describeRounding(APFloat(eps), type);
  if (!message)
    return;
  InFlightDiagnostic diag = report(op);
  diag << "eps " << *message;
  if (halfParameters)
    diag.attachNote() << "'" << op->getName() << "' runs in "
                      << typeName(type) << ": its input and parameters are "
                      << typeName(type);
  else
    diag.attachNote() << "the model stores its parameters in "
                      << typeName(type) << " (--amp=O3)";
}

void NumericsChecker::checkOverride(Operation *op) {
  auto policy = dyn_cast<PrecisionPolicyOpInterface>(op);
  auto attr = op->getAttrOfType<StringAttr>("mpc.precision");
  if (!policy || !attr || policy.getPrecisionClass() != PrecisionClass::KeepF32)
    return;
  // Only where the override took effect (O0 ignores it).
  bool runsInHalf = llvm::any_of(op->getOperands(), [&](Value operand) {
    FloatType type = floatElementOf(operand);
    return isHalf(type) && typeName(type) == attr.getValue();
  });
  if (!runsInHalf)
    return;
  InFlightDiagnostic diag = report(op);
  diag << "'" << op->getName() << "' is keep_f32 but mpc.precision forces it "
       << "into " << attr.getValue();
  diag.attachNote() << "mpc.precision = \"f32\" keeps it in f32";
}

void NumericsChecker::checkLossScale(ModelOp model, double scale) {
  // The narrowest half type any value of the model is stored in.
  FloatType half;
  model.walk([&](Operation *op) {
    for (Value result : op->getResults())
      if (auto type = dyn_cast<RankedTensorType>(result.getType()))
        if (auto element = dyn_cast<FloatType>(type.getElementType());
            element && element.getWidth() == 16 &&
            (!half || element.isF16()))
          half = element;
  });
  if (!half)
    return;
  APFloat largest = APFloat::getLargest(half.getFloatSemantics());
  if (scale <= largest.convertToDouble())
    return;
  InFlightDiagnostic diag = report(model);
  diag << "static loss scale " << formatDecimal(scale) << " overflows "
       << typeName(half) << " (largest finite value "
       << formatDecimal(largest.convertToDouble())
       << "): the scaled loss and its gradients are inf in "
       << typeName(half) << ", so every step would overflow";
}

void NumericsChecker::checkOptimizerEps(ModelOp model, double eps) {
  // Adam's moments are stored like the parameters: f32 next to f32 master
  // weights (O0-O2), half at O3, where eps meets a half second moment.
  if (model.getNumParams() == 0)
    return;
  FloatType type = floatElementOf(model.getParams().front());
  if (!isHalf(type))
    return;
  std::optional<std::string> message = describeRounding(APFloat(eps), type);
  if (!message)
    return;
  InFlightDiagnostic diag = report(model);
  diag << "optimizer eps " << *message;
  diag.attachNote() << "the model stores its parameters, and so Adam's "
                    << "moments, in " << typeName(type)
                    << " (--amp=O3); --amp=O2 keeps f32 master weights and "
                    << "moments";
}

struct MpcCheckNumericsPass
    : impl::MpcCheckNumericsPassBase<MpcCheckNumericsPass> {
  using Base::Base;

  void runOnOperation() override {
    NumericsChecker checker(werror, numFindings);
    getOperation().walk([&](Operation *op) { checker.check(op); });
    if (staticLossScale > 0)
      for (ModelOp model : getOperation().getOps<ModelOp>())
        checker.checkLossScale(model, staticLossScale);
    if (optimizerEps > 0)
      for (ModelOp model : getOperation().getOps<ModelOp>())
        checker.checkOptimizerEps(model, optimizerEps);
    if (werror && checker.foundAny())
      signalPassFailure();
  }
};

} // namespace
} // namespace mlir::mpc
