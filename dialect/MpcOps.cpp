//===- MpcOps.cpp - mpc dialect ops -------------------------------*- C++ -*-===//
//
// This file implements type inference, verifiers and custom assembly of the
// mpc ops. Each check is tagged with the invariant it enforces (`linear_c2`),
// numbered as in the op's ODS description and named so in the tests.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"

#include "mlir/Dialect/Traits.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <cmath>

using namespace mlir;
using namespace mlir::mpc;

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

/// Emits `'<op>' op <message>` at `loc`, as a verifier would. Type inference
/// runs while parsing, before any verifier, so its messages take the same form.
template <typename... Args>
LogicalResult opError(std::optional<Location> loc, StringRef opName,
                      Args &&...args) {
  return emitOptionalError(loc, "'", opName, "' op ",
                           std::forward<Args>(args)...);
}

/// Quotes a type in a message: `'tensor<4xf32>'`.
std::string quoted(Type type) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << '\'' << type << '\'';
  return text;
}

/// The statically shaped tensor type of `value`, or an error. ODS constraints
/// are only checked after inference, so inference must not assume them.
FailureOr<RankedTensorType> staticTensor(std::optional<Location> loc,
                                         StringRef opName, Value value,
                                         StringRef what) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return opError(loc, opName, "expects ", what,
                   " to be a statically shaped tensor, got ",
                   quoted(value.getType()));
  return type;
}

std::string shapeString(ArrayRef<int64_t> shape) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(shape, os);
  os << ']';
  return text;
}

/// NumPy broadcast of any number of shapes; failure if they do not broadcast.
FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<RankedTensorType> types) {
  SmallVector<int64_t> result;
  for (RankedTensorType type : types) {
    SmallVector<int64_t> next;
    if (!OpTrait::util::getBroadcastedShape(result, type.getShape(), next))
      return failure();
    result = std::move(next);
  }
  return result;
}

/// Checks a two-entry spatial attribute (stride, padding, ...).
LogicalResult checkPair(std::optional<Location> loc, StringRef opName,
                        StringRef what, ArrayRef<int64_t> values,
                        int64_t minimum) {
  if (values.size() != 2)
    return opError(loc, opName, "expects ", what,
                   " to have 2 entries (height, width), got ", values.size());
  for (int64_t v : values)
    if (v < minimum)
      return opError(loc, opName, "expects ", what, " entries >= ", minimum,
                     ", got ", shapeString(values));
  return success();
}

SmallVector<int64_t, 2> pairOr(std::optional<ArrayRef<int64_t>> values,
                               ArrayRef<int64_t> fallback) {
  if (values)
    return SmallVector<int64_t, 2>(*values);
  return SmallVector<int64_t, 2>(fallback);
}

/// The number of elements of `type`, or nullopt when it does not fit in
/// int64 (ShapedType::getNumElements would wrap around).
std::optional<int64_t> numElements(RankedTensorType type) {
  int64_t count = 1;
  for (int64_t extent : type.getShape()) {
    std::optional<int64_t> next = llvm::checkedMul(count, extent);
    if (!next)
      return std::nullopt;
    count = *next;
  }
  return count;
}

bool isIdentifier(StringRef name) {
  if (name.empty() || !(llvm::isAlpha(name[0]) || name[0] == '_'))
    return false;
  return llvm::all_of(name, [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.';
  });
}

} // namespace

/// Inputs, parameters and state may also have '-' after the first
/// character (torchvision's RegNet names blocks "block1-0"): MLIR value
/// names allow it, and generated code only quotes them.
bool mlir::mpc::isTensorName(StringRef name) {
  if (name.empty() || !(llvm::isAlpha(name[0]) || name[0] == '_'))
    return false;
  return llvm::all_of(name, [](char c) {
    return llvm::isAlnum(c) || c == '_' || c == '.' || c == '-';
  });
}

bool mlir::mpc::hasElements(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  return !shaped || !shaped.hasRank() || !llvm::is_contained(shaped.getShape(), 0);
}

/// The bytes a tensor of `type` stores (an i1 takes a byte, an index 8),
/// computed with overflow checks: none where the count does not fit in
/// 64 bits (or the type is not a statically shaped tensor of ints or
/// floats).
static std::optional<int64_t> tensorStorageBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return std::nullopt;
  Type element = tensor.getElementType();
  int64_t bytes = 0;
  if (element.isIndex())
    bytes = 8;
  else if (element.isIntOrFloat())
    bytes = std::max<int64_t>(1, element.getIntOrFloatBitWidth() / 8);
  else
    return std::nullopt;
  std::optional<int64_t> total = bytes;
  for (int64_t extent : tensor.getShape())
    if (!(total = llvm::checkedMul(*total, extent)))
      return std::nullopt;
  return total;
}

/// Whether a tensor's byte count overflows 64 bits (ShapedType's element
/// count would too): other types and unranked tensors are not sized here.
static bool overflowsByteCount(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() ||
      !(tensor.getElementType().isIntOrIndexOrFloat()))
    return false;
  return !tensorStorageBytes(type);
}

LogicalResult mlir::mpc::verifyHasElements(Operation *op) {
  auto check = [&](Type type, StringRef what, unsigned index) -> LogicalResult {
    if (!hasElements(type))
      return op->emitOpError()
             << "expects tensors with elements, got " << quoted(type)
             << " for " << what << " #" << index
             << " (mpc does not support zero-size dimensions)";
    if (overflowsByteCount(type))
      return op->emitOpError()
             << "expects tensors whose byte count fits in 64 bits, got "
             << quoted(type) << " for " << what << " #" << index;
    return success();
  };
  for (auto [index, type] : llvm::enumerate(op->getOperandTypes()))
    if (failed(check(type, "operand", index)))
      return failure();
  for (auto [index, type] : llvm::enumerate(op->getResultTypes()))
    if (failed(check(type, "result", index)))
      return failure();
  return success();
}

//===----------------------------------------------------------------------===//
// ModelOp
//===----------------------------------------------------------------------===//

StringRef ModelOp::getArgName(BlockArgument arg) {
  unsigned index = arg.getArgNumber();
  if (index < getNumInputs())
    return cast<StringAttr>(getInputNames()[index]).getValue();
  index -= getNumInputs();
  if (index < getNumParams())
    return cast<StringAttr>(getParamNames()[index]).getValue();
  index -= getNumParams();
  return cast<StringAttr>(getStateNames()[index]).getValue();
}

BlockArgument ModelOp::addState(StringRef name, Type type, InitializerAttr init,
                                Location loc) {
  Builder builder(getContext());
  SmallVector<Attribute> names(getStateNames().getValue());
  names.push_back(builder.getStringAttr(name));
  SmallVector<Attribute> inits(getStateInits().getValue());
  inits.push_back(init);
  setStateNamesAttr(builder.getArrayAttr(names));
  setStateInitsAttr(builder.getArrayAttr(inits));
  return getBody().front().addArgument(type, loc);
}

OutputOp ModelOp::getOutputOp() {
  if (getBody().empty() || getBody().front().empty())
    return nullptr;
  return dyn_cast<OutputOp>(getBody().front().back());
}

void ModelOp::getAsmBlockArgumentNames(Region &region,
                                       OpAsmSetValueNameFn setNameFn) {
  if (&region != &getBody() || region.empty())
    return;
  for (BlockArgument arg : region.front().getArguments())
    if (arg.getArgNumber() < getNumInputs() + getNumParams() + getNumStates())
      setNameFn(arg, getArgName(arg));
}

/// Parses `name(%a: type [= init], ...)`, appending to the region arguments.
static ParseResult
parseArgumentGroup(OpAsmParser &parser, StringRef keyword, bool withInit,
                   SmallVectorImpl<OpAsmParser::Argument> &arguments,
                   SmallVectorImpl<Attribute> &names,
                   SmallVectorImpl<Attribute> &inits) {
  if (parser.parseKeyword(keyword))
    return failure();
  return parser.parseCommaSeparatedList(
      OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
        OpAsmParser::Argument arg;
        if (parser.parseArgument(arg, /*allowType=*/true,
                                 /*allowAttrs=*/false))
          return failure();
        StringRef name = arg.ssaName.name;
        name.consume_front("%");
        names.push_back(parser.getBuilder().getStringAttr(name));
        if (withInit) {
          Attribute init;
          if (parser.parseEqual() ||
              !(init = InitializerAttr::parseBare(parser)))
            return failure();
          inits.push_back(init);
        }
        arguments.push_back(arg);
        return success();
      });
}

ParseResult ModelOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &builder = parser.getBuilder();
  StringAttr symName;
  if (parser.parseSymbolName(symName, getSymNameAttrName(result.name),
                             result.attributes))
    return failure();

  SmallVector<OpAsmParser::Argument> arguments;
  SmallVector<Attribute> inputNames, paramNames, paramInits, stateNames,
      stateInits, unused;
  if (parseArgumentGroup(parser, "inputs", /*withInit=*/false, arguments,
                         inputNames, unused) ||
      parseArgumentGroup(parser, "params", /*withInit=*/true, arguments,
                         paramNames, paramInits))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("state"))) {
    // Re-enter the group parser after the keyword it already consumed.
    if (parser.parseCommaSeparatedList(
            OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
              OpAsmParser::Argument arg;
              Attribute init;
              if (parser.parseArgument(arg, /*allowType=*/true) ||
                  parser.parseEqual() ||
                  !(init = InitializerAttr::parseBare(parser)))
                return failure();
              StringRef name = arg.ssaName.name;
              name.consume_front("%");
              stateNames.push_back(builder.getStringAttr(name));
              stateInits.push_back(init);
              arguments.push_back(arg);
              return success();
            }))
      return failure();
  }
  if (parser.parseOptionalAttrDictWithKeyword(result.attributes))
    return failure();

  result.addAttribute(getInputNamesAttrName(result.name),
                      builder.getArrayAttr(inputNames));
  result.addAttribute(getParamNamesAttrName(result.name),
                      builder.getArrayAttr(paramNames));
  result.addAttribute(getParamInitsAttrName(result.name),
                      builder.getArrayAttr(paramInits));
  result.addAttribute(getStateNamesAttrName(result.name),
                      builder.getArrayAttr(stateNames));
  result.addAttribute(getStateInitsAttrName(result.name),
                      builder.getArrayAttr(stateInits));
  Region *body = result.addRegion();
  return parser.parseRegion(*body, arguments);
}

void ModelOp::print(OpAsmPrinter &p) {
  Block &entry = getBody().front();
  p << ' ';
  p.printSymbolName(getSymName());
  auto printGroup = [&](StringRef keyword, Block::BlockArgListType args,
                        ArrayAttr inits) {
    p.printNewline();
    p << "    " << keyword << '(';
    std::string continuation(keyword.size() + 5, ' ');
    for (auto [i, arg] : llvm::enumerate(args)) {
      if (i > 0) {
        p << ',';
        if (inits) {
          p.printNewline();
          p << continuation;
        } else {
          p << ' ';
        }
      }
      p.printRegionArgument(arg);
      if (inits) {
        p << " = ";
        cast<InitializerAttr>(inits[i]).printBare(p);
      }
    }
    p << ')';
  };
  printGroup("inputs", getInputs(), nullptr);
  printGroup("params", getParams(), getParamInits());
  if (getNumStates() > 0)
    printGroup("state", getStates(), getStateInits());
  p.printOptionalAttrDictWithKeyword(
      (*this)->getAttrs(),
      {getSymNameAttrName(), getInputNamesAttrName(), getParamNamesAttrName(),
       getParamInitsAttrName(), getStateNamesAttrName(),
       getStateInitsAttrName()});
  p << ' ';
  (void)entry;
  p.printRegion(getBody(), /*printEntryBlockArgs=*/false,
                /*printBlockTerminators=*/true);
}

