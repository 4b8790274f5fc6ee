//===- EmitElementwise.cpp - fused elementwise kernels ------------*- C++ -*-===//
//
// This file implements emitFusedElementwise: one kernel for a group of
// elementwise ops of one result shape. Operands from outside the group are
// loaded with NumPy broadcasting; values inside stay in registers, rounded
// to their storage type after every op so that fusing never changes a
// result; values read after the group are stored.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::mpc;

int64_t mlir::mpc::elementwiseFlops(Operation *op, bool training) {
  return llvm::TypeSwitch<Operation *, int64_t>(op)
      .Case<AddOp, SubOp, MulOp, DivOp, NegOp, ScaleOp, TanhOp, ExpOp, LogOp,
            SqrtOp>([](Operation *) { return 1; })
      .Case([](RsqrtOp) { return 2; })    // 1 / sqrtf(x) on the cpu
      .Case([](SigmoidOp) { return 4; })  // 1 / (1 + exp(-x))
      .Case([](SiluOp) { return 5; })     // x * sigmoid(x)
      .Case([](SiluGradOp) { return 9; }) // sigmoid, then 5 more
      .Case([](GeluOp gelu) {
        return gelu.getApproximate() == GeluApproximation::Tanh ? 9 : 5;
      })
      .Case([](GeluGradOp grad) {
        return grad.getApproximate() == GeluApproximation::Tanh ? 19 : 11;
      })
      .Case<TanhGradOp, SigmoidGradOp>([](Operation *) { return 3; })
      .Case([&](DropoutOp dropout) {
        return training && !dropout.getRate().isZero() ? 1 : 0;
      })
      .Default([](Operation *) { return 0; });
}

namespace {

/// Coordinate expressions of one element of a tensor, one per dim.
using Coordinates = SmallVector<std::string, 4>;

/// Builds the body of one loop kernel: every element of the group's results
/// (which share a shape) is computed by pulling each value it needs at the
/// coordinates it needs it. Elementwise ops read their operands at the same
/// coordinates (broadcast dims at 0); views only re-index: reshape,
/// transpose, slice and broadcast map coordinates, slice_grad reads its
/// gradient where the slice took the element and is 0 elsewhere. A value
/// needed twice at the same coordinates is computed once.
class FusedKernelBuilder {
public:
  FusedKernelBuilder(ArrayRef<Operation *> ops, StepEmitter &emitter,
                     std::string namePrefix = "")
      : ops(ops), emitter(emitter), namePrefix(std::move(namePrefix)) {}

  /// The whole kernel of a loop group.
  LogicalResult build();
  /// A device function computing `result` at linear index `i` (see
  /// ElementFunction), with `seed` given by the caller.
  FailureOr<ElementFunction> buildFunction(Value result, Value seed,
                                           StringRef name);

private:
  bool inGroup(Value value) const {
    Operation *def = value.getDefiningOp();
    return def && llvm::is_contained(ops, def);
  }
  /// Sets the loop's shape and coordinates c0, c1, ... (decoded from `i`).
  void setShape(Value value);
  /// `long long cD = (i / stride) % extent;` for every coordinate the code
  /// reads.
  std::string coordinateDeclarations(const std::string &code) const;
  /// The value at `coordinates` (in its shape): a register, a literal or a
  /// load. `domain` is how many distinct elements of it the kernel may need
  /// (for the cost of a load).
  FailureOr<std::string> valueAt(Value value, const Coordinates &coordinates,
                                 int64_t domain);
  FailureOr<std::string> opAt(Operation *op, const Coordinates &coordinates,
                              int64_t domain);
  /// The expression of an elementwise op from its operands' registers.
  FailureOr<std::string> expression(Operation *op, ArrayRef<std::string> in,
                                    const Coordinates &coordinates);
  std::string load(Value value, const Coordinates &coordinates, int64_t domain);
  /// The element of a batch norm applied where it is read
  /// (MemoryPlan::appliedWhereRead).
  std::string appliedBatchNorm(BatchNormOp norm, const Coordinates &coordinates,
                               int64_t domain);
  /// The element of a max pooling's input gradient gathered where it is
  /// read (MemoryPlan::gatheredWhereRead).
  std::string gatheredPoolGradient(MaxPool2dIndicesGradOp pool,
                                   const Coordinates &coordinates,
                                   int64_t domain);
  /// The parameter through which the function reads `value` (declared on
  /// first use), `domain` more of its elements counted as read.
  std::string inputPointer(Value value, int64_t domain);
  /// The row-major element offset of `coordinates` in `shape`.
  std::string offset(ArrayRef<int64_t> shape, const Coordinates &coordinates);
  /// Declares `long long xN = <expression>;` and returns xN.
  std::string index(const std::string &expression);
  std::string fresh() { return "v" + std::to_string(nextRegister++); }
  void statement(const std::string &line) {
    body += std::string(4 + 2 * depth, ' ') + line + "\n";
  }

