//===- MpcDialect.cpp - mpc dialect and attributes ----------------*- C++ -*-===//
//
// This file implements the mpc dialect and the initialiser attribute.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcDialect.h"

#include "dialect/MpcOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace mlir;
using namespace mlir::mpc;

#include "dialect/MpcEnums.cpp.inc"
#include "dialect/MpcOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialect/MpcAttrs.cpp.inc"

void MpcDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialect/MpcOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialect/MpcAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// InitializerAttr
//===----------------------------------------------------------------------===//

/// The shortest `%g` spelling that parses back to `value`, so `0.02` prints as
/// written rather than as `2.000000e-02`.
std::string mlir::mpc::formatDecimal(double value) {
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value)
      break;
  }
  std::string result(text);
  // `-0` would read back as the integer 0 and lose the sign.
  if (value == 0 && std::signbit(value))
    return "-0.0";
  // Whole numbers print whole: `200`, not `%g`'s `2e+02`.
  if (std::isfinite(value) && value == std::trunc(value) &&
      std::fabs(value) < 1e15) {
    std::snprintf(text, sizeof(text), "%.0f", value);
    return text;
  }
  // The MLIR lexer reads `1e-05` as an integer then an identifier; a float
  // literal needs a `.` before the exponent.
  if (result.find_first_of(".ein") == std::string::npos)
    return result;
  size_t exponent = result.find('e');
  if (exponent != std::string::npos &&
      result.find('.') == std::string::npos)
    result.insert(exponent, ".0");
  return result;
}

LogicalResult
InitializerAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        InitKind kind, DenseF64ArrayAttr argsAttr) {
  ArrayRef<double> args = argsAttr.asArrayRef();
  auto expectArgs = [&](size_t lo, size_t hi, StringRef what) -> LogicalResult {
    if (args.size() >= lo && args.size() <= hi)
      return success();
    return emitError() << "initialiser '" << stringifyInitKind(kind)
                       << "' takes " << what << ", got " << args.size()
                       << " argument(s)";
  };
  LogicalResult counted = success();
  switch (kind) {
  case InitKind::Zeros:
  case InitKind::Ones:
    counted = expectArgs(0, 0, "no arguments");
    break;
  case InitKind::Constant:
    counted = expectArgs(1, 1, "one argument (the value)");
    break;
  case InitKind::Normal:
    counted = expectArgs(1, 2, "(std) or (mean, std)");
    break;
  case InitKind::Uniform:
    counted = expectArgs(2, 2, "two arguments (low, high)");
    break;
  case InitKind::KaimingUniform:
  case InitKind::KaimingNormal:
    counted = expectArgs(0, 1, "an optional negative slope");
    break;
  case InitKind::XavierUniform:
  case InitKind::XavierNormal:
    counted = expectArgs(0, 1, "an optional gain");
    break;
  }
  if (failed(counted))
    return failure();
  // An infinite or NaN argument gives no usable tensor, and `inf` and `nan`
  // could not be printed back in a form the parser accepts.
  for (double arg : args)
    if (!std::isfinite(arg))
      return emitError() << "initialiser '" << stringifyInitKind(kind)
                         << "' needs finite arguments, got "
                         << formatDecimal(arg);
  switch (kind) {
  case InitKind::Normal:
    if (!(args.back() > 0))
      return emitError() << "initialiser 'normal' needs std > 0, got "
                         << formatDecimal(args.back());
    return success();
  case InitKind::Uniform:
    if (!(args[0] < args[1]))
      return emitError() << "initialiser 'uniform' needs low < high, got ("
                         << formatDecimal(args[0]) << ", "
                         << formatDecimal(args[1]) << ")";
    return success();
  case InitKind::KaimingUniform:
  case InitKind::KaimingNormal:
    if (!args.empty() && !(args[0] >= 0))
      return emitError() << "initialiser '" << stringifyInitKind(kind)
                         << "' needs a negative slope >= 0, got "
                         << formatDecimal(args[0]);
    return success();
  case InitKind::XavierUniform:
  case InitKind::XavierNormal:
    if (!args.empty() && !(args[0] > 0))
      return emitError() << "initialiser '" << stringifyInitKind(kind)
                         << "' needs a gain > 0, got "
                         << formatDecimal(args[0]);
    return success();
  default:
    return success();
  }
}