LogicalResult ModelOp::verify() {
  // model_c6
  StringRef modelName = getSymName();
  if (modelName.empty() ||
      !(llvm::isAlpha(modelName[0]) || modelName[0] == '_') ||
      !llvm::all_of(modelName,
                    [](char c) { return llvm::isAlnum(c) || c == '_'; }))
    return emitOpError() << "expects a name that is a C identifier "
                            "([A-Za-z_][A-Za-z0-9_]*): it names the library, "
                            "its header and C functions; got '"
                         << modelName << "'";
  // model_c1
  if (getParamInits().size() != getNumParams() ||
      getStateInits().size() != getNumStates())
    return emitOpError() << "expects one initialiser per parameter and state "
                            "tensor, got "
                         << getParamInits().size() << " for "
                         << getNumParams() << " parameters and "
                         << getStateInits().size() << " for "
                         << getNumStates() << " state tensors";
  unsigned numArgs = getNumInputs() + getNumParams() + getNumStates();
  if (getBody().empty() || getBody().front().getNumArguments() != numArgs)
    return emitOpError() << "expects " << numArgs
                         << " block arguments (inputs, params, state), got "
                         << (getBody().empty()
                                 ? 0
                                 : getBody().front().getNumArguments());

  // model_c2
  llvm::StringMap<BlockArgument> seen;
  for (BlockArgument arg : getBody().front().getArguments()) {
    StringRef name = getArgName(arg);
    if (!isTensorName(name))
      return mlir::emitError(arg.getLoc())
             << "'mpc.model' op expects names of the form "
                "[A-Za-z_][A-Za-z0-9_.-]*, got '"
             << name << "'";
    auto [it, inserted] = seen.try_emplace(name, arg);
    if (!inserted) {
      InFlightDiagnostic diag = mlir::emitError(arg.getLoc())
                                << "'mpc.model' op has two tensors named '"
                                << name << "'";
      diag.attachNote(it->second.getLoc()) << "first defined here";
      return diag;
    }
  }

  // model_c3
  for (BlockArgument arg : getInputs()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    Type element = type ? type.getElementType() : Type();
    if (!type || !type.hasStaticShape() ||
        !(element.isF32() || element.isF16() || element.isBF16() ||
          element.isSignlessInteger(32) || element.isSignlessInteger(64)))
      return mlir::emitError(arg.getLoc())
             << "'mpc.model' op expects input '" << getArgName(arg)
             << "' to be a statically shaped tensor of f32, f16, bf16, i32 "
                "or i64, got "
             << quoted(arg.getType());
  }
  for (BlockArgument arg : getBody().front().getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (type && type.getRank() > kMaxInterfaceRank)
      return mlir::emitError(arg.getLoc())
             << "'mpc.model' op expects '" << getArgName(arg)
             << "' to have rank at most " << kMaxInterfaceRank << ", got "
             << quoted(arg.getType());
    if (!hasElements(arg.getType()))
      return mlir::emitError(arg.getLoc())
             << "'mpc.model' op expects '" << getArgName(arg)
             << "' to have elements, got " << quoted(arg.getType())
             << " (mpc does not support zero-size dimensions)";
    if (overflowsByteCount(arg.getType()))
      return mlir::emitError(arg.getLoc())
             << "'mpc.model' op expects '" << getArgName(arg)
             << "' to have a byte count that fits in 64 bits, got "
             << quoted(arg.getType());
  }
  for (BlockArgument arg : llvm::concat<BlockArgument>(getParams(), getStates())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || !type.hasStaticShape() ||
        !isa<Float32Type, Float16Type, BFloat16Type>(type.getElementType()))
      return mlir::emitError(arg.getLoc())
             << "'mpc.model' op expects parameter or state '"
             << getArgName(arg)
             << "' to be a statically shaped tensor of f32, f16 or bf16, got "
             << quoted(arg.getType());
  }

  // model_c4
  auto checkInit = [&](BlockArgument arg, Attribute attr) -> LogicalResult {
    auto init = cast<InitializerAttr>(attr);
    InitKind kind = init.getKind();
    bool needsFans = kind == InitKind::KaimingUniform ||
                     kind == InitKind::KaimingNormal ||
                     kind == InitKind::XavierUniform ||
                     kind == InitKind::XavierNormal;
    if (needsFans && cast<RankedTensorType>(arg.getType()).getRank() < 2)
      return mlir::emitError(arg.getLoc())
             << "'mpc.model' op initialiser '" << stringifyInitKind(kind)
             << "' of '" << getArgName(arg)
             << "' needs a tensor of rank >= 2 to compute fans, got "
             << quoted(arg.getType());
    return success();
  };
  for (auto [arg, init] : llvm::zip(getParams(), getParamInits()))
    if (failed(checkInit(arg, init)))
      return failure();
  for (auto [arg, init] : llvm::zip(getStates(), getStateInits()))
    if (failed(checkInit(arg, init)))
      return failure();
  return success();
}

LogicalResult ModelOp::verifyRegions() {
  // model_c5: walk the body in program order, so that a state tensor's first
  // use is the one the diagnostics call first.
  Block &entry = getBody().front();
  unsigned firstState = getNumInputs() + getNumParams();
  llvm::DenseMap<BlockArgument, OpOperand *> updatedBy;
  llvm::DenseMap<BlockArgument, llvm::DenseSet<int64_t>> columns;
  WalkResult walk =
      getBody().walk<WalkOrder::PreOrder>([&](Operation *op) -> WalkResult {
        for (OpOperand &use : op->getOpOperands()) {
          auto state = dyn_cast<BlockArgument>(use.get());
          if (!state || state.getOwner() != &entry ||
              state.getArgNumber() < firstState)
            continue;
          // Compare operand slots, not values: a state tensor passed as gamma
          // is not a running statistic even if it is passed as one too.
          auto norm = dyn_cast<BatchNormOp>(op);
          bool isRunningStat = norm && (&use == &norm.getRunningMeanMutable() ||
                                        &use == &norm.getRunningVarMutable());
          // A delayed-scaling table is shared: one column per quantize.
          auto quantize = dyn_cast<QuantizeOp>(op);
          bool isScalingTable = quantize && quantize.getScaling() &&
                                &use == &quantize.getScalingMutable()[0];
          if (!isRunningStat && !isScalingTable) {
            InFlightDiagnostic diag =
                op->emitOpError()
                << "uses state '" << getArgName(state)
                << "', which only mpc.batch_norm may use, as running "
                   "statistics, and mpc.quantize, as its delayed-scaling "
                   "table";
            diag.attachNote(state.getLoc()) << "state defined here";
            return diag;
          }
          auto [it, inserted] = updatedBy.try_emplace(state, &use);
          if (isScalingTable && !inserted &&
              isa<QuantizeOp>(it->second->getOwner())) {
            if (columns[state].insert(*quantize.getIndex()).second)
              continue;
            InFlightDiagnostic diag = op->emitOpError()
                                      << "uses column " << *quantize.getIndex()
                                      << " of state '" << getArgName(state)
                                      << "', which another quantize uses";
            diag.attachNote(state.getLoc()) << "state defined here";
            return diag;
          }
          if (isScalingTable && inserted)
            columns[state].insert(*quantize.getIndex());
          if (inserted)
            continue;
          if (it->second->getOwner() == op) {
            InFlightDiagnostic diag =
                op->emitOpError()
                << "uses state '" << getArgName(state)
                << "' as both running mean and running variance";
            diag.attachNote(state.getLoc()) << "state defined here";
            return diag;
          }
          InFlightDiagnostic diag = op->emitOpError()
                                    << "uses state '" << getArgName(state)
                                    << "', which another op already updates";
          diag.attachNote(it->second->getOwner()->getLoc())
              << "first updated here";
          return diag;
        }
        return WalkResult::advance();
      });
  return failure(walk.wasInterrupted());
}

//===----------------------------------------------------------------------===//
// OutputOp
//===----------------------------------------------------------------------===//

ParseResult OutputOp::parse(OpAsmParser &parser, OperationState &result) {
  OpAsmParser::UnresolvedOperand loss;
  Type lossType;
  if (parser.parseKeyword("loss") || parser.parseLParen() ||
      parser.parseOperand(loss) || parser.parseColonType(lossType) ||
      parser.parseRParen() ||
      parser.resolveOperand(loss, lossType, result.operands))
    return failure();
  SmallVector<Attribute> names;
  StringRef name;
  int32_t numGradients = 0;
  while (true) {
    // A printed location (`loc(...)`, as mpc import writes) ends the op;
    // it would otherwise read as an output named `loc`.
    std::optional<Location> location;
    if (parser.parseOptionalLocationSpecifier(location))
      return failure();
    if (location) {
      result.location = *location;
      break;
    }
    if (failed(parser.parseOptionalKeyword(&name)))
      break;
    if (name == "gradients") {
      // The last group: `gradients(%g0 : type, ...)`.
      if (parser.parseCommaSeparatedList(
              OpAsmParser::Delimiter::Paren, [&]() -> ParseResult {
                OpAsmParser::UnresolvedOperand operand;
                Type type;
                if (parser.parseOperand(operand) ||
                    parser.parseColonType(type) ||
                    parser.resolveOperand(operand, type, result.operands))
                  return failure();
                ++numGradients;
                return success();
              }))
        return failure();
      break;
    }
    OpAsmParser::UnresolvedOperand operand;
    Type type;
    if (parser.parseLParen() || parser.parseOperand(operand) ||
        parser.parseColonType(type) || parser.parseRParen() ||
        parser.resolveOperand(operand, type, result.operands))
      return failure();
    names.push_back(parser.getBuilder().getStringAttr(name));
  }
  result.addAttribute(getOutputNamesAttrName(result.name),
                      parser.getBuilder().getArrayAttr(names));
  result.getOrAddProperties<Properties>().operandSegmentSizes = {
      1, static_cast<int32_t>(names.size()), numGradients};
  return parser.parseOptionalAttrDict(result.attributes);
}

void OutputOp::print(OpAsmPrinter &p) {
  p << " loss(" << getLoss() << " : " << getLoss().getType() << ')';
  for (auto [name, value] : llvm::zip(getOutputNames(), getOutputs()))
    p << ' ' << cast<StringAttr>(name).getValue() << '(' << value << " : "
      << value.getType() << ')';
  if (!getGradients().empty()) {
    p << " gradients(";
    llvm::interleaveComma(getGradients(), p, [&](Value gradient) {
      p << gradient << " : " << gradient.getType();
    });
    p << ')';
  }
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {getOutputNamesAttrName(), "operandSegmentSizes"});
}

//===----------------------------------------------------------------------===//
// FusionOp
//===----------------------------------------------------------------------===//