  ArrayRef<Operation *> ops;
  StepEmitter &emitter;
  std::string namePrefix;     ///< of parameters, for a function in a kernel
  SmallVector<int64_t> shape; ///< of the results: the loop's elements
  Coordinates root;           ///< c0, c1, ...: the loop's element
  /// Computed values by (value, coordinates), one map per open `if`.
  SmallVector<std::map<std::pair<void *, std::string>, std::string>, 2> known{
      {}};
  llvm::DenseMap<Value, std::string> inputNames;
  llvm::DenseMap<Value, int64_t> inputDomain;
  SmallVector<Value> inputOrder;
  SmallVector<std::string> parameters, arguments;
  std::string body;
  int depth = 0;
  bool needsRandom = false;
  int nextRegister = 0, nextIndex = 0;
  /// Every operand loaded once, every materialised result stored once.
  KernelCost cost;
};

std::string FusedKernelBuilder::offset(ArrayRef<int64_t> valueShape,
                                       const Coordinates &coordinates) {
  if (ArrayRef<int64_t>(shape) == valueShape &&
      ArrayRef<std::string>(coordinates) == ArrayRef<std::string>(root))
    return "i";
  SmallVector<int64_t> strides = rowMajorStrides(valueShape);
  std::string sum;
  for (auto [d, extent] : llvm::enumerate(valueShape)) {
    if (extent == 1)
      continue;
    if (!sum.empty())
      sum += " + ";
    sum += coordinates[d] + " * " + std::to_string(strides[d]) + "LL";
  }
  return sum.empty() ? "0" : sum;
}

std::string FusedKernelBuilder::index(const std::string &expression) {
  // A constant index needs no variable (an unread one is a warning).
  if (!expression.empty() && llvm::all_of(expression, llvm::isDigit))
    return expression;
  std::string name = "x" + std::to_string(nextIndex++);
  statement("long long " + name + " = " + expression + ";");
  return name;
}

std::string FusedKernelBuilder::inputPointer(Value value, int64_t domain) {
  auto type = cast<RankedTensorType>(value.getType());
  auto [it, added] = inputNames.try_emplace(value);
  if (added) {
    it->second = namePrefix + "in" + std::to_string(parameters.size());
    parameters.push_back("const " + cType(type.getElementType()) +
                         " *__restrict__ " + it->second);
    arguments.push_back(emitter.constPointer(value));
    inputOrder.push_back(value);
  }
  inputDomain[value] += domain;
  return it->second;
}

std::string FusedKernelBuilder::load(Value value,
                                     const Coordinates &coordinates,
                                     int64_t domain) {
  auto type = cast<RankedTensorType>(value.getType());
  std::string pointer = inputPointer(value, domain);
  std::string reg = fresh();
  std::string at = offset(type.getShape(), coordinates);
  if (type.getElementType().isInteger(1))
    statement(llvm::formatv("bool {0} = {1}[{2}] != 0;", reg, pointer, at));
  else
    statement(
        llvm::formatv("float {0} = mpc_load({1} + {2});", reg, pointer, at));
  return reg;
}

std::string
FusedKernelBuilder::gatheredPoolGradient(MaxPool2dIndicesGradOp pool,
                                         const Coordinates &coordinates,
                                         int64_t domain) {
  // max_pool2d_indices_grad's routing (EmitBackward.cpp routeMaxPoolGrad)
  // at pixel (iy, ix) of plane (n, c): from 0, the window gradients whose
  // argmax (the pixel's position in the window) it is, windows in order
  // (oy, then ox); then rounded to the result's type as its store would.
  // Each window's gradient and argmax are read by the few pixels of its
  // window (from L2 after the first): counted once.
  auto in = pool.getResult().getType();
  auto out = pool.getGrad().getType();
  int64_t channels = in.getDimSize(1), h = in.getDimSize(2),
          w = in.getDimSize(3);
  int64_t oh = out.getDimSize(2), ow = out.getDimSize(3);
  ArrayRef<int64_t> kernel = pool.getKernel(), stride = pool.getStride(),
                    padding = pool.getPadding();
  int64_t windows = std::min(domain, out.getNumElements());
  std::string grad = inputPointer(pool.getGrad(), windows);
  std::string argmax = inputPointer(pool.getIndices(), windows);
  // As the routing kernel: issue-bound, so its offsets in int where the
  // tensors' fit, and the loop's own element found from i directly.
  bool narrow =
      std::max(in.getNumElements(), out.getNumElements()) <= INT32_MAX &&
      ArrayRef<std::string>(coordinates) == ArrayRef<std::string>(root);
  StringRef integer = narrow ? "int" : "long long";
  StringRef suffix = narrow ? "" : "LL";
  std::string sum = fresh();
  statement("float " + sum + " = 0.0f;");
  statement("{");
  ++depth;
  if (narrow)
    statement(llvm::formatv("int at = (int)i, plane = at / {0} * {1}, iy = "
                            "(at / {2}) % {3}, ix = at % {2};",
                            h * w, oh * ow, w, h));
  else
    statement(llvm::formatv("long long plane = ({0} * {1}LL + {2}) * {3}LL, "
                            "iy = {4}, ix = {5};",
                            coordinates[0], channels, coordinates[1], oh * ow,
                            coordinates[2], coordinates[3]));
  auto range = [&](StringRef o, StringRef at, int64_t k, int64_t s, int64_t p,
                   int64_t extent) {
    statement(llvm::formatv("{4} {0}_lo_num = {1} + {2}{5} - {3}{5} + 1;", o,
                            at, p, k, integer, suffix));
    statement(llvm::formatv("{2} {0}_lo = {0}_lo_num <= 0 ? 0 : "
                            "({0}_lo_num + {1}{3} - 1) / {1}{3};",
                            o, s, integer, suffix));
    statement(llvm::formatv("{4} {0}_hi = ({1} + {2}{5}) / {3}{5};", o, at, p,
                            s, integer, suffix));
    statement(llvm::formatv("if ({0}_hi > {1}{2}) {0}_hi = {1}{2};", o,
                            extent - 1, suffix));
  };
  range("oy", "iy", kernel[0], stride[0], padding[0], oh);
  range("ox", "ix", kernel[1], stride[1], padding[1], ow);
  statement(llvm::formatv("for ({0} oy = oy_lo; oy <= oy_hi; ++oy)", integer));
  statement(llvm::formatv(
      "  for ({10} ox = ox_lo; ox <= ox_hi; ++ox)\n"
      "{0}    if ({1}[plane + oy * {2}{11} + ox] == (iy - (oy * {3}{11} - "
      "{4}{11})) * {5}{11} + ix - (ox * {6}{11} - {7}{11}))\n"
      "{0}      {8} += mpc_load({9} + plane + oy * {2}{11} + ox);",
      std::string(4 + 2 * depth, ' '), argmax, ow, stride[0], padding[0],
      kernel[1], stride[1], padding[1], sum, grad, integer, suffix));
  --depth;
  statement("}");
  Type element = in.getElementType();
  std::string stored = sum;
  if (element.isF16())
    stored = "__half2float(__float2half_rn(" + sum + "))";
  else if (element.isBF16())
    stored = "__bfloat162float(__float2bfloat16_rn(" + sum + "))";
  if (stored == sum)
    return sum;
  std::string reg = fresh();
  statement("float " + reg + " = " + stored + ";");
  return reg;
}

std::string FusedKernelBuilder::appliedBatchNorm(BatchNormOp norm,
                                                 const Coordinates &coordinates,
                                                 int64_t domain) {
  // The norm's kernels compute (x - mean) * rstd, then store
  // normalised * gamma + beta rounded to the result's type; the statistics
  // are those they normalised with (mean in row 0, rstd in row 1).
  std::string x = load(norm.getInput(), coordinates, domain);
  const std::string &channel = coordinates[1];
  std::string mean = load(norm.getStats(), {"0", channel}, domain);
  std::string rstd = load(norm.getStats(), {"1", channel}, domain);
  std::string gamma = load(norm.getGamma(), {channel}, domain);
  std::string beta = load(norm.getBeta(), {channel}, domain);
  std::string normalised = fresh();
  statement(llvm::formatv("float {0} = ({1} - {2}) * {3};", normalised, x,
                          mean, rstd));
  std::string stored = llvm::formatv("{0} * {1} + {2}", normalised, gamma, beta);
  Type element = norm.getResult().getType().getElementType();
  if (element.isF16())
    stored = "__half2float(__float2half_rn(" + stored + "))";
  else if (element.isBF16())
    stored = "__bfloat162float(__float2bfloat16_rn(" + stored + "))";
  std::string reg = fresh();
  statement("float " + reg + " = " + stored + ";");
  return reg;
}

/// Coordinates of an operand of `resultShape` broadcast NumPy-style.
static Coordinates broadcastCoordinates(ArrayRef<int64_t> resultShape,
                                        ArrayRef<int64_t> operandShape,
                                        const Coordinates &coordinates) {
  Coordinates mapped;
  int64_t lead = resultShape.size() - operandShape.size();
  for (auto [d, extent] : llvm::enumerate(operandShape))
    mapped.push_back(extent == 1 && resultShape[lead + d] != 1
                         ? std::string("0")
                         : coordinates[lead + d]);
  return mapped;
}

FailureOr<std::string>
FusedKernelBuilder::valueAt(Value value, const Coordinates &coordinates,
                            int64_t domain) {
  std::pair<void *, std::string> key{value.getAsOpaquePointer(),
                                     llvm::join(coordinates, ",")};
  for (auto &scope : known)
    if (auto it = scope.find(key); it != scope.end())
      return it->second;
  std::string result;
  if (inGroup(value)) {
    FailureOr<std::string> computed =
        opAt(value.getDefiningOp(), coordinates, domain);
    if (failed(computed))
      return failure();
    result = *computed;
  } else if (auto constant = value.getDefiningOp<ConstantOp>();
             constant && !emitter.getPlan().isMaterialised(value)) {
    // A splat constant nobody materialised is a literal.
    auto splat = cast<SplatElementsAttr>(constant.getValue());
    result = floatLiteral(splat.getSplatValue<APFloat>().convertToDouble());
  } else if (BatchNormOp norm = emitter.getPlan().appliedWhereRead(value)) {
    result = appliedBatchNorm(norm, coordinates, domain);
  } else if (MaxPool2dIndicesGradOp pool =
                 emitter.getPlan().gatheredWhereRead(value)) {
    result = gatheredPoolGradient(pool, coordinates, domain);
  } else {
    result = load(
        value, coordinates,
        std::min(domain,
                 cast<RankedTensorType>(value.getType()).getNumElements()));
  }
  known.back()[key] = result;
  return result;
}

FailureOr<std::string> FusedKernelBuilder::opAt(Operation *op,
                                                const Coordinates &coordinates,
                                                int64_t domain) {
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  ArrayRef<int64_t> resultShape = resultType.getShape();
  // Views: the same element of the operand, found by index arithmetic.
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    ArrayRef<int64_t> inShape = reshape.getInput().getType().getShape();
    std::string linear = index(offset(resultShape, coordinates));
    SmallVector<int64_t> strides = rowMajorStrides(inShape);
    Coordinates in;
    for (auto [d, extent] : llvm::enumerate(inShape))
      in.push_back(extent == 1 ? "0"
                               : llvm::formatv("(({0} / {1}LL) % {2}LL)",
                                               linear, strides[d], extent)
                                     .str());
    return valueAt(reshape.getInput(), in, domain);
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    Coordinates in(coordinates.size());
    for (auto [d, p] : llvm::enumerate(transpose.getPermutation()))
      in[p] = coordinates[d];
    return valueAt(transpose.getInput(), in, domain);
  }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    SmallVector<int64_t> strides = slice.getStridesOrDefault();
    Coordinates in;
    for (auto [d, start] : llvm::enumerate(slice.getStarts())) {
      std::string c = coordinates[d];
      if (strides[d] != 1)
        c = "(" + c + " * " + std::to_string(strides[d]) + "LL)";
      in.push_back(
          start == 0 ? c : "(" + c + " + " + std::to_string(start) + "LL)");
    }
    return valueAt(slice.getInput(), in, domain);
  }
  if (auto broadcast = dyn_cast<BroadcastOp>(op))
    return valueAt(broadcast.getInput(),
                   broadcastCoordinates(
                       resultShape, broadcast.getInput().getType().getShape(),
                       coordinates),
                   domain);
  if (auto grad = dyn_cast<SliceGradOp>(op)) {
    // 0 where the slice did not take the element; the gradient is read
    // only where it did.
    auto gradType = grad.getGrad().getType();
    std::string taken;
    Coordinates in;
    for (int64_t d = 0; d < resultType.getRank(); ++d) {
      int64_t start = grad.getStarts()[d], stride = grad.getStrides()[d];
      if (start == 0 && stride == 1 &&
          gradType.getDimSize(d) == resultType.getDimSize(d)) {
        in.push_back(coordinates[d]);
        continue;
      }
      std::string relative =
          index(llvm::formatv("{0} - {1}LL", coordinates[d], start).str());
      taken += llvm::formatv("{0}{1} >= 0 && {1} % {2}LL == 0 && {1} / {2}LL "
                             "< {3}LL",
                             taken.empty() ? "" : " && ", relative, stride,
                             gradType.getDimSize(d))
                   .str();
      in.push_back(stride == 1 ? relative
                               : "(" + relative + " / " +
                                     std::to_string(stride) + "LL)");
    }
    if (taken.empty())
      return valueAt(grad.getGrad(), in, domain);
    std::string reg = fresh();
    statement("float " + reg + " = 0.0f;");
    statement("if (" + taken + ") {");
    ++depth;
    known.emplace_back();
    FailureOr<std::string> value = valueAt(
        grad.getGrad(), in, std::min(domain, gradType.getNumElements()));
    if (failed(value))
      return failure();
    statement(reg + " = " + *value + ";");
    known.pop_back();
    --depth;
    statement("}");
    return reg;
  }

  // Elementwise: operands at the same element (broadcast dims at 0), in
  // operand order so that the generated code does not depend on the order
  // in which the host compiler evaluates a `+` chain.
  SmallVector<std::string, 3> in;
  for (Value operand : op->getOperands()) {
    FailureOr<std::string> value = valueAt(
        operand,
        broadcastCoordinates(
            resultShape, cast<RankedTensorType>(operand.getType()).getShape(),
            coordinates),
        domain);
    if (failed(value))
      return failure();
    in.push_back(*value);
  }
  FailureOr<std::string> value = expression(op, in, coordinates);
  if (failed(value))
    return failure();
  // Rounded to the result's storage type, so that fusing never changes a
  // result.
  std::string reg = fresh();
  Type element = resultType.getElementType();
  if (element.isInteger(1))
    statement(llvm::formatv("bool {0} = {1};", reg, *value));
  else if (element.isF16())
    statement(llvm::formatv("float {0} = __half2float(__float2half_rn({1}));",
                            reg, *value));
  else if (element.isBF16())
    statement(
        llvm::formatv("float {0} = __bfloat162float(__float2bfloat16_rn({1}));",
                      reg, *value));
  else
    statement(llvm::formatv("float {0} = {1};", reg, *value));
  cost.flopsPer(domain, elementwiseFlops(op, emitter.isTraining()));
  return reg;
}