Attribute InitializerAttr::parseBare(AsmParser &parser) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(loc) << "unknown initialiser '" << keyword
                          << "'; expected zeros, ones, constant, normal, "
                             "uniform, kaiming_uniform, kaiming_normal, "
                             "xavier_uniform or xavier_normal";
    return {};
  }
  SmallVector<double> args;
  if (succeeded(parser.parseOptionalLParen())) {
    if (parser.parseCommaSeparatedList([&]() -> ParseResult {
          // A generic attribute takes `1` as well as `-0.5` and `1.0e-5`.
          SMLoc argLoc = parser.getCurrentLocation();
          Attribute value;
          if (parser.parseAttribute(value))
            return failure();
          if (auto number = dyn_cast<FloatAttr>(value)) {
            args.push_back(number.getValueAsDouble());
          } else if (auto number = dyn_cast<IntegerAttr>(value);
                     number && !isa<BoolAttr>(value)) {
            // Any width and signedness: `200 : ui8` is 200, not -56.
            llvm::APFloat converted(0.0);
            converted.convertFromAPInt(number.getValue(),
                                       !number.getType().isUnsignedInteger(),
                                       llvm::APFloat::rmNearestTiesToEven);
            args.push_back(converted.convertToDouble());
          } else {
            return parser.emitError(argLoc)
                   << "expected a number as initialiser argument, got "
                   << value;
          }
          return success();
        }) ||
        parser.parseRParen())
      return {};
  }
  return InitializerAttr::getChecked([&] { return parser.emitError(loc); },
                                     parser.getContext(), *kind,
                                     DenseF64ArrayAttr::get(parser.getContext(), args));
}

void InitializerAttr::printBare(AsmPrinter &printer) const {
  printer << stringifyInitKind(getKind());
  ArrayRef<double> args = getArgs().asArrayRef();
  if (args.empty())
    return;
  printer << '(';
  llvm::interleaveComma(args, printer,
                        [&](double value) { printer << formatDecimal(value); });
  printer << ')';
}

Attribute InitializerAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  Attribute attr = parseBare(parser);
  if (!attr || parser.parseGreater())
    return {};
  return attr;
}

void InitializerAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printBare(printer);
  printer << '>';
}

FailureOr<llvm::APFloat> mlir::mpc::parseF64(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return llvm::APFloat(value);
}

FailureOr<bool> mlir::mpc::parseBoolKeyword(AsmParser &parser) {
  if (succeeded(parser.parseOptionalKeyword("true")))
    return true;
  if (succeeded(parser.parseOptionalKeyword("false")))
    return false;
  return parser.emitError(parser.getCurrentLocation(),
                          "expected 'true' or 'false'");
}

SmallVector<StringRef> OptimizerAttr::getSlotNames() const {
  SmallVector<StringRef> names;
  if (getKind() == OptimizerKind::Sgd)
    names.push_back("momentum_buffer");
  else
    llvm::append_range(names, ArrayRef<StringRef>{"exp_avg", "exp_avg_sq"});
  if (getMasterWeights() == MasterWeights::Kahan)
    names.push_back("kahan_compensation");
  if (getAccumulate() > 1)
    names.push_back("grad_accumulator");
  return names;
}

SmallVector<Type> OptimizerAttr::getSlotTypes(Type param) const {
  Type moments = getStateType() ? getStateType() : param;
  SmallVector<Type> types(getKind() == OptimizerKind::Sgd ? 1 : 2, moments);
  if (getMasterWeights() == MasterWeights::Kahan)
    types.push_back(param);
  if (getAccumulate() > 1)
    types.push_back(param);
  return types;
}