bool mlir::mpc::isElementwise(Operation *op) {
  if (auto constant = dyn_cast<ConstantOp>(op))
    return isa<SplatElementsAttr>(constant.getValue());
  return isa<AddOp, SubOp, MulOp, DivOp, NegOp, ReluOp, TanhOp, SigmoidOp,
             SiluOp, ExpOp, LogOp, SqrtOp, RsqrtOp, GeluOp, ScaleOp, ClampOp,
             WhereOp, DropoutOp, CastOp, BroadcastOp, CausalMaskOp, ReluGradOp,
             GeluGradOp, TanhGradOp, SigmoidGradOp, SiluGradOp, ClampGradOp>(
      op);
}

llvm::DenseSet<Operation *> mlir::mpc::findForwardOps(ModelOp model) {
  // Walk backwards from the loss and the extra outputs (never from the
  // gradients): everything reached is forward work.
  OutputOp output = model.getOutputOp();
  SmallVector<Value> worklist{output.getLoss()};
  llvm::append_range(worklist, output.getOutputs());
  llvm::DenseSet<Operation *> forward;
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || !forward.insert(def).second)
      continue;
    llvm::append_range(worklist, def->getOperands());
  }
  return forward;
}

bool mlir::mpc::isView(Operation *op) {
  return isa<ReshapeOp, TransposeOp, SliceOp, SliceGradOp>(op);
}

Value mlir::mpc::throughReshapes(Value value) {
  while (auto reshape = value.getDefiningOp<ReshapeOp>())
    value = reshape.getInput();
  return value;
}

bool mlir::mpc::isRowFusible(Operation *op) {
  // What computes a quantization's input runs in its pass; with current
  // scaling, in its amax pass too (the elementwise prologue is evaluated
  // twice rather than stored and read twice).
  return isa<SoftmaxOp, LogSoftmaxOp, SoftmaxGradOp, LogSoftmaxGradOp,
             LayerNormOp, LayerNormGradOp, BatchNormOp, BatchNormGradOp,
             QuantizeOp>(op);
}

bool mlir::mpc::isAttentionLike(Operation *op) {
  return isa<AttentionOp, AttentionGradOp>(op);
}

FailureOr<StridedView>
mlir::mpc::getStridedView(Value value,
                          llvm::function_ref<bool(Operation *)> follow) {
  Operation *op = value.getDefiningOp();
  auto slice = dyn_cast_or_null<SliceOp>(op);
  bool view =
      op && follow(op) &&
      (isa<ReshapeOp, TransposeOp>(op) || (slice && !slice.getStrides()));
  if (!view) {
    StridedView identity{value, 0, {}};
    ArrayRef<int64_t> shape =
        cast<RankedTensorType>(value.getType()).getShape();
    identity.strides.assign(shape.size(), 1);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
      identity.strides[d] = identity.strides[d + 1] * shape[d + 1];
    return identity;
  }
  FailureOr<StridedView> input = getStridedView(op->getOperand(0), follow);
  if (failed(input))
    return failure();
  if (slice) {
    for (auto [start, stride] : llvm::zip(slice.getStarts(), input->strides))
      input->offset += start * stride;
    return input;
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    SmallVector<int64_t, 4> strides;
    for (int64_t d : transpose.getPermutation())
      strides.push_back(input->strides[d]);
    input->strides = strides;
    return input;
  }
  FailureOr<SmallVector<int64_t, 4>> strides = reshapedStrides(
      cast<RankedTensorType>(op->getOperand(0).getType()).getShape(),
      input->strides, cast<RankedTensorType>(value.getType()).getShape());
  if (failed(strides))
    return failure();
  input->strides = *strides;
  return input;
}

FailureOr<SmallVector<int64_t, 4>>
mlir::mpc::reshapedStrides(ArrayRef<int64_t> in, ArrayRef<int64_t> inStrides,
                           ArrayRef<int64_t> out) {
  // Match groups of input and output dims of equal size; each input group
  // must be contiguous, and its output dims take row-major strides from
  // the group's innermost stride.
  SmallVector<int64_t, 4> strides(out.size(), 0);
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    size_t firstIn = i, firstOut = j;
    int64_t inSize = i < in.size() ? in[i++] : 1;
    int64_t outSize = j < out.size() ? out[j++] : 1;
    while (inSize != outSize) {
      if (inSize < outSize && i < in.size())
        inSize *= in[i++];
      else if (outSize < inSize && j < out.size())
        outSize *= out[j++];
      else
        return failure();
    }
    for (size_t k = firstIn; k + 1 < i; ++k)
      if (in[k] != 1 && inStrides[k] != inStrides[k + 1] * in[k + 1])
        return failure();
    int64_t stride = i > firstIn ? inStrides[i - 1] : 1;
    for (size_t k = j; k-- > firstOut;) {
      strides[k] = stride;
      stride *= out[k];
    }
  }
  return strides;
}