FailureOr<std::string>
FusedKernelBuilder::expression(Operation *op, ArrayRef<std::string> in,
                               const Coordinates &coordinates) {
  auto unary = [&](StringRef function) {
    return (function + "(" + in[0] + ")").str();
  };
  auto binary = [&](StringRef symbol) {
    return "(" + in[0] + " " + symbol.str() + " " + in[1] + ")";
  };
  return llvm::TypeSwitch<Operation *, FailureOr<std::string>>(op)
      .Case([&](AddOp) { return binary("+"); })
      .Case([&](SubOp) { return binary("-"); })
      .Case([&](MulOp) { return binary("*"); })
      .Case([&](DivOp) { return binary("/"); })
      .Case([&](NegOp) { return "(-" + in[0] + ")"; })
      .Case([&](ReluOp) {
        // NaN passes through, as torch.relu does, so it stays visible.
        const std::string &x = in[0];
        return "((" + x + " > 0.0f || " + x + " != " + x + ") ? " + x +
               " : 0.0f)";
      })
      .Case([&](TanhOp) { return unary("tanhf"); })
      .Case([&](SigmoidOp) { return unary("mpc_sigmoid"); })
      .Case([&](SiluOp) { return unary("mpc_silu"); })
      .Case([&](ExpOp) { return unary("expf"); })
      .Case([&](LogOp) { return unary("logf"); })
      .Case([&](SqrtOp) { return unary("sqrtf"); })
      .Case([&](RsqrtOp) { return unary("mpc_rsqrt"); })
      .Case([&](GeluOp gelu) {
        return unary(gelu.getApproximate() == GeluApproximation::Tanh
                         ? "mpc_gelu_tanh"
                         : "mpc_gelu_erf");
      })
      .Case([&](ScaleOp scale) {
        return "(" + in[0] + " * " +
               floatLiteral(scale.getFactor().convertToDouble()) + ")";
      })
      .Case([&](ClampOp clamp) {
        // Compares, not fminf/fmaxf: those would turn a NaN into a bound.
        std::string x = in[0];
        if (auto max = clamp.getMax())
          x = "(" + x + " > " + floatLiteral(max->convertToDouble()) + " ? " +
              floatLiteral(max->convertToDouble()) + " : " + x + ")";
        if (auto min = clamp.getMin())
          x = "(" + in[0] + " < " + floatLiteral(min->convertToDouble()) +
              " ? " + floatLiteral(min->convertToDouble()) + " : " + x + ")";
        return x;
      })
      .Case([&](WhereOp) {
        return "(" + in[0] + " ? " + in[1] + " : " + in[2] + ")";
      })
      .Case([&](DropoutOp dropout) -> std::string {
        double rate = dropout.getRate().convertToDouble();
        if (!emitter.isTraining() || rate == 0.0)
          return in[0];
        needsRandom = true;
        // The element's own index in the dropout's result, whichever
        // element of the loop needs it.
        std::string element = offset(dropout.getType().getShape(), coordinates);
        return llvm::formatv("(mpc_uniform(seed, {0}ULL, step, {1}) >= {2} ? "
                             "{3} * {4} : 0.0f)",
                             static_cast<uint64_t>(dropout.getSeed()), element,
                             floatLiteral(rate), in[0],
                             floatLiteral(1.0 / (1.0 - rate)))
            .str();
      })
      .Case([&](CastOp) { return in[0]; })
      .Case([&](CausalMaskOp) {
        size_t rank = coordinates.size();
        return "(" + coordinates[rank - 1] + " <= " + coordinates[rank - 2] +
               ")";
      })
      .Case([&](ConstantOp constant) {
        auto splat = cast<SplatElementsAttr>(constant.getValue());
        return floatLiteral(splat.getSplatValue<APFloat>().convertToDouble());
      })
      .Case([&](ReluGradOp) {
        // operands: grad, input
        return "(" + in[1] + " > 0.0f ? " + in[0] + " : 0.0f)";
      })
      .Case([&](GeluGradOp grad) {
        StringRef derivative = grad.getApproximate() == GeluApproximation::Tanh
                                   ? "mpc_gelu_tanh_grad"
                                   : "mpc_gelu_erf_grad";
        return "(" + in[0] + " * " + derivative.str() + "(" + in[1] + "))";
      })
      .Case([&](TanhGradOp) {
        // operands: grad, output
        return "(" + in[0] + " * (1.0f - " + in[1] + " * " + in[1] + "))";
      })
      .Case([&](SiluGradOp) {
        // operands: grad, input
        return "(" + in[0] + " * mpc_silu_grad(" + in[1] + "))";
      })
      .Case([&](ClampGradOp grad) {
        // operands: grad, input; strictly inside the bounds, as hardtanh.
        std::string inside = "true";
        if (auto min = grad.getMin())
          inside = in[1] + " > " + floatLiteral(min->convertToDouble());
        if (auto max = grad.getMax())
          inside = (grad.getMin() ? inside + " && " : std::string()) + in[1] +
                   " < " + floatLiteral(max->convertToDouble());
        return "((" + inside + ") ? " + in[0] + " : 0.0f)";
      })
      .Case([&](SigmoidGradOp) {
        return "(" + in[0] + " * " + in[1] + " * (1.0f - " + in[1] + "))";
      })
      .Default([&](Operation *op) -> FailureOr<std::string> {
        return op->emitError() << "'" << op->getName()
                               << "' has no elementwise kernel";
      });
}

