//===- EmitElementwise.cpp - fused elementwise kernels ------------*- C++ -*-===//
//
// This file implements emitFusedElementwise: one kernel for a group of
// elementwise ops of one result shape. Operands from outside the group are
// loaded with NumPy broadcasting; values inside stay in registers, rounded
// to their storage type after every op so that fusing never changes a
// result; values read after the group are stored.
//
//===----------------------------------------------------------------------===//

#include "compiler/Codegen.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
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
      .Case([](RsqrtOp) { return 2; })   // 1 / sqrtf(x) on the cpu
      .Case([](SigmoidOp) { return 4; }) // 1 / (1 + exp(-x))
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


/// Builds the body of one fused kernel.
class FusedKernelBuilder {
public:
  FusedKernelBuilder(const Step &step, StepEmitter &emitter)
      : step(step), emitter(emitter),
        shape(cast<RankedTensorType>(step.ops.front()->getResult(0).getType())
                  .getShape()) {}

  LogicalResult build();

private:
  bool inGroup(Value value) const {
    Operation *def = value.getDefiningOp();
    return def && llvm::is_contained(step.ops, def);
  }
  /// Coordinate `d` of the current element in the group's shape.
  std::string coordinate(int64_t d) {
    usedCoordinates.insert(d);
    return "c" + std::to_string(d);
  }
  /// The element offset of operand `type` broadcast to the group's shape.
  std::string broadcastIndex(RankedTensorType type);
  /// An expression for an operand: a register, a literal or a load.
  std::string operand(Value value);
  /// The expression computing `op`'s result from its operands.
  FailureOr<std::string> expression(Operation *op);
  std::string fresh() { return "v" + std::to_string(nextRegister++); }

  const Step &step;
  StepEmitter &emitter;
  ArrayRef<int64_t> shape;
  llvm::DenseMap<Value, std::string> registers;
  SmallVector<std::string> parameters, arguments;
  std::string body;
  /// The dims whose coordinate the kernel reads; only those are computed.
  llvm::SmallSet<int64_t, 4> usedCoordinates;
  bool needsRandom = false;
  int nextRegister = 0;
  /// Every operand loaded once, every materialised result stored once.
  KernelCost cost;
};

std::string FusedKernelBuilder::broadcastIndex(RankedTensorType type) {
  ArrayRef<int64_t> operandShape = type.getShape();
  if (operandShape == shape)
    return "i";
  int64_t offset = shape.size() - operandShape.size();
  std::string index;
  int64_t stride = 1;
  for (int64_t d = operandShape.size() - 1; d >= 0; --d) {
    if (operandShape[d] != 1) {
      if (!index.empty())
        index += " + ";
      index += coordinate(offset + d) + " * " + std::to_string(stride) + "LL";
    }
    stride *= operandShape[d];
  }
  return index.empty() ? "0" : index;
}

std::string FusedKernelBuilder::operand(Value value) {
  auto it = registers.find(value);
  if (it != registers.end())
    return it->second;
  // A splat constant nobody materialised is a literal.
  if (auto constant = value.getDefiningOp<ConstantOp>();
      constant && !emitter.getPlan().isMaterialised(value)) {
    auto splat = cast<SplatElementsAttr>(constant.getValue());
    std::string literal =
        floatLiteral(splat.getSplatValue<APFloat>().convertToDouble());
    registers[value] = literal;
    return literal;
  }
  auto type = cast<RankedTensorType>(value.getType());
  std::string name = "in" + std::to_string(parameters.size());
  parameters.push_back("const " + cType(type.getElementType()) +
                       " *__restrict__ " + name);
  arguments.push_back(emitter.constPointer(value));
  cost.reads(value);
  std::string index = broadcastIndex(type);
  std::string reg = fresh();
  if (type.getElementType().isInteger(1))
    body += llvm::formatv("    bool {0} = {1}[{2}] != 0;\n", reg, name, index);
  else
    body += llvm::formatv("    float {0} = mpc_load({1} + {2});\n", reg, name,
                          index);
  registers[value] = reg;
  return reg;
}