FailureOr<StridedView>
mlir::mpc::getScatteredView(Value result,
                            llvm::function_ref<bool(Operation *)> follow) {
  // Walk forward through reshapes to one slice_grad with unit strides, then
  // through the adds that sum the scattered tensors, to the last of them.
  SmallVector<Operation *, 4> reshapes;
  Value value = result;
  auto soleUser = [&](Value v) -> Operation * {
    if (!v.hasOneUse() || !follow(*v.user_begin()))
      return nullptr;
    return *v.user_begin();
  };
  Operation *user = soleUser(value);
  while (auto reshape = dyn_cast_or_null<ReshapeOp>(user)) {
    reshapes.push_back(reshape);
    value = reshape.getResult();
    user = soleUser(value);
  }
  auto scatter = dyn_cast_or_null<SliceGradOp>(user);
  if (!scatter ||
      llvm::any_of(scatter.getStrides(), [](int64_t s) { return s != 1; }))
    return failure();
  Value target = scatter.getResult();
  while (auto add = dyn_cast_or_null<AddOp>(soleUser(target)))
    target = add.getResult();
  ArrayRef<int64_t> shape = cast<RankedTensorType>(target.getType()).getShape();
  StridedView view{target, 0, {}};
  view.strides.assign(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    view.strides[d] = view.strides[d + 1] * shape[d + 1];
  for (auto [start, stride] : llvm::zip(scatter.getStarts(), view.strides))
    view.offset += start * stride;
  // Back through the reshapes, to the result's own dims.
  for (Operation *reshape : llvm::reverse(reshapes)) {
    FailureOr<SmallVector<int64_t, 4>> strides = reshapedStrides(
        cast<RankedTensorType>(reshape->getResult(0).getType()).getShape(),
        view.strides,
        cast<RankedTensorType>(reshape->getOperand(0).getType()).getShape());
    if (failed(strides))
      return failure();
    view.strides = *strides;
  }
  return view;
}

bool mlir::mpc::isGemmLike(Operation *op) {
  return isa<LinearOp, MatmulOp, BatchMatmulOp>(op);
}

bool mlir::mpc::isParamHalfCast(CastOp cast) {
  auto param = dyn_cast<BlockArgument>(cast.getInput());
  auto model = cast->getParentOfType<ModelOp>();
  if (!param || !model || !llvm::is_contained(model.getParams(), param))
    return false;
  return cast.getInput().getType().getElementType().isF32() &&
         cast.getResult().getType().getElementType().getIntOrFloatBitWidth() ==
             16;
}

SmallVector<Operation *> FusionOp::getGroupOps() {
  SmallVector<Operation *> ops;
  for (Operation &op : getBody().front().without_terminator())
    ops.push_back(&op);
  return ops;
}

YieldOp FusionOp::getYieldOp() {
  if (getBody().empty() || getBody().front().empty())
    return nullptr;
  return dyn_cast<YieldOp>(getBody().front().back());
}

LogicalResult FusionOp::verifyRegions() {
  // fusion_c1
  YieldOp yield = getYieldOp();
  if (!yield)
    return emitOpError() << "expects its body to end in 'mpc.yield'";
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError() << "yields " << yield.getValues().size()
                         << " values whose types differ from its "
                         << getNumResults() << " results";
  for (Value value : yield.getValues())
    if (value.getParentRegion() != &getBody() || isa<BlockArgument>(value))
      return emitOpError() << "yields a value not computed in its body";
  // fusion_c2
  SmallVector<Operation *> ops = getGroupOps();
  if (ops.empty())
    return emitOpError() << "expects at least one op in its body";
  for (Operation *op : ops)
    if (isa<FusionOp>(op))
      return op->emitOpError() << "cannot be nested in another 'mpc.fusion'";
  if (getKind() == FusionKind::Loop) {
    // fusion_c3
    for (Operation *op : ops)
      if (!isLoopFusible(op))
        return op->emitOpError()
               << "is neither elementwise nor a view: it cannot be in a "
                  "'loop' kernel group";
    for (Type type : getResultTypes())
      if (cast<RankedTensorType>(type).getShape() !=
          cast<RankedTensorType>(getResultTypes().front()).getShape())
        return emitOpError() << "of kind 'loop' expects results of one shape";
    return success();
  }
  if (getKind() == FusionKind::Row) {
    // fusion_c6
    auto row = llvm::find_if(ops, isRowFusible);
    int64_t rowOps = llvm::count_if(ops, isRowFusible);
    if (rowOps == 2) {
      // A layer norm's (or its input gradient's) kernel finding the amax
      // of what it stores for the current-scaling quantization after it.
      auto second = std::find_if(std::next(row), ops.end(), isRowFusible);
      auto quantize = dyn_cast<QuantizeOp>(*second);
      Operation *input =
          quantize ? quantize.getInput().getDefiningOp() : nullptr;
      if (!isa<LayerNormOp, LayerNormGradOp>(*row) || !quantize ||
          quantize.getScaling() || quantize.getUnscaled() || !input ||
          llvm::find(ops, input) < row || llvm::find(ops, input) >= second)
        return emitOpError()
               << "of kind 'row' has a second row op only where a layer_norm "
                  "or layer_norm_grad is followed by a current-scaling "
                  "quantize of what its kernel stores";
      row = second;
    }
    auto quantize =
        row == ops.end() ? QuantizeOp() : dyn_cast<QuantizeOp>(*row);
    auto isBiasSum = [&](Operation *op) {
      auto sum = dyn_cast<ReduceSumOp>(op);
      return quantize && quantize.getTransposed() && sum &&
             sum.getDims() == ArrayRef<int64_t>{0} &&
             sum.getInput().getType().getRank() == 2 &&
             llvm::find(ops, op) > row;
    };
    int64_t biasSums = llvm::count_if(ops, isBiasSum);
    // A max pooling whose loads apply a batch norm and the loop ops after
    // it: the group's last op.
    auto isNormPool = [&](Operation *op) {
      return isa<MaxPool2dWithIndicesOp>(op) && op == ops.back() &&
             row != ops.end() && isa<BatchNormOp>(*row);
    };
    if (rowOps == 0 || rowOps > 2 || biasSums > 1 ||
        !llvm::all_of(ops, [&](Operation *op) {
          return isRowFusible(op) || isLoopFusible(op) || isBiasSum(op) ||
                 isNormPool(op);
        }))
      return emitOpError()
             << "of kind 'row' expects one softmax, log_softmax, layer_norm, "
                "batch_norm or their gradient, or a quantize (transposing "
                "where it sums a bias), and loop ops (a batch_norm's then "
                "possibly a max_pool2d_with_indices)";
    return success();
  }
  if (getKind() == FusionKind::Attention) {
    // fusion_c7
    auto attention = llvm::find_if(ops, isAttentionLike);
    auto quantizeAt =
        std::find_if(attention == ops.end() ? ops.end() : std::next(attention),
                     ops.end(), llvm::IsaPred<QuantizeOp>);
    bool valid =
        llvm::count_if(ops, isAttentionLike) == 1 &&
        std::all_of(ops.begin(), attention,
                    [](Operation *op) {
                      return isa<ReshapeOp, TransposeOp, SliceOp>(op);
                    }) &&
        std::all_of(std::next(attention), quantizeAt, [&](Operation *op) {
          return isa<AttentionGradOp>(*attention) &&
                 isa<ReshapeOp, SliceGradOp, AddOp>(op);
        });
    if (!valid)
      return emitOpError() << "of kind 'attention' expects views (reshape, "
                              "transpose, slice), one attention or its "
                              "gradient, and after a gradient only the "
                              "reshapes, slice_grads and adds that scatter "
                              "its results";
    if (quantizeAt == ops.end())
      return success();
    // What the kernels store (the output, or the sum the gradient is
    // scattered into), quantized with current scaling: the kernels find
    // its amax. Then only the quantization's bias sum.
    auto quantize = cast<QuantizeOp>(*quantizeAt);
    Operation *input = quantize.getInput().getDefiningOp();
    bool stored = isa<AttentionOp>(*attention)
                      ? input == *attention
                      : isa_and_nonnull<AddOp>(input) &&
                            llvm::find(ops, input) < quantizeAt;
    if (!stored || quantize.getScaling() || quantize.getUnscaled() ||
        !std::all_of(std::next(quantizeAt), ops.end(), [&](Operation *op) {
          return quantize.getTransposed() &&
                 isa<ReshapeOp, ReduceSumOp, CastOp>(op);
        }))
      return emitOpError() << "of kind 'attention' quantizes only what its "
                              "kernels store, with current scaling, and then "
                              "sums only that quantization's bias";
    return success();
  }
  if (getKind() == FusionKind::Classifier) {
    // fusion_c8
    auto loss =
        ops.size() == 2 ? dyn_cast<CrossEntropyOp>(ops[0]) : CrossEntropyOp();
    auto grad = ops.size() == 2 ? dyn_cast<CrossEntropyGradOp>(ops[1])
                                : CrossEntropyGradOp();
    if (!loss || !grad || loss.getLogits() != grad.getLogits() ||
        loss.getTargets() != grad.getTargets() ||
        loss.getIgnoreIndex() != grad.getIgnoreIndex())
      return emitOpError() << "of kind 'classifier' expects a cross_entropy "
                              "and a cross_entropy_grad of the same logits, "
                              "targets and ignore_index";
    return success();
  }
  if (getKind() == FusionKind::LinearClassifier) {
    // fusion_c9
    auto linear = dyn_cast<LinearOp>(ops.front());
    auto count = [&](auto isKind) { return llvm::count_if(ops, isKind); };
    auto loss = llvm::find_if(ops, llvm::IsaPred<CrossEntropyOp>);
    auto grad = llvm::find_if(ops, llvm::IsaPred<CrossEntropyGradOp>);
    bool valid =
        linear && !linear.getBias() && count(llvm::IsaPred<LinearOp>) == 1 &&
        count(llvm::IsaPred<CrossEntropyOp>) == 1 &&
        count(llvm::IsaPred<CrossEntropyGradOp>) == 1 &&
        count(llvm::IsaPred<MatmulOp>) == 2 &&
        count(llvm::IsaPred<CastOp>) <= 1 &&
        llvm::all_of(ops,
                     llvm::IsaPred<LinearOp, CrossEntropyOp, CrossEntropyGradOp,
                                   MatmulOp, CastOp, ReshapeOp>) &&
        loss != ops.end() && grad != ops.end() &&
        cast<CrossEntropyOp>(*loss).getLogits() ==
            cast<CrossEntropyGradOp>(*grad).getLogits() &&
        llvm::all_of(ops, [&](Operation *op) {
          auto matmul = dyn_cast<MatmulOp>(op);
          return !matmul ||
                 throughReshapes(matmul.getLhs()) == (*grad)->getResult(0);
        });
    if (!valid)
      return emitOpError()
             << "of kind 'linear_classifier' expects a bias-free linear "
                "first, a cross_entropy and a cross_entropy_grad of the same "
                "logits, two matmuls of the gradient, at most one cast and "
                "reshapes";
    return success();
  }
  if (getKind() == FusionKind::Reduce) {
    // fusion_c5
    auto widen = ops.size() == 2 ? dyn_cast<CastOp>(ops[1]) : CastOp();
    if (!isa<ReduceSumOp, EmbeddingGradOp>(ops.front()) || !widen ||
        widen.getInput() != ops.front()->getResult(0) ||
        !widen.getType().getElementType().isF32())
      return emitOpError() << "of kind 'reduce' expects a reduce_sum or an "
                              "embedding_grad and a cast of its result to f32";
    return success();
  }
  // fusion_c4
  if (!isGemmLike(ops.front()))
    return emitOpError() << "of kind 'gemm' expects linear, matmul or "
                            "batch_matmul first";
  // The bias gradient of a weight-gradient GEMM sums its left operand.
  Value lhs = ops.front()->getOperand(0);
  auto isBiasGradient = [&](Operation *op) {
    if (auto sum = dyn_cast<ReduceSumOp>(op))
      return sum.getInput() == lhs;
    auto widen = dyn_cast<CastOp>(op);
    auto sum =
        widen ? widen.getInput().getDefiningOp<ReduceSumOp>() : ReduceSumOp();
    return sum && sum.getInput() == lhs;
  };
  // An epilogue reads the product, directly or through a reshape of it.
  Value product = ops.front()->getResult(0);
  auto readsProduct = [&](Operation *op) {
    return llvm::any_of(op->getOperands(), [&](Value operand) {
      auto reshape = operand.getDefiningOp<ReshapeOp>();
      return operand == product ||
             (reshape && reshape.getInput() == product &&
              llvm::is_contained(ops, reshape.getOperation()));
    });
  };
  for (Operation *op : llvm::drop_begin(ops))
    if (!readsProduct(op) && !isBiasGradient(op))
      return op->emitOpError() << "does not read the product: it cannot be in "
                                  "a GEMM's epilogue";
  return success();
}

LogicalResult OutputOp::verify() {
  // output_c1
  if (getOutputNames().size() != getOutputs().size())
    return emitOpError() << "expects one name per extra output, got "
                         << getOutputNames().size() << " names for "
                         << getOutputs().size() << " outputs";
  llvm::StringSet<> seen;
  for (Attribute attr : getOutputNames()) {
    StringRef name = cast<StringAttr>(attr).getValue();
    if (!isIdentifier(name) || name == "loss" || !seen.insert(name).second)
      return emitOpError() << "expects output names that are unique "
                              "identifiers other than 'loss', got '"
                           << name << "'";
    if (name == "gradients")
      return emitOpError() << "expects output names other than "
                              "'gradients', which holds the parameter "
                              "gradients";
    if (name == "loc")
      return emitOpError() << "expects output names other than 'loc', "
                              "which reads as the op's location";
  }
  // output_c3
  for (auto [name, output] : llvm::zip(getOutputNames(), getOutputs()))
    if (cast<RankedTensorType>(output.getType()).getRank() > kMaxInterfaceRank)
      return emitOpError() << "expects output '"
                           << cast<StringAttr>(name).getValue()
                           << "' to have rank at most " << kMaxInterfaceRank
                           << ", got " << quoted(output.getType());
  // output_c2
  if (getGradients().empty())
    return success();
  auto model = cast<ModelOp>((*this)->getParentOp());
  if (getGradients().size() != model.getNumParams())
    return emitOpError() << "expects one gradient per parameter, got "
                         << getGradients().size() << " for "
                         << model.getNumParams() << " parameters";
  for (auto [param, gradient] :
       llvm::zip(model.getParams(), getGradients()))
    if (param.getType() != gradient.getType())
      return emitOpError() << "expects the gradient of '"
                           << model.getArgName(param) << "' to have its type "
                           << quoted(param.getType()) << ", got "
                           << quoted(gradient.getType());
  return success();
}

//===----------------------------------------------------------------------===//
// GEMM-like ops
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto x = staticTensor(loc, name, adaptor.getInput(), "the input");
  auto w = staticTensor(loc, name, adaptor.getWeight(), "the weight");
  if (failed(x) || failed(w))
    return failure();
  // linear_c1
  if (x->getRank() < 1 || w->getRank() != 2)
    return opError(loc, name,
                   "expects an input of rank >= 1 and a weight of rank 2, "
                   "got ",
                   quoted(*x), " and ", quoted(*w));
  // linear_c2
  int64_t n = w->getDimSize(0), k = w->getDimSize(1);
  if (x->getShape().back() != k)
    return opError(loc, name, "expects the input's last dim (",
                   x->getShape().back(), ") to equal the weight's dim 1 (", k,
                   ")");
  // linear_c3
  FailureOr<RankedTensorType> b;
  if (Value bias = adaptor.getBias()) {
    b = staticTensor(loc, name, bias, "the bias");
    if (failed(b))
      return failure();
    if (b->getShape() != ArrayRef<int64_t>{n})
      return opError(loc, name, "expects a bias of shape [", n, "], got ",
                     quoted(*b));
  }
  // linear_c4
  if (w->getElementType() != x->getElementType())
    return opError(loc, name, "expects operands of one element type, got ",
                   quoted(*x), " and ", quoted(*w));
  if (succeeded(b) && b->getElementType() != x->getElementType())
    return opError(loc, name, "expects operands of one element type, got ",
                   quoted(*x), " and bias ", quoted(*b));
  SmallVector<int64_t> shape(x->getShape().drop_back());
  shape.push_back(n);
  inferred.push_back(RankedTensorType::get(shape, x->getElementType()));
  return success();
}

/// Shared by matmul and batch_matmul: `[B..., M, K] x [B..., K, N]`.
static LogicalResult inferMatmul(std::optional<Location> loc, StringRef name,
                                 Value lhsValue, Value rhsValue,
                                 bool transposeLhs, bool transposeRhs,
                                 bool batched,
                                 SmallVectorImpl<Type> &inferred) {
  auto lhs = staticTensor(loc, name, lhsValue, "the lhs");
  auto rhs = staticTensor(loc, name, rhsValue, "the rhs");
  if (failed(lhs) || failed(rhs))
    return failure();
  int64_t rank = lhs->getRank();
  if (!batched && (rank != 2 || rhs->getRank() != 2)) // matmul_c1
    return opError(loc, name, "expects operands of rank 2, got ", quoted(*lhs),
                   " and ", quoted(*rhs));
  if (batched && (rank < 3 || rhs->getRank() != rank)) // batch_matmul_c1
    return opError(loc, name,
                   "expects operands of the same rank, at least 3, got ",
                   quoted(*lhs), " and ", quoted(*rhs));
  ArrayRef<int64_t> batchDims = lhs->getShape().drop_back(2);
  if (batchDims != rhs->getShape().drop_back(2)) // batch_matmul_c2
    return opError(loc, name, "expects equal batch dims, got ",
                   shapeString(batchDims), " and ",
                   shapeString(rhs->getShape().drop_back(2)));
  int64_t m = lhs->getDimSize(rank - (transposeLhs ? 1 : 2));
  int64_t k = lhs->getDimSize(rank - (transposeLhs ? 2 : 1));
  int64_t k2 = rhs->getDimSize(rank - (transposeRhs ? 1 : 2));
  int64_t n = rhs->getDimSize(rank - (transposeRhs ? 2 : 1));
  if (k != k2) // matmul_c2, batch_matmul_c3
    return opError(loc, name, "expects contracted dims to agree, got ", k,
                   " and ", k2, " (", quoted(*lhs), " and ", quoted(*rhs),
                   ")");
  if (lhs->getElementType() != rhs->getElementType()) // matmul_c3, _c4
    return opError(loc, name, "expects operands of one element type, got ",
                   quoted(*lhs), " and ", quoted(*rhs));
  SmallVector<int64_t> shape(batchDims);
  shape.append({m, n});
  inferred.push_back(RankedTensorType::get(shape, lhs->getElementType()));
  return success();
}