void FusedKernelBuilder::setShape(Value value) {
  auto type = cast<RankedTensorType>(value.getType());
  shape.assign(type.getShape().begin(), type.getShape().end());
  root.clear();
  for (size_t d = 0; d < shape.size(); ++d)
    root.push_back("c" + std::to_string(d));
}

std::string
FusedKernelBuilder::coordinateDeclarations(const std::string &code) const {
  std::string declarations;
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    std::string name = "c" + std::to_string(d);
    bool used = false;
    for (size_t at = code.find(name); at != std::string::npos && !used;
         at = code.find(name, at + 1)) {
      char before = at ? code[at - 1] : ' ';
      char after =
          at + name.size() < code.size() ? code[at + name.size()] : ' ';
      used = !isalnum(before) && before != '_' && !isdigit(after);
    }
    if (used)
      declarations =
          llvm::formatv("    long long c{0} = (i / {1}LL) % {2}LL;\n", d,
                        strides[d], shape[d])
              .str() +
          declarations;
  }
  return declarations;
}

FailureOr<ElementFunction>
FusedKernelBuilder::buildFunction(Value result, Value seed, StringRef name) {
  setShape(result);
  int64_t n = cast<RankedTensorType>(result.getType()).getNumElements();
  if (seed) {
    // The caller's value, rounded to its storage type as a store would.
    std::string reg = fresh();
    Type element = cast<RankedTensorType>(seed.getType()).getElementType();
    if (element.isF16())
      statement("float " + reg + " = __half2float(__float2half_rn(seed));");
    else if (element.isBF16())
      statement("float " + reg +
                " = __bfloat162float(__float2bfloat16_rn(seed));");
    else
      statement("float " + reg + " = seed;");
    known.back()[{seed.getAsOpaquePointer(), llvm::join(root, ",")}] = reg;
  }
  FailureOr<std::string> value = valueAt(result, root, n);
  if (failed(value))
    return failure();
  if (needsRandom)
    return result.getDefiningOp()->emitError()
           << "dropout cannot be fused into a row kernel";
  for (Value input : inputOrder)
    cost.readsElements(
        std::min(inputDomain.lookup(input),
                 cast<RankedTensorType>(input.getType()).getNumElements()),
        cast<RankedTensorType>(input.getType()).getElementType());
  ElementFunction function;
  function.name = name.str();
  SmallVector<std::string> signature(parameters);
  if (seed)
    signature.push_back("float seed");
  signature.push_back("long long i");
  std::string code = body;
  function.source = llvm::formatv("__device__ float {0}({1}) {{\n{2}{3}"
                                  "    return {4};\n}\n",
                                  name, llvm::join(signature, ", "),
                                  coordinateDeclarations(code), code, *value)
                        .str();
  function.parameters = parameters;
  function.arguments = arguments;
  for (const std::string &parameter : parameters)
    function.parameterNames.push_back(
        parameter.substr(parameter.rfind(' ') + 1));
  function.cost = cost;
  return function;
}

