//===- Report.cpp - `mpc compile --report` ------------------------*- C++ -*-===//
//
// This file implements the precision report, the table a user reads before
// training: what precision every forward op runs in and why, the casts that
// costs, and the memory of the generated library beside O0's.
//
//===----------------------------------------------------------------------===//

#include "compiler/Report.h"

#include "compiler/Codegen.h"
#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Location.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::mpc;

namespace {

const char *levelName(AmpLevel level) {
  switch (level) {
  case AmpLevel::O0:
    return "O0";
  case AmpLevel::O1:
    return "O1";
  case AmpLevel::O2:
    return "O2";
  case AmpLevel::O3:
    return "O3";
  }
  llvm_unreachable("unknown level");
}

/// The forward pass (precision assigned) and the training step of a model,
/// lowered by the pipeline runCompile runs.
struct LoweredModel {
  OwningOpRef<ModuleOp> forward, train;
  ModelOp forwardModel() { return *forward->getOps<ModelOp>().begin(); }
  ModelOp trainModel() { return *train->getOps<ModelOp>().begin(); }
};

FailureOr<LoweredModel> lower(ModuleOp module, AmpLevel level, HalfType half,
                              const PipelineOptions &options) {
  LoweredModel lowered;
  lowered.train = module.clone();
  PassManager forward(module.getContext());
  buildForwardPipeline(forward, level, half, options);
  if (failed(forward.run(*lowered.train)))
    return failure();
  lowered.forward = lowered.train->clone();
  PassManager training(module.getContext());
  buildTrainingPipeline(training, options);
  if (failed(training.run(*lowered.train)))
    return failure();
  return lowered;
}

/// `file:line:col` of the first file location in `loc`, file name only.
std::string locationText(Location loc) {
  std::string text = "-";
  loc->walk([&](Location inner) {
    if (auto file = dyn_cast<FileLineColLoc>(inner)) {
      text = llvm::formatv("{0}:{1}:{2}",
                           llvm::sys::path::filename(file.getFilename()),
                           file.getLine(), file.getColumn())
                 .str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return text;
}

/// The element type of an op's first float tensor result, or null.
Type floatResultType(Operation *op) {
  for (Value result : op->getResults())
    if (auto type = dyn_cast<RankedTensorType>(result.getType()))
      if (isa<FloatType>(type.getElementType()))
        return type.getElementType();
  return Type();
}

std::string typeText(Type type) {
  if (!type)
    return "-";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << type;
  return text;
}

/// Why `op` runs in the type it got: the rule of mpc-assign-precision that
/// decided it (see its description in passes/Passes.td).
std::string reason(Operation *op, AmpLevel level) {
  if (level == AmpLevel::O0)
    return "O0: f32 throughout";
  if (op->hasAttr("mpc.precision"))
    return "override: mpc.precision";
  auto policy = dyn_cast<PrecisionPolicyOpInterface>(op);
  if (!policy)
    return "no policy: unchanged";
  if (!floatResultType(op))
    return "no float result";
  // Follow and promote ops without a float operand (constants) keep the
  // type they were declared with.
  bool floatOperand = llvm::any_of(op->getOperandTypes(), [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor && isa<FloatType>(tensor.getElementType());
  });
  PrecisionClass precisionClass = policy.getPrecisionClass();
  if (!floatOperand && (precisionClass == PrecisionClass::Follow ||
                        precisionClass == PrecisionClass::Promote))
    return "no float operand: as declared";
  std::string text;
  switch (precisionClass) {
  case PrecisionClass::Lower:
    text = std::string("policy: lower at ") + levelName(level);
    break;
  case PrecisionClass::KeepF32:
    text = std::string("policy: keep_f32 at ") + levelName(level);
    if (isa<CrossEntropyOp>(op))
      text += ", f32 loss";
    break;
  case PrecisionClass::Promote:
    text = "promote: widest operand";
    break;
  case PrecisionClass::Follow:
    text = "follow: operand type";
    break;
  }
  // Norm parameters kept in f32 next to half activations.
  if (isa<LayerNormOp, BatchNormOp>(op) && op->getNumOperands() > 1) {
    auto param = dyn_cast<RankedTensorType>(op->getOperand(1).getType());
    Type result = floatResultType(op);
    if (param && result && param.getElementType() != result)
      text += ", " + typeText(param.getElementType()) + " params";
  }
  return text;
}

/// Prints rows as a table: columns padded to their widest cell (the last
/// unpadded), numbers right-aligned where `rightAligned` says so.
void printTable(llvm::raw_ostream &out,
                const std::vector<std::vector<std::string>> &rows,
                ArrayRef<bool> rightAligned = {}) {
  std::vector<size_t> widths;
  for (const auto &row : rows)
    for (auto [i, cell] : llvm::enumerate(row)) {
      if (widths.size() <= i)
        widths.push_back(0);
      widths[i] = std::max(widths[i], cell.size());
    }
  for (const auto &row : rows) {
    std::string line;
    for (auto [i, cell] : llvm::enumerate(row)) {
      bool right = i < rightAligned.size() && rightAligned[i];
      std::string pad(widths[i] - cell.size(), ' ');
      line += "  ";
      line += right ? pad + cell : cell + pad;
    }
    out << StringRef(line).rtrim() << "\n";
  }
}

std::string percent(int64_t part, int64_t whole) {
  if (whole == 0)
    return "-";
  return llvm::formatv("{0:F1}%", 100.0 * double(part) / double(whole)).str();
}

/// Casts of a model body: how many and the bytes their results take.
struct CastCount {
  int64_t count = 0, bytes = 0;
  void add(CastOp cast) {
    ++count;
    bytes += storageBytes(cast.getResult().getType());
  }
};

} // namespace

int mlir::mpc::printReport(ModuleOp module, const CompileOptions &options,
                           llvm::raw_ostream &out) {
  HalfType halfType = options.half.value_or(HalfType::F16);
  const char *half = halfType == HalfType::F16 ? "f16" : "bf16";
  const char *level = levelName(options.amp);
  PipelineOptions pipeline = makePipelineOptions(options);
  FailureOr<LoweredModel> chosen =
      lower(module, options.amp, halfType, pipeline);
  if (failed(chosen))
    return 1;
  // The baseline's findings would repeat the chosen level's, or not apply.
  PipelineOptions quiet = pipeline;
  quiet.werrorNumerics = false;
  quiet.staticLossScale = 0;
  quiet.optimizerEps = 0;
  FailureOr<LoweredModel> baseline =
      lower(module, AmpLevel::O0, halfType, quiet);
  if (failed(baseline))
    return 1;
  ModelOp forward = chosen->forwardModel();

  std::string config = options.amp == AmpLevel::O0
                           ? std::string("--amp=O0")
                           : llvm::formatv("--amp={0} --half={1}", level, half)
                                 .str();
  out << "mpc precision report: model @" << forward.getSymName() << ", "
      << config << "\n\n";

  // 1. Every forward op but the casts, in program order.
  std::vector<std::vector<std::string>> rows = {
      {"location", "op", "category", "type", "reason"}};
  for (Operation &op : forward.getBody().front().without_terminator()) {
    if (isa<CastOp>(op))
      continue;
    auto policy = dyn_cast<PrecisionPolicyOpInterface>(op);
    rows.push_back(
        {locationText(op.getLoc()), op.getName().getStringRef().str(),
         policy ? stringifyPrecisionClass(policy.getPrecisionClass()).str()
                : std::string("-"),
         typeText(floatResultType(&op)), reason(&op, options.amp)});
  }
  out << "Forward ops after precision assignment (" << rows.size() - 1
      << "):\n";
  printTable(out, rows);

  // 2. Casts: the forward pass's, by what they copy, then the whole step's.
  llvm::DenseSet<Value> params(forward.getParams().begin(),
                               forward.getParams().end());
  llvm::DenseSet<Value> inputs(forward.getInputs().begin(),
                               forward.getInputs().end());
  CastCount paramCasts, inputCasts, otherCasts, stepCasts;
  forward.walk([&](CastOp cast) {
    Value source = cast.getOperand();
    (params.contains(source)   ? paramCasts
     : inputs.contains(source) ? inputCasts
                               : otherCasts)
        .add(cast);
  });
  chosen->trainModel().walk([&](CastOp cast) { stepCasts.add(cast); });
  int64_t forwardCount =
      paramCasts.count + inputCasts.count + otherCasts.count;
  int64_t forwardBytes =
      paramCasts.bytes + inputCasts.bytes + otherCasts.bytes;
  out << "\nCasts inserted in the forward pass: " << forwardCount
      << ", writing " << forwardBytes << " bytes per step\n";
  printTable(out,
             {{"half copies of parameters", std::to_string(paramCasts.count),
               std::to_string(paramCasts.bytes) + " bytes",
               "(in the parameter arena)"},
              {"copies of inputs", std::to_string(inputCasts.count),
               std::to_string(inputCasts.bytes) + " bytes", ""},
              {"between ops and to outputs", std::to_string(otherCasts.count),
               std::to_string(otherCasts.bytes) + " bytes", ""}},
             {false, true, true, false});
  out << "Casts in the training step (forward and backward): "
      << stepCasts.count << ", writing " << stepCasts.bytes
      << " bytes per step\n";

  // 3. Memory, from the plans the generated library allocates.
  MemorySummary at = planMemory(chosen->trainModel(), chosen->forwardModel());
  MemorySummary o0 =
      planMemory(baseline->trainModel(), baseline->forwardModel());
  auto row = [&](StringRef name, int64_t MemorySummary::*field) {
    return std::vector<std::string>{name.str(), std::to_string(o0.*field),
                                    std::to_string(at.*field),
                                    percent(at.*field, o0.*field)};
  };
  auto total = [](const MemorySummary &m) {
    return m.params + m.gradients + m.optimizerState + m.activations;
  };
  std::string label = options.amp == AmpLevel::O0
                          ? std::string("O0")
                          : llvm::formatv("{0} {1}", level, half).str();
  out << "\nMemory (bytes), " << label << " beside O0:\n";
  printTable(
      out,
      {{"arena", "O0", label, "of O0"},
       row("parameters, state and half copies", &MemorySummary::params),
       row("  parameters as stored", &MemorySummary::parameterBytes),
       row("  state", &MemorySummary::stateBytes),
       {"  half copies and alignment",
        std::to_string(o0.params - o0.parameterBytes - o0.stateBytes),
        std::to_string(at.params - at.parameterBytes - at.stateBytes),
        percent(at.params - at.parameterBytes - at.stateBytes,
                o0.params - o0.parameterBytes - o0.stateBytes)},
       row("gradients", &MemorySummary::gradients),
       row("optimizer state", &MemorySummary::optimizerState),
       row("activations, train step peak", &MemorySummary::trainActivations),
       row("activations, eval peak", &MemorySummary::evalActivations),
       {"total", std::to_string(total(o0)), std::to_string(total(at)),
        percent(total(at), total(o0))}},
      {false, true, true, true});
  out << "\nActivations (train step peak, memory reused by liveness) at "
      << label << ": " << percent(at.trainActivations, o0.trainActivations)
      << " of O0 (" << at.trainActivations << " of " << o0.trainActivations
      << " bytes)\n";
  return 0;
}