LogicalResult MatmulOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  return inferMatmul(loc, getOperationName(), adaptor.getLhs(),
                     adaptor.getRhs(), adaptor.getTransposeLhs(),
                     adaptor.getTransposeRhs(), /*batched=*/false, inferred);
}

LogicalResult BatchMatmulOp::inferReturnTypes(MLIRContext *,
                                              std::optional<Location> loc,
                                              Adaptor adaptor,
                                              SmallVectorImpl<Type> &inferred) {
  return inferMatmul(loc, getOperationName(), adaptor.getLhs(),
                     adaptor.getRhs(), adaptor.getTransposeLhs(),
                     adaptor.getTransposeRhs(), /*batched=*/true, inferred);
}

void QuantizeOp::build(OpBuilder &builder, OperationState &state, Value input,
                       Type format, bool unscaled) {
  auto type = cast<RankedTensorType>(input.getType());
  build(builder, state, type.clone(format),
        RankedTensorType::get({}, builder.getF32Type()), /*transposed=*/Type(),
        input, /*scaling=*/Value(), /*index=*/nullptr, /*margin=*/nullptr,
        unscaled);
}

void QuantizeOp::build(OpBuilder &builder, OperationState &state, Value input,
                       Type format, Value scaling, int64_t index,
                       int64_t margin) {
  auto type = cast<RankedTensorType>(input.getType());
  build(builder, state, type.clone(format),
        RankedTensorType::get({}, builder.getF32Type()), /*transposed=*/Type(),
        input, scaling, builder.getI64IntegerAttr(index),
        builder.getI64IntegerAttr(margin), /*unscaled=*/false);
}

LogicalResult QuantizeOp::verify() {
  // quantize_c1
  if (getInput().getType().getShape() != getResult().getType().getShape())
    return emitOpError() << "expects a result of the input's shape "
                         << getInput().getType() << ", got "
                         << getResult().getType();
  if (Value transposed = getTransposed()) {
    auto input = getInput().getType();
    int64_t cols = input.getRank() ? input.getShape().back() : 1;
    auto expected =
        RankedTensorType::get({cols, input.getNumElements() / cols},
                              getResult().getType().getElementType());
    if (transposed.getType() != expected)
      return emitOpError() << "expects a transposed copy of type " << expected
                           << ", got " << transposed.getType();
  }
  // quantize_c2
  Value scaling = getScaling();
  if (!scaling)
    return success();
  auto table = cast<RankedTensorType>(scaling.getType());
  if (table.getRank() != 2 || !table.getElementType().isF32() ||
      table.getDimSize(0) < 5)
    return emitOpError() << "expects a delayed-scaling table of f32 [4 + "
                            "history, tensors] with a history of at least 1, "
                            "got "
                         << table;
  if (!getIndex() || !getMargin())
    return emitOpError() << "expects an index and a margin with 'delayed'";
  int64_t index = *getIndex(), margin = *getMargin();
  if (index < 0 || index >= table.getDimSize(1))
    return emitOpError() << "expects an index in [0, " << table.getDimSize(1)
                         << "), got " << index;
  if (margin < 0 || margin > 32)
    return emitOpError() << "expects a margin in [0, 32], got " << margin;
  if (getUnscaled())
    return emitOpError() << "expects 'delayed' or 'unscaled', not both";
  return success();
}

void QuantizeOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  // Delayed scaling reads its scale from the table and raises the step's
  // amax in it; current scaling is a pure function of the input.
  if (!getScaling())
    return;
  OpOperand &scaling = getScalingMutable()[0];
  effects.emplace_back(MemoryEffects::Read::get(), &scaling);
  effects.emplace_back(MemoryEffects::Write::get(), &scaling);
}

LogicalResult ScaledMatmulOp::verify() {
  auto lhs = getLhs().getType(), rhs = getRhs().getType();
  // scaled_matmul_c1
  if (lhs.getRank() != 2 || rhs.getRank() != 2)
    return emitOpError() << "expects rank-2 operands, got " << lhs << " and "
                         << rhs;
  int64_t m = lhs.getDimSize(0), n = rhs.getDimSize(0);
  // scaled_matmul_c2
  if (lhs.getDimSize(1) != rhs.getDimSize(1))
    return emitOpError() << "expects contracted dims to agree, got "
                         << lhs.getDimSize(1) << " and " << rhs.getDimSize(1);
  // scaled_matmul_c3
  auto result = getResult().getType();
  if (result.getShape() != ArrayRef<int64_t>{m, n})
    return emitOpError() << "expects a result of shape [" << m << ", " << n
                         << "], got " << result;
  // scaled_matmul_c4
  if (isa<Float8E5M2Type>(lhs.getElementType()) &&
      isa<Float8E5M2Type>(rhs.getElementType()))
    return emitOpError() << "expects at most one e5m2 operand: FP8 tensor "
                            "cores do not multiply two";
  // scaled_matmul_c5
  if (Value bias = getBias()) {
    auto type = cast<RankedTensorType>(bias.getType());
    if (type.getShape() != ArrayRef<int64_t>{n} ||
        type.getElementType() != result.getElementType())
      return emitOpError() << "expects a bias of shape [" << n << "] and "
                           << result.getElementType() << ", got " << type;
  }
  return success();
}

LogicalResult ScaleOp::verify() {
  // scale_c1: an inf or NaN factor makes every element inf or NaN; kernels
  // multiply in f32, where 1e39 is inf.
  double factor = getFactor().convertToDouble();
  if (!isFiniteAsF32(factor))
    return emitOpError() << "expects a factor that is finite in f32, got "
                         << formatDecimal(factor);
  return success();
}

LogicalResult ClampOp::verify() {
  // clamp_c1
  if (!getMin() && !getMax())
    return emitOpError() << "expects a min, a max or both";
  // clamp_c2: kernels compare in f32, where 1e39 is inf.
  for (auto [name, bound] : {std::pair{"min", getMin()}, {"max", getMax()}})
    if (bound && !isFiniteAsF32(bound->convertToDouble()))
      return emitOpError() << "expects a " << name
                           << " that is finite in f32, got "
                           << formatDecimal(bound->convertToDouble());
  if (getMin() && getMax() &&
      getMin()->convertToDouble() > getMax()->convertToDouble())
    return emitOpError() << "expects min <= max, got min "
                         << formatDecimal(getMin()->convertToDouble())
                         << " and max "
                         << formatDecimal(getMax()->convertToDouble());
  return success();
}

SmallVector<int64_t, 2> Conv2dOp::getStrideOrDefault() {
  return pairOr(getStride(), {1, 1});
}
SmallVector<int64_t, 2> Conv2dOp::getPaddingOrDefault() {
  return pairOr(getPadding(), {0, 0});
}
SmallVector<int64_t, 2> Conv2dOp::getDilationOrDefault() {
  return pairOr(getDilation(), {1, 1});
}

LogicalResult Conv2dOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto x = staticTensor(loc, name, adaptor.getInput(), "the input");
  auto w = staticTensor(loc, name, adaptor.getWeight(), "the weight");
  if (failed(x) || failed(w))
    return failure();
  // conv2d_c1
  if (x->getRank() != 4 || w->getRank() != 4)
    return opError(loc, name,
                   "expects an NCHW input and an OIHW weight of rank 4, got ",
                   quoted(*x), " and ", quoted(*w));
  // conv2d_c2
  SmallVector<int64_t, 2> stride = pairOr(adaptor.getStride(), {1, 1});
  SmallVector<int64_t, 2> padding = pairOr(adaptor.getPadding(), {0, 0});
  SmallVector<int64_t, 2> dilation = pairOr(adaptor.getDilation(), {1, 1});
  int64_t groups = adaptor.getGroups().value_or(1);
  if (failed(checkPair(loc, name, "stride", stride, 1)) ||
      failed(checkPair(loc, name, "padding", padding, 0)) ||
      failed(checkPair(loc, name, "dilation", dilation, 1)))
    return failure();
  if (groups < 1)
    return opError(loc, name, "expects groups >= 1, got ", groups);
  // conv2d_c3
  int64_t channels = x->getDimSize(1), outChannels = w->getDimSize(0);
  if (channels % groups != 0 || outChannels % groups != 0)
    return opError(loc, name, "expects groups (", groups,
                   ") to divide the input channels (", channels,
                   ") and the output channels (", outChannels, ")");
  if (w->getDimSize(1) != channels / groups)
    return opError(loc, name, "expects weight dim 1 to be input channels / "
                   "groups = ", channels / groups, ", got ", w->getDimSize(1));
  // conv2d_c4
  FailureOr<RankedTensorType> b;
  if (Value bias = adaptor.getBias()) {
    b = staticTensor(loc, name, bias, "the bias");
    if (failed(b))
      return failure();
    if (b->getShape() != ArrayRef<int64_t>{outChannels})
      return opError(loc, name, "expects a bias of shape [", outChannels,
                     "], got ", quoted(*b));
  }
  // conv2d_c5
  if (w->getDimSize(2) < 1 || w->getDimSize(3) < 1)
    return opError(loc, name, "expects a kernel of at least 1x1, got weight ",
                   quoted(*w));
  SmallVector<int64_t> shape = {x->getDimSize(0), outChannels};
  for (int i = 0; i < 2; ++i) {
    int64_t in = x->getDimSize(2 + i), kernel = w->getDimSize(2 + i);
    // The room the padded input leaves after the first window,
    // `in + 2 * padding - dilation * (kernel - 1) - 1`, without overflow:
    // padding and dilation are attributes, and may be anything.
    std::optional<int64_t> padded, reach, room;
    if (std::optional<int64_t> twice = llvm::checkedMul<int64_t>(padding[i], 2))
      padded = llvm::checkedAdd(in, *twice);
    if (std::optional<int64_t> span =
            llvm::checkedMul<int64_t>(dilation[i], kernel - 1))
      reach = llvm::checkedAdd<int64_t>(*span, 1);
    if (padded && reach)
      room = llvm::checkedSub(*padded, *reach);
    if (!room)
      return opError(loc, name, "expects padding ", shapeString(padding),
                     " and dilation ", shapeString(dilation),
                     " to give output extents that fit in 64 bits");
    if (*room < 0)
      return opError(loc, name, "expects a kernel that fits the padded input, "
                     "got input ", quoted(*x), " and weight ", quoted(*w));
    shape.push_back(*room / stride[i] + 1);
  }
  // conv2d_c6
  if (w->getElementType() != x->getElementType())
    return opError(loc, name, "expects operands of one element type, got ",
                   quoted(*x), " and ", quoted(*w));
  if (succeeded(b) && b->getElementType() != x->getElementType())
    return opError(loc, name, "expects operands of one element type, got ",
                   quoted(*x), " and bias ", quoted(*b));
  inferred.push_back(RankedTensorType::get(shape, x->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

/// Shared by the binary ops: one element type, broadcast shapes.
static LogicalResult inferBinary(std::optional<Location> loc, StringRef name,
                                 Value lhsValue, Value rhsValue,
                                 SmallVectorImpl<Type> &inferred) {
  auto lhs = staticTensor(loc, name, lhsValue, "the lhs");
  auto rhs = staticTensor(loc, name, rhsValue, "the rhs");
  if (failed(lhs) || failed(rhs))
    return failure();
  // c1
  if (lhs->getElementType() != rhs->getElementType())
    return opError(loc, name, "expects operands of one element type, got ",
                   quoted(*lhs), " and ", quoted(*rhs));
  // c2
  FailureOr<SmallVector<int64_t>> shape = broadcastShapes({*lhs, *rhs});
  if (failed(shape))
    return opError(loc, name, "expects broadcastable shapes, got ",
                   quoted(*lhs), " and ", quoted(*rhs));
  inferred.push_back(RankedTensorType::get(*shape, lhs->getElementType()));
  return success();
}

#define MPC_BINARY_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferBinary(loc, getOperationName(), adaptor.getLhs(),              \
                       adaptor.getRhs(), inferred);                            \
  }