LogicalResult FusedKernelBuilder::build() {
  // The loop runs over the shape of what the group stores (one shape, see
  // mpc.fusion's C3); a group that stores nothing over its last result.
  SmallVector<std::pair<Value, std::string>> stores;
  for (Operation *op : ops)
    for (Value result : op->getResults())
      if (emitter.getPlan().isMaterialised(result))
        stores.push_back({result, ""});
  Value loopValue =
      stores.empty() ? ops.back()->getResult(0) : stores.front().first;
  setShape(loopValue);
  int64_t n = cast<RankedTensorType>(loopValue.getType()).getNumElements();

  std::string storeCode;
  if (stores.empty()) {
    if (failed(valueAt(loopValue, root, n)))
      return failure();
  }
  for (auto &[result, name] : stores) {
    auto type = cast<RankedTensorType>(result.getType());
    if (type.getShape() != ArrayRef<int64_t>(shape))
      return result.getDefiningOp()->emitError()
             << "a loop kernel stores values of one shape";
    FailureOr<std::string> reg = valueAt(result, root, n);
    if (failed(reg))
      return failure();
    name = "out" + std::to_string(parameters.size());
    parameters.push_back(cType(type.getElementType()) + " *__restrict__ " +
                         name);
    arguments.push_back(emitter.pointer(result));
    cost.writes(result);
    if (type.getElementType().isInteger(1))
      storeCode += llvm::formatv("    {0}[i] = {1} ? 1 : 0;\n", name, *reg);
    else
      storeCode += llvm::formatv("    mpc_store({0} + i, {1});\n", name, *reg);
  }
  for (Value input : inputOrder)
    cost.readsElements(
        std::min(inputDomain.lookup(input),
                 cast<RankedTensorType>(input.getType()).getNumElements()),
        cast<RankedTensorType>(input.getType()).getElementType());

  std::string coordinates = coordinateDeclarations(body + storeCode);
  // The step counter is read from the control block, not passed: a CUDA
  // graph replays the arguments it was captured with. The seed is fixed
  // for a session.
  std::string prologue;
  if (needsRandom) {
    parameters.push_back("unsigned long long seed");
    parameters.push_back("const mpc_step_values *__restrict__ values");
    arguments.push_back("ctx->seed");
    arguments.push_back(emitter.stepValuesPointer());
    prologue = "  const long long step = values->step;\n";
  }

  std::string hint = ops.size() == 1
                         ? ops.front()->getName().stripDialect().str()
                         : "fused" + std::to_string(ops.size());
  std::string name = emitter.kernelName(hint);
  std::string source;
  llvm::raw_string_ostream os(source);
  os << "// ";
  llvm::interleave(
      ops, os, [&](Operation *op) { os << op->getName().stripDialect(); },
      ", ");
  os << "\n__global__ void " << name << "(";
  llvm::interleaveComma(parameters, os);
  os << ") {\n"
     << prologue << "  MPC_FOR_EACH(i, " << n << "LL) {\n"
     << coordinates << body << storeCode << "  }\n}\n";
  emitter.addKernel(std::move(source));
  emitter.launch(name, elementwiseGrid(n), 256, arguments, cost);
  return success();
}

} // namespace