FailureOr<std::string> FusedKernelBuilder::expression(Operation *op) {
  // Load the operands in operand order first: the expressions below call
  // operand() inside `+` chains, whose evaluation order C++ leaves open, and
  // the generated code must not depend on the host compiler.
  for (Value value : op->getOperands())
    (void)operand(value);
  auto unary = [&](StringRef function) {
    return (function + "(" + operand(op->getOperand(0)) + ")").str();
  };
  auto binary = [&](StringRef symbol) {
    return "(" + operand(op->getOperand(0)) + " " + symbol.str() + " " +
           operand(op->getOperand(1)) + ")";
  };
  return llvm::TypeSwitch<Operation *, FailureOr<std::string>>(op)
      .Case([&](AddOp) { return binary("+"); })
      .Case([&](SubOp) { return binary("-"); })
      .Case([&](MulOp) { return binary("*"); })
      .Case([&](DivOp) { return binary("/"); })
      .Case([&](NegOp) { return "(-" + operand(op->getOperand(0)) + ")"; })
      .Case([&](ReluOp) {
        // NaN passes through, as torch.relu does, so it stays visible.
        std::string x = operand(op->getOperand(0));
        return "((" + x + " > 0.0f || " + x + " != " + x + ") ? " + x +
               " : 0.0f)";
      })
      .Case([&](TanhOp) { return unary("tanhf"); })
      .Case([&](SigmoidOp) { return unary("mpc_sigmoid"); })
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
        return "(" + operand(scale.getInput()) + " * " +
               floatLiteral(scale.getFactor().convertToDouble()) + ")";
      })
      .Case([&](WhereOp where) {
        return "(" + operand(where.getCondition()) + " ? " +
               operand(where.getOnTrue()) + " : " +
               operand(where.getOnFalse()) + ")";
      })
      .Case([&](DropoutOp dropout) -> std::string {
        std::string x = operand(dropout.getInput());
        double rate = dropout.getRate().convertToDouble();
        if (!emitter.isTraining() || rate == 0.0)
          return x;
        needsRandom = true;
        return llvm::formatv("(mpc_uniform(seed, {0}ULL, step, i) >= {1} ? "
                             "{2} * {3} : 0.0f)",
                             static_cast<uint64_t>(dropout.getSeed()),
                             floatLiteral(rate), x,
                             floatLiteral(1.0 / (1.0 - rate)))
            .str();
      })
      .Case([&](CastOp cast) { return operand(cast.getInput()); })
      .Case([&](BroadcastOp broadcast) {
        return operand(broadcast.getInput());
      })
      .Case([&](CausalMaskOp) {
        int64_t rank = shape.size();
        return "(" + coordinate(rank - 1) + " <= " + coordinate(rank - 2) + ")";
      })
      .Case([&](ConstantOp constant) {
        auto splat = cast<SplatElementsAttr>(constant.getValue());
        return floatLiteral(splat.getSplatValue<APFloat>().convertToDouble());
      })
      .Case([&](ReluGradOp grad) {
        return "(" + operand(grad.getInput()) + " > 0.0f ? " +
               operand(grad.getGrad()) + " : 0.0f)";
      })
      .Case([&](GeluGradOp grad) {
        StringRef derivative = grad.getApproximate() == GeluApproximation::Tanh
                                   ? "mpc_gelu_tanh_grad"
                                   : "mpc_gelu_erf_grad";
        return "(" + operand(grad.getGrad()) + " * " + derivative.str() + "(" +
               operand(grad.getInput()) + "))";
      })
      .Case([&](TanhGradOp grad) {
        std::string y = operand(grad.getOutput());
        return "(" + operand(grad.getGrad()) + " * (1.0f - " + y + " * " + y +
               "))";
      })
      .Case([&](SigmoidGradOp grad) {
        std::string y = operand(grad.getOutput());
        return "(" + operand(grad.getGrad()) + " * " + y + " * (1.0f - " + y +
               "))";
      })
      .Default([&](Operation *op) -> FailureOr<std::string> {
        return op->emitError() << "'" << op->getName()
                               << "' has no elementwise kernel";
      });
}

LogicalResult FusedKernelBuilder::build() {
  std::string stores;
  for (Operation *op : step.ops) {
    FailureOr<std::string> value = expression(op);
    if (failed(value))
      return failure();
    Value result = op->getResult(0);
    Type element = cast<RankedTensorType>(result.getType()).getElementType();
    std::string reg = fresh();
    if (element.isInteger(1)) {
      body += llvm::formatv("    bool {0} = {1};\n", reg, *value);
    } else if (element.isF16()) {
      body += llvm::formatv("    float {0} = __half2float(__float2half_rn("
                            "{1}));\n",
                            reg, *value);
    } else if (element.isBF16()) {
      body += llvm::formatv("    float {0} = __bfloat162float("
                            "__float2bfloat16_rn({1}));\n",
                            reg, *value);
    } else {
      body += llvm::formatv("    float {0} = {1};\n", reg, *value);
    }
    registers[result] = reg;
    if (!emitter.getPlan().isMaterialised(result))
      continue;
    std::string name = "out" + std::to_string(parameters.size());
    parameters.push_back(cType(element) + " *__restrict__ " + name);
    arguments.push_back(emitter.pointer(result));
    cost.writes(result);
    if (element.isInteger(1))
      stores += llvm::formatv("    {0}[i] = {1} ? 1 : 0;\n", name, reg);
    else
      stores += llvm::formatv("    mpc_store({0} + i, {1});\n", name, reg);
  }

  int64_t n = 1;
  for (int64_t extent : shape)
    n *= extent;
  std::string coordinates;
  int64_t stride = 1;
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    if (usedCoordinates.contains(d))
      coordinates = llvm::formatv("    long long c{0} = (i / {1}LL) % {2}LL;\n",
                                  d, stride, shape[d])
                        .str() +
                    coordinates;
    stride *= shape[d];
  }
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

  std::string hint = step.ops.size() == 1
                         ? step.ops.front()->getName().stripDialect().str()
                         : "fused" + std::to_string(step.ops.size());
  std::string name = emitter.kernelName(hint);
  std::string source;
  llvm::raw_string_ostream os(source);
  os << "// ";
  llvm::interleave(
      step.ops, os,
      [&](Operation *op) { os << op->getName().stripDialect(); }, ", ");
  os << "\n__global__ void " << name << "(";
  llvm::interleaveComma(parameters, os);
  os << ") {\n" << prologue << "  MPC_FOR_EACH(i, " << n << "LL) {\n"
     << coordinates << body << stores << "  }\n}\n";
  for (Operation *op : step.ops)
    cost.flopsPer(n, elementwiseFlops(op, emitter.isTraining()));
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
  return FusedKernelBuilder(step, emitter).build();
}