MPC_BINARY_INFER(AddOp)
MPC_BINARY_INFER(SubOp)
MPC_BINARY_INFER(MulOp)
MPC_BINARY_INFER(DivOp)
#undef MPC_BINARY_INFER

LogicalResult WhereOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto cond = staticTensor(loc, name, adaptor.getCondition(), "the condition");
  auto onTrue = staticTensor(loc, name, adaptor.getOnTrue(), "on_true");
  auto onFalse = staticTensor(loc, name, adaptor.getOnFalse(), "on_false");
  if (failed(cond) || failed(onTrue) || failed(onFalse))
    return failure();
  // where_c1
  if (onTrue->getElementType() != onFalse->getElementType())
    return opError(loc, name, "expects on_true and on_false of one element "
                   "type, got ", quoted(*onTrue), " and ", quoted(*onFalse));
  // where_c2
  FailureOr<SmallVector<int64_t>> shape =
      broadcastShapes({*cond, *onTrue, *onFalse});
  if (failed(shape))
    return opError(loc, name, "expects broadcastable shapes, got ",
                   quoted(*cond), ", ", quoted(*onTrue), " and ",
                   quoted(*onFalse));
  inferred.push_back(RankedTensorType::get(*shape, onTrue->getElementType()));
  return success();
}

LogicalResult DropoutOp::verify() {
  // dropout_c1
  double rate = getRate().convertToDouble();
  // (as f32, which the kernels compare with: 0.999999999 is 1 there)
  if (!(rate >= 0.0 && static_cast<float>(rate) < 1.0f))
    return emitOpError() << "expects 0 <= rate < 1 in f32, got "
                         << formatDecimal(rate);
  return success();
}

LogicalResult CastOp::verify() {
  // cast_c1
  if (getInput().getType().getShape() != getResult().getType().getShape())
    return emitOpError() << "expects input and result of one shape, got "
                         << quoted(getInput().getType()) << " and "
                         << quoted(getResult().getType());
  return success();
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

namespace {

FloatType floatElementOf(Value value) {
  return cast<FloatType>(cast<RankedTensorType>(value.getType()).getElementType());
}

/// cast(cast(%x : A to B) : B to C) where every A value is exact in B (a
/// widening): B holds %x exactly, so rounding it to C rounds %x to C. Becomes
/// cast(%x : A to C), or %x when C is A (f16 to f32 to f16). A chain whose
/// first cast rounds (f32 to f16 to f32, f16 to bf16 to ...) is left alone.
/// The only bits this can change are a signalling NaN's, which the round trip
/// would have quieted; kernels never produce one.
struct FoldExactCastChain : OpRewritePattern<CastOp> {
  FoldExactCastChain(MLIRContext *context) : OpRewritePattern(context) {
    setDebugName("FoldExactCastChain");
    addDebugLabels(kFoldCastsLabel);
  }

  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getInput().getDefiningOp<CastOp>();
    if (!inner)
      return failure();
    Value source = inner.getInput();
    if (!APFloat::isRepresentableBy(
            floatElementOf(source).getFloatSemantics(),
            floatElementOf(inner.getResult()).getFloatSemantics()))
      return rewriter.notifyMatchFailure(op, "the first cast rounds");
    if (source.getType() == op.getType())
      rewriter.replaceOp(op, source);
    else
      rewriter.replaceOpWithNewOp<CastOp>(op, op.getType(), source);
    return success();
  }
};

/// cast(mpc.constant splat(v)) is mpc.constant splat(v rounded to nearest
/// even into the result type), as the cast kernel rounds it (overflow to inf,
/// subnormals kept). A NaN is left to the kernel, which owns its payload.
struct FoldCastOfSplatConstant : OpRewritePattern<CastOp> {
  FoldCastOfSplatConstant(MLIRContext *context) : OpRewritePattern(context) {
    setDebugName("FoldCastOfSplatConstant");
    addDebugLabels(kFoldCastsLabel);
  }

  LogicalResult matchAndRewrite(CastOp op,
                                PatternRewriter &rewriter) const override {
    auto constant = op.getInput().getDefiningOp<ConstantOp>();
    if (!constant)
      return failure();
    auto splat = dyn_cast<SplatElementsAttr>(constant.getValue());
    if (!splat)
      return rewriter.notifyMatchFailure(op, "not a splat constant");
    APFloat value = splat.getSplatValue<APFloat>();
    if (value.isNaN())
      return rewriter.notifyMatchFailure(op, "a NaN constant");
    bool losesInfo = false;
    value.convert(floatElementOf(op.getResult()).getFloatSemantics(),
                  APFloat::rmNearestTiesToEven, &losesInfo);
    rewriter.replaceOpWithNewOp<ConstantOp>(
        op, op.getType(), DenseElementsAttr::get(op.getType(), value));
    return success();
  }
};

} // namespace

void CastOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                         MLIRContext *context) {
  patterns.add<FoldExactCastChain, FoldCastOfSplatConstant>(context);
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult CausalMaskOp::verify() {
  // causal_mask_c1
  auto type = getResult().getType();
  if (type.getRank() < 2 ||
      type.getDimSize(type.getRank() - 1) != type.getDimSize(type.getRank() - 2))
    return emitOpError() << "expects a result of rank >= 2 whose last two "
                            "dims are equal, got "
                         << quoted(type);
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

namespace {

/// The dims of heads and of the sequence in `layout`.
std::pair<int64_t, int64_t> headAndSequenceDims(AttentionLayout layout) {
  return layout == AttentionLayout::BHTD ? std::pair<int64_t, int64_t>{1, 2}
                                         : std::pair<int64_t, int64_t>{2, 1};
}

AttentionShape attentionShape(RankedTensorType q, RankedTensorType k,
                              RankedTensorType v, AttentionLayout layout) {
  auto [h, t] = headAndSequenceDims(layout);
  return {q.getDimSize(0), q.getDimSize(h), q.getDimSize(t),
          k.getDimSize(t), q.getDimSize(3), v.getDimSize(3)};
}

/// attention_c1 to attention_c3, shared by inference and the verifier.
LogicalResult checkAttentionOperands(std::optional<Location> loc,
                                     StringRef name, RankedTensorType q,
                                     RankedTensorType k, RankedTensorType v,
                                     AttentionLayout layout) {
  // attention_c1
  for (RankedTensorType type : {q, k, v})
    if (type.getRank() != 4)
      return opError(loc, name, "expects query, key and value of rank 4, got ",
                     quoted(type));
  // attention_c2
  if (q.getElementType() != k.getElementType() ||
      q.getElementType() != v.getElementType())
    return opError(loc, name,
                   "expects query, key and value of one element type, got ",
                   quoted(q), ", ", quoted(k), " and ", quoted(v));
  // attention_c3
  auto [h, t] = headAndSequenceDims(layout);
  if (k.getDimSize(0) != q.getDimSize(0) ||
      v.getDimSize(0) != q.getDimSize(0) ||
      k.getDimSize(h) != q.getDimSize(h) || v.getDimSize(h) != q.getDimSize(h))
    return opError(loc, name,
                   "expects query, key and value of equal batch and head "
                   "extents in layout ",
                   stringifyAttentionLayout(layout), ", got ", quoted(q), ", ",
                   quoted(k), " and ", quoted(v));
  if (v.getDimSize(t) != k.getDimSize(t))
    return opError(loc, name,
                   "expects key and value of one sequence length, "
                   "got ",
                   quoted(k), " and ", quoted(v));
  if (k.getDimSize(3) != q.getDimSize(3))
    return opError(loc, name, "expects query and key of one head dim, got ",
                   quoted(q), " and ", quoted(k));
  return success();
}

/// attention_c4 to attention_c6.
LogicalResult verifyAttentionAttributes(Operation *op, AttentionShape shape,
                                        Value mask, bool causal, double scale) {
  // attention_c4
  if (mask) {
    auto type = cast<RankedTensorType>(mask.getType());
    if (type.getShape() != ArrayRef<int64_t>{shape.queries, shape.keys})
      return op->emitOpError() << "expects a mask of shape "
                               << shapeString({shape.queries, shape.keys})
                               << " (queries x keys), got " << quoted(type);
  }
  // attention_c5
  if (causal && shape.queries != shape.keys)
    return op->emitOpError() << "expects as many queries as keys when causal, "
                                "got "
                             << shape.queries << " and " << shape.keys;
  if (causal && mask)
    return op->emitOpError() << "expects either causal or a mask, not both";
  // attention_c6
  if (!isPositiveAsF32(scale))
    return op->emitOpError() << "expects a scale that is positive and finite "
                                "in f32, got "
                             << formatDecimal(scale);
  return success();
}

} // namespace

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *context,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto q = staticTensor(loc, name, adaptor.getQuery(), "the query");
  auto k = staticTensor(loc, name, adaptor.getKey(), "the key");
  auto v = staticTensor(loc, name, adaptor.getValue(), "the value");
  if (failed(q) || failed(k) || failed(v))
    return failure();
  // While parsing, a defaulted layout is not yet in the properties.
  AttentionLayoutAttr layoutAttr = adaptor.getLayoutAttr();
  AttentionLayout layout =
      layoutAttr ? layoutAttr.getValue() : AttentionLayout::BHTD;
  if (failed(checkAttentionOperands(loc, name, *q, *k, *v, layout)))
    return failure();
  AttentionShape shape = attentionShape(*q, *k, *v, layout);
  SmallVector<int64_t> result(q->getShape());
  result[3] = shape.valueDim;
  inferred.push_back(q->clone(result));
  inferred.push_back(RankedTensorType::get(
      {shape.batch, shape.heads, shape.queries}, Float32Type::get(context)));
  return success();
}

AttentionShape AttentionOp::getShape() {
  return attentionShape(getQuery().getType(), getKey().getType(),
                        getValue().getType(), getLayout());
}

LogicalResult AttentionOp::verify() {
  return verifyAttentionAttributes(*this, getShape(), getMask(), getCausal(),
                                   getScale().convertToDouble());
}

AttentionShape AttentionGradOp::getShape() {
  return attentionShape(getQuery().getType(), getKey().getType(),
                        getValue().getType(), getLayout());
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

/// Shared by the reductions: drops (or keeps as 1) the reduced dims.
static LogicalResult inferReduce(std::optional<Location> loc, StringRef name,
                                 Value inputValue, ArrayRef<int64_t> dims,
                                 bool keepdim,
                                 SmallVectorImpl<Type> &inferred) {
  auto input = staticTensor(loc, name, inputValue, "the input");
  if (failed(input))
    return failure();
  // reduce_c1
  if (dims.empty())
    return opError(loc, name, "expects at least one dim to reduce");
  llvm::SmallSet<int64_t, 4> reduced;
  for (int64_t dim : dims) {
    if (dim < 0 || dim >= input->getRank())
      return opError(loc, name, "expects dims in [0, ", input->getRank(),
                     "), got ", dim);
    if (!reduced.insert(dim).second)
      return opError(loc, name, "expects each dim once, got ", dim, " twice");
  }
  SmallVector<int64_t> shape;
  for (auto [i, extent] : llvm::enumerate(input->getShape())) {
    if (!reduced.contains(i))
      shape.push_back(extent);
    else if (keepdim)
      shape.push_back(1);
  }
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return success();
}

#define MPC_REDUCE_INFER(OP)                                                   \
  LogicalResult OP::inferReturnTypes(MLIRContext *,                            \
                                     std::optional<Location> loc,              \
                                     Adaptor adaptor,                          \
                                     SmallVectorImpl<Type> &inferred) {        \
    return inferReduce(loc, getOperationName(), adaptor.getInput(),            \
                       adaptor.getDims(), adaptor.getKeepdim(), inferred);     \
  }
MPC_REDUCE_INFER(ReduceSumOp)
MPC_REDUCE_INFER(ReduceMeanOp)
MPC_REDUCE_INFER(ReduceMaxOp)
#undef MPC_REDUCE_INFER

static LogicalResult verifyDim(Operation *op, int64_t dim, int64_t rank) {
  if (dim < 0 || dim >= rank)
    return op->emitOpError() << "expects dim in [0, " << rank << "), got "
                             << dim;
  return success();
}

LogicalResult SoftmaxOp::verify() { // softmax_c1
  return verifyDim(*this, getDim(), getInput().getType().getRank());
}

LogicalResult LogSoftmaxOp::verify() { // log_softmax_c1
  return verifyDim(*this, getDim(), getInput().getType().getRank());
}

/// C1-C3 of layer_norm and rms_norm: gamma spans the trailing dims, has
/// the input's element type or f32, and eps is positive in f32.
static LogicalResult verifyTrailingNorm(Operation *op, RankedTensorType input,
                                        RankedTensorType gamma, double eps) {
  // layer_norm_c1, rms_norm_c1
  if (gamma.getRank() < 1 || gamma.getRank() > input.getRank() ||
      input.getShape().take_back(gamma.getRank()) != gamma.getShape())
    return op->emitOpError()
           << "expects gamma's shape to equal the trailing dims of the input, "
              "got "
           << quoted(gamma) << " for " << quoted(input);
  // layer_norm_c2, rms_norm_c2
  if (gamma.getElementType() != input.getElementType() &&
      !gamma.getElementType().isF32())
    return op->emitOpError()
           << "expects gamma of the input's element type or f32, got "
           << quoted(gamma) << " for " << quoted(input);
  // layer_norm_c3, rms_norm_c3
  if (!isPositiveAsF32(eps))
    return op->emitOpError()
           << "expects eps > 0 and finite in f32, got " << formatDecimal(eps);
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyTrailingNorm(*this, getInput().getType(), getGamma().getType(),
                            getEps().convertToDouble());
}

LogicalResult RmsNormOp::verify() {
  return verifyTrailingNorm(*this, getInput().getType(), getGamma().getType(),
                            getEps().convertToDouble());
}

/// batch_norm's trailing types: the running statistics' written after
/// gamma's, as `running <type>`, only where it differs (f32 state beside
/// bf16 parameters); then the saved statistics', as `stats <type>`, where
/// the op returns them.
static ParseResult parseNormTypes(OpAsmParser &parser, Type &running,
                                  Type &stats, Type gamma) {
  running = gamma;
  if (succeeded(parser.parseOptionalKeyword("running")) &&
      failed(parser.parseType(running)))
    return failure();
  if (succeeded(parser.parseOptionalKeyword("stats")))
    return parser.parseType(stats);
  return success();
}
static void printNormTypes(OpAsmPrinter &printer, Operation *, Type running,
                           Type stats, Type gamma) {
  StringRef separator = "";
  if (running != gamma) {
    printer << "running " << running;
    separator = " ";
  }
  if (stats)
    printer << separator << "stats " << stats;
}

/// A batch norm's saved statistics, when present, are [2, C] f32: each
/// channel's mean and inverse standard deviation.
static LogicalResult verifyBatchNormStats(Operation *op, Value stats,
                                          RankedTensorType gamma) {
  if (!stats)
    return success();
  auto type = cast<RankedTensorType>(stats.getType());
  if (type.getShape() != ArrayRef<int64_t>{2, gamma.getDimSize(0)})
    return op->emitOpError()
           << "expects stats of shape [2, " << gamma.getDimSize(0)
           << "] (the mean and inverse deviation of each channel), got "
           << quoted(type);
  return success();
}

LogicalResult BatchNormOp::verify() {
  auto input = getInput().getType();
  auto gamma = getGamma().getType();
  // batch_norm_c1
  if (input.getRank() != 2 && input.getRank() != 4)
    return emitOpError() << "expects an input of rank 2 (NC) or 4 (NCHW), got "
                         << quoted(input);
  // batch_norm_c2
  if (gamma.getShape() != ArrayRef<int64_t>{input.getDimSize(1)})
    return emitOpError() << "expects gamma of shape [" << input.getDimSize(1)
                         << "] (the channels), got " << quoted(gamma);
  // batch_norm_c3
  if (gamma.getElementType() != input.getElementType() &&
      !gamma.getElementType().isF32())
    return emitOpError() << "expects gamma of the input's element type or "
                            "f32, got "
                         << quoted(gamma) << " for " << quoted(input);
  // batch_norm_c5
  auto running = getRunningMean().getType();
  if (running.getShape() != gamma.getShape() ||
      (running.getElementType() != gamma.getElementType() &&
       !running.getElementType().isF32()))
    return emitOpError() << "expects running statistics of gamma's shape and "
                            "gamma's element type or f32, got "
                         << quoted(running) << " for " << quoted(gamma);
  // batch_norm_c4
  double momentum = getMomentum().convertToDouble();
  double eps = getEps().convertToDouble();
  if (!(momentum >= 0 && momentum <= 1) || !isPositiveAsF32(eps))
    return emitOpError() << "expects 0 <= momentum <= 1 and eps > 0 and "
                            "finite in f32, got "
                            "momentum "
                         << formatDecimal(momentum) << " and eps "
                         << formatDecimal(eps);
  // batch_norm_c6
  return verifyBatchNormStats(*this, getStats(), gamma);
}

LogicalResult MaxPool2dIndicesGradOp::verify() {
  auto grad = getGrad().getType();
  auto result = getResult().getType();
  // max_pool2d_indices_grad_c1
  if (getIndices().getType().getShape() != grad.getShape())
    return emitOpError() << "expects indices of the gradient's shape "
                         << quoted(grad) << ", got "
                         << quoted(getIndices().getType());
  ArrayRef<int64_t> kernel = getKernel(), stride = getStride(),
                    padding = getPadding();
  if (kernel.size() != 2 || stride.size() != 2 || padding.size() != 2)
    return emitOpError() << "expects two entries in kernel, stride and "
                            "padding";
  // max_pool2d_indices_grad_c2
  bool pools = grad.getRank() == 4 && result.getRank() == 4 &&
               result.getElementType() == grad.getElementType() &&
               result.getDimSize(0) == grad.getDimSize(0) &&
               result.getDimSize(1) == grad.getDimSize(1);
  for (int i = 0; i < 2 && pools; ++i) {
    if (kernel[i] < 1 || stride[i] < 1 || padding[i] < 0 ||
        padding[i] > kernel[i] / 2 ||
        result.getDimSize(2 + i) + 2 * padding[i] < kernel[i]) {
      pools = false;
      break;
    }
    int64_t size = result.getDimSize(2 + i);
    pools = grad.getDimSize(2 + i) ==
                pooledExtent(size, kernel[i], stride[i], padding[i], false) ||
            grad.getDimSize(2 + i) ==
                pooledExtent(size, kernel[i], stride[i], padding[i], true);
  }
  if (!pools)
    return emitOpError() << "expects a result that pools to the gradient "
                         << quoted(grad) << " with kernel "
                         << shapeString(kernel) << ", stride "
                         << shapeString(stride) << " and padding "
                         << shapeString(padding) << ", got " << quoted(result);
  return success();
}

LogicalResult BatchNormGradOp::verify() {
  // batch_norm_grad_c1
  if (failed(verifyBatchNormStats(*this, getStats(), getGamma().getType())))
    return failure();
  // batch_norm_grad_c2
  if (Value beta = getReluBeta()) {
    if (!getStats())
      return emitOpError() << "expects stats with relu (the ReLU's mask is "
                              "the forward's output, normalised with them)";
    if (beta.getType() != getGamma().getType())
      return emitOpError() << "expects relu's beta of gamma's type "
                           << quoted(getGamma().getType()) << ", got "
                           << quoted(beta.getType());
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Embedding and loss
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto table = staticTensor(loc, name, adaptor.getTable(), "the table");
  auto indices = staticTensor(loc, name, adaptor.getIndices(), "the indices");
  if (failed(table) || failed(indices))
    return failure();
  // embedding_c1
  if (table->getRank() != 2)
    return opError(loc, name, "expects a table of rank 2, got ",
                   quoted(*table));
  SmallVector<int64_t> shape(indices->getShape());
  shape.push_back(table->getDimSize(1));
  inferred.push_back(RankedTensorType::get(shape, table->getElementType()));
  return success();
}

LogicalResult CrossEntropyOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto logits = staticTensor(loc, name, adaptor.getLogits(), "the logits");
  auto targets = staticTensor(loc, name, adaptor.getTargets(), "the targets");
  if (failed(logits) || failed(targets))
    return failure();
  // cross_entropy_c1
  if (logits->getRank() < 2)
    return opError(loc, name, "expects logits of rank >= 2 ([..., C]), got ",
                   quoted(*logits));
  // cross_entropy_c2
  if (targets->getShape() != logits->getShape().drop_back())
    return opError(loc, name, "expects targets of shape ",
                   shapeString(logits->getShape().drop_back()),
                   " (the logits without the class dim), got ",
                   quoted(*targets));
  inferred.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

LogicalResult MseLossOp::inferReturnTypes(MLIRContext *context,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto input = staticTensor(loc, name, adaptor.getInput(), "the input");
  auto target = staticTensor(loc, name, adaptor.getTarget(), "the target");
  if (failed(input) || failed(target))
    return failure();
  // mse_loss_c1
  if (*input != *target)
    return opError(loc, name, "expects the target to have the input's type ",
                   quoted(*input), ", got ", quoted(*target));
  inferred.push_back(RankedTensorType::get({}, Float32Type::get(context)));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto input = getInput().getType();
  auto result = getResult().getType();
  // reshape_c1
  std::optional<int64_t> inputCount = numElements(input);
  std::optional<int64_t> resultCount = numElements(result);
  for (auto [count, type] :
       {std::pair(inputCount, input), std::pair(resultCount, result)})
    if (!count)
      return emitOpError() << "expects at most 2^63 - 1 elements, got "
                           << quoted(type);
  if (*inputCount != *resultCount)
    return emitOpError() << "expects the same number of elements, got "
                         << *inputCount << " in " << quoted(input) << " and "
                         << *resultCount << " in " << quoted(result);
  // reshape_c2
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "expects one element type, got " << quoted(input)
                         << " and " << quoted(result);
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return {};
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto input = staticTensor(loc, name, adaptor.getInput(), "the input");
  if (failed(input))
    return failure();
  // transpose_c1
  ArrayRef<int64_t> perm = adaptor.getPermutation();
  SmallVector<bool> used(input->getRank(), false);
  bool valid = static_cast<int64_t>(perm.size()) == input->getRank();
  for (int64_t p : perm) {
    if (!valid || p < 0 || p >= input->getRank() || used[p]) {
      valid = false;
      break;
    }
    used[p] = true;
  }
  if (!valid)
    return opError(loc, name, "expects a permutation of [0, ",
                   input->getRank(), "), got ", shapeString(perm));
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(input->getDimSize(p));
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto input = getInput().getType();
  auto result = getResult().getType();
  // broadcast_c1
  int64_t offset = result.getRank() - input.getRank();
  bool valid = offset >= 0;
  for (int64_t i = 0; valid && i < input.getRank(); ++i) {
    int64_t from = input.getDimSize(i), to = result.getDimSize(offset + i);
    valid = from == to || from == 1;
  }
  if (!valid)
    return emitOpError() << "expects an input that broadcasts to the result, "
                            "got "
                         << quoted(input) << " to " << quoted(result);
  // broadcast_c2
  if (input.getElementType() != result.getElementType())
    return emitOpError() << "expects one element type, got " << quoted(input)
                         << " and " << quoted(result);
  return success();
}

SmallVector<int64_t> SliceOp::getStridesOrDefault() {
  if (std::optional<ArrayRef<int64_t>> strides = getStrides())
    return SmallVector<int64_t>(*strides);
  return SmallVector<int64_t>(getInput().getType().getRank(), 1);
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> loc,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  auto input = staticTensor(loc, name, adaptor.getInput(), "the input");
  if (failed(input))
    return failure();
  int64_t rank = input->getRank();
  ArrayRef<int64_t> starts = adaptor.getStarts(), limits = adaptor.getLimits();
  SmallVector<int64_t> strides(rank, 1);
  if (std::optional<ArrayRef<int64_t>> given = adaptor.getStrides())
    strides.assign(given->begin(), given->end());
  // slice_c1
  if (static_cast<int64_t>(starts.size()) != rank ||
      static_cast<int64_t>(limits.size()) != rank ||
      static_cast<int64_t>(strides.size()) != rank)
    return opError(loc, name, "expects starts, limits and strides with one "
                   "entry per dim (", rank, "), got ", starts.size(), ", ",
                   limits.size(), " and ", strides.size());
  // slice_c2
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (starts[i] < 0 || starts[i] > limits[i] ||
        limits[i] > input->getDimSize(i) || strides[i] < 1)
      return opError(loc, name, "expects 0 <= start <= limit <= dim and "
                     "stride >= 1 in dim ", i, ", got start ", starts[i],
                     ", limit ", limits[i], ", stride ", strides[i],
                     " for extent ", input->getDimSize(i));
    shape.push_back(llvm::divideCeil(limits[i] - starts[i], strides[i]));
  }
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> loc,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  // concat_c1
  if (adaptor.getInputs().empty())
    return opError(loc, name, "expects at least one input");
  SmallVector<RankedTensorType> inputs;
  for (Value value : adaptor.getInputs()) {
    auto type = staticTensor(loc, name, value, "every input");
    if (failed(type))
      return failure();
    inputs.push_back(*type);
  }
  RankedTensorType first = inputs.front();
  for (RankedTensorType type : inputs)
    if (type.getRank() != first.getRank() ||
        type.getElementType() != first.getElementType())
      return opError(loc, name, "expects inputs of one rank and element "
                     "type, got ", quoted(first), " and ", quoted(type));
  // concat_c2
  int64_t dim = adaptor.getDim();
  if (dim < 0 || dim >= first.getRank())
    return opError(loc, name, "expects dim in [0, ", first.getRank(),
                   "), got ", dim);
  // concat_c3
  SmallVector<int64_t> shape(first.getShape());
  shape[dim] = 0;
  for (RankedTensorType type : inputs) {
    for (int64_t i = 0; i < first.getRank(); ++i)
      if (i != dim && type.getDimSize(i) != first.getDimSize(i))
        return opError(loc, name, "expects inputs that agree in every dim "
                       "but ", dim, ", got ", quoted(first), " and ",
                       quoted(type));
    std::optional<int64_t> sum =
        llvm::checkedAdd(shape[dim], type.getDimSize(dim));
    if (!sum)
      return opError(loc, name, "expects the inputs' extents in dim ", dim,
                     " to add up to at most 2^63 - 1");
    shape[dim] = *sum;
  }
  inferred.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

int64_t mlir::mpc::pooledExtent(int64_t size, int64_t kernel, int64_t stride,
                                int64_t padding, bool ceilMode) {
  int64_t span = size + 2 * padding - kernel;
  int64_t extent = span / stride + 1;
  if (ceilMode && span % stride != 0 && extent * stride < size + padding)
    ++extent;
  return extent;
}

/// Shared by the pools: pooledExtent per spatial dim.
static LogicalResult inferPool2d(std::optional<Location> loc, StringRef name,
                                 Value inputValue, ArrayRef<int64_t> kernel,
                                 std::optional<ArrayRef<int64_t>> strideAttr,
                                 std::optional<ArrayRef<int64_t>> paddingAttr,
                                 bool ceilMode,
                                 SmallVectorImpl<Type> &inferred) {
  auto input = staticTensor(loc, name, inputValue, "the input");
  if (failed(input))
    return failure();
  // pool_c1
  if (input->getRank() != 4)
    return opError(loc, name, "expects an NCHW input of rank 4, got ",
                   quoted(*input));
  // pool_c2
  if (failed(checkPair(loc, name, "kernel", kernel, 1)))
    return failure();
  SmallVector<int64_t, 2> stride = pairOr(strideAttr, kernel);
  SmallVector<int64_t, 2> padding = pairOr(paddingAttr, {0, 0});
  if (failed(checkPair(loc, name, "stride", stride, 1)) ||
      failed(checkPair(loc, name, "padding", padding, 0)))
    return failure();
  for (int i = 0; i < 2; ++i)
    if (padding[i] > kernel[i] / 2)
      return opError(loc, name, "expects padding at most half the kernel, "
                     "got padding ", shapeString(padding), " for kernel ",
                     shapeString(kernel));
  // pool_c3
  SmallVector<int64_t> shape = {input->getDimSize(0), input->getDimSize(1)};
  for (int i = 0; i < 2; ++i) {
    // 2 * padding <= kernel, so neither term overflows.
    int64_t span = input->getDimSize(2 + i) + (2 * padding[i] - kernel[i]);
    if (span < 0)
      return opError(loc, name, "expects a kernel that fits the padded "
                     "input, got kernel ", shapeString(kernel), " for ",
                     quoted(*input));
    shape.push_back(pooledExtent(input->getDimSize(2 + i), kernel[i], stride[i],
                                 padding[i], ceilMode));
  }
  inferred.push_back(RankedTensorType::get(shape, input->getElementType()));
  return success();
}

#define MPC_POOL(OP)                                                           \
  LogicalResult OP::inferReturnTypes(                                          \
      MLIRContext *, std::optional<Location> loc, Adaptor adaptor,             \
      SmallVectorImpl<Type> &inferred) {                                       \
    return inferPool2d(loc, getOperationName(), adaptor.getInput(),            \
                       adaptor.getKernel(), adaptor.getStride(),               \
                       adaptor.getPadding(), adaptor.getCeilMode(), inferred); \
  }                                                                            \
  SmallVector<int64_t, 2> OP::getStrideOrDefault() {                           \
    return pairOr(getStride(), getKernel());                                   \
  }                                                                            \
  SmallVector<int64_t, 2> OP::getPaddingOrDefault() {                          \
    return pairOr(getPadding(), {0, 0});                                       \
  }
MPC_POOL(MaxPool2dOp)
MPC_POOL(AvgPool2dOp)
#undef MPC_POOL

LogicalResult MaxPool2dWithIndicesOp::inferReturnTypes(
    MLIRContext *context, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  StringRef name = getOperationName();
  // max_pool2d_with_indices_c1
  if (failed(inferPool2d(loc, name, adaptor.getInput(), adaptor.getKernel(),
                         adaptor.getStride(), adaptor.getPadding(),
                         adaptor.getCeilMode(), inferred)))
    return failure();
  // max_pool2d_with_indices_c2
  ArrayRef<int64_t> kernel = adaptor.getKernel();
  if (kernel[0] * kernel[1] > 127)
    return opError(loc, name, "expects a kernel of at most 127 elements (a "
                   "window position is a byte), got ", shapeString(kernel));
  auto pooled = cast<RankedTensorType>(inferred.back());
  inferred.push_back(RankedTensorType::get(pooled.getShape(),
                                           IntegerType::get(context, 8)));
  return success();
}

SmallVector<int64_t, 2> MaxPool2dWithIndicesOp::getStrideOrDefault() {
  return pairOr(getStride(), getKernel());
}

SmallVector<int64_t, 2> MaxPool2dWithIndicesOp::getPaddingOrDefault() {
  return pairOr(getPadding(), {0, 0});
}

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxGradOp::verify() { // softmax_grad_c1
  return verifyDim(*this, getDim(), getGrad().getType().getRank());
}

LogicalResult LogSoftmaxGradOp::verify() { // log_softmax_grad_c1
  return verifyDim(*this, getDim(), getGrad().getType().getRank());
}

LogicalResult EmbeddingGradOp::verify() {
  // embedding_grad_c1
  auto grad = getGrad().getType();
  auto result = getResult().getType();
  SmallVector<int64_t> expected(getIndices().getType().getShape());
  expected.push_back(result.getRank() == 2 ? result.getDimSize(1) : -1);
  if (result.getRank() != 2 || grad.getShape() != ArrayRef(expected) ||
      grad.getElementType() != result.getElementType())
    return emitOpError() << "expects a [V, D] result and a gradient shaped "
                            "as the indices followed by D, got "
                         << quoted(grad) << " for " << quoted(result);
  return success();
}

//===----------------------------------------------------------------------===//
// TableGen'd definitions
//===----------------------------------------------------------------------===//

#define GET_OP_CLASSES
#include "dialect/MpcOps.cpp.inc"