LogicalResult mlir::mpc::emitFusedElementwise(const Step &step,
                                              StepEmitter &emitter) {
  // A splat constant folded into its users as a literal needs no kernel.
  if (step.ops.size() == 1 && isa<ConstantOp>(step.ops.front()) &&
      !emitter.getPlan().isMaterialised(step.ops.front()->getResult(0)))
    return success();
  return FusedKernelBuilder(step.ops, emitter).build();
}

int64_t mlir::mpc::castBatchTiles(int64_t elements) {
  return (elements + 4095) / 4096; // MPC_TILE in mpc_device.h
}

bool mlir::mpc::isBatchableCast(const Step &step, const MemoryPlan &plan) {
  if (!step.isFusedElementwise() || step.ops.size() != 1)
    return false;
  auto castOp = dyn_cast<CastOp>(step.ops.front());
  if (!castOp || plan.isElidedGradientCast(castOp))
    return false;
  auto isHalfOrF32 = [](Value value) {
    Type type = cast<RankedTensorType>(value.getType()).getElementType();
    return type.isF32() || type.isF16() || type.isBF16();
  };
  return isHalfOrF32(castOp.getInput()) && isHalfOrF32(castOp.getResult()) &&
         plan.isMaterialised(castOp.getInput()) &&
         plan.isMaterialised(castOp.getResult()) &&
         !plan.isHalfMirror(castOp.getResult());
}

bool mlir::mpc::castsAreIndependent(ArrayRef<const Step *> casts,
                                    const MemoryPlan &plan) {
  auto overlap = [](const Buffer &a, const Buffer &b) {
    return a.arena == b.arena && a.offset < b.offset + b.bytes &&
           b.offset < a.offset + a.bytes;
  };
  for (const Step *step : casts) {
    const Buffer &written = plan.lookup(step->ops.front()->getResult(0));
    for (const Step *other : casts) {
      if (overlap(written, plan.lookup(other->ops.front()->getOperand(0))))
        return false;
      if (other != step &&
          overlap(written, plan.lookup(other->ops.front()->getResult(0))))
        return false;
    }
  }
  return true;
}

void mlir::mpc::emitCastBatch(ArrayRef<const Step *> casts,
                              StepEmitter &emitter) {
  std::string name = emitter.kernelName("cast_batch");
  std::string source;
  llvm::raw_string_ostream os(source);
  SmallVector<std::string> parameters, arguments;
  KernelCost cost;
  os << "// " << casts.size() << " casts, a block a tile of one\n";
  std::string body;
  int64_t firstTile = 0;
  for (auto [index, step] : llvm::enumerate(casts)) {
    auto op = cast<CastOp>(step->ops.front());
    int64_t n = op.getResult().getType().getNumElements();
    std::string in = "in" + std::to_string(index),
                out = "out" + std::to_string(index);
    parameters.push_back("const " + elementCType(op.getInput()) +
                         " *__restrict__ " + in);
    parameters.push_back(elementCType(op.getResult()) + " *__restrict__ " +
                         out);
    arguments.push_back(emitter.constPointer(op.getInput()));
    arguments.push_back(emitter.pointer(op.getResult()));
    cost.reads(op.getInput()).writes(op.getResult());
    body += llvm::formatv("  if (tile < {0}LL) {{\n"
                          "    MPC_FOR_TILE(i, tile - {1}LL, {2}LL) "
                          "mpc_store({3} + i, mpc_load({4} + i));\n"
                          "    return;\n"
                          "  }\n",
                          firstTile + castBatchTiles(n), firstTile, n, out, in);
    firstTile += castBatchTiles(n);
  }
  os << "__global__ void " << name << "(";
  llvm::interleaveComma(parameters, os);
  os << ") {\n  long long tile = blockIdx.x;\n" << body << "}\n";
  emitter.addKernel(std::move(source));
  emitter.launch(name, firstTile, 256, arguments, cost);
}

std::string ElementFunction::call(StringRef index, StringRef seed) const {
  SmallVector<std::string> arguments(parameterNames);
  if (!seed.empty())
    arguments.push_back(seed.str());
  arguments.push_back(index.str());
  return name + "(" + llvm::join(arguments, ", ") + ")";
}

FailureOr<ElementFunction>
mlir::mpc::buildElementFunction(ArrayRef<Operation *> ops, Value result,
                                Value seed, StepEmitter &emitter,
                                StringRef name, StringRef parameterPrefix) {
  return FusedKernelBuilder(ops, emitter, parameterPrefix.str())
      .buildFunction(result, seed, name);
}
