//===- Report.cpp - `mpc compile --report` ------------------------*- C++
//-*-===//
//
// This file implements the precision report, the table a user reads before
// training: what precision every forward op runs in and why, the casts that
// costs, the memory of the generated library beside O0's, and the kernels
// of one training step with their FLOPs, bytes and roofline bound. With
// --report=json the same content is one JSON object.
//
//===----------------------------------------------------------------------===//

#include "compiler/report/Report.h"

#include "compiler/codegen/Codegen.h"
#include "compiler/cuda/Nvrtc.h"
#include "compiler/report/KernelModel.h"
#include "compiler/report/Roofline.h"
#include "dialect/MpcOps.h"
#include "passes/Passes.h"
#include "runtime/mpc_model.h"

#include "mlir/IR/Location.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
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
  if (failed(training.run(*lowered.train)) ||
      failed(checkAddressable(lowered.trainModel())))
    return failure();
  return lowered;
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

/// One GEMM of the training step under --fp8: its shape, and its FP8
/// operands or why it has none (whyNotFp8).
struct Fp8Choice {
  std::string location, phase, operands, reason;
  int64_t m = 0, n = 0, k = 0;
};

/// How --fp8 scales its tensors, in words.
std::string fp8ScalingText(const MpcAssignFp8PassOptions &fp8) {
  if (fp8.unscaled)
    return "unscaled";
  if (fp8.history > 0)
    return llvm::formatv("delayed scaling, history {0}, margin {1}",
                         fp8.history, fp8.margin)
        .str();
  return "current scaling";
}

/// The short name of an FP8 element type.
std::string fp8Name(Value value) {
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  return isa<Float8E4M3FNType>(element) ? "e4m3" : "e5m2";
}

/// Every linear, matmul and scaled_matmul of the training step, in program
/// order (the classifier's too, inside its group).
std::vector<Fp8Choice>
fp8Choices(ModelOp train, const llvm::DenseSet<Operation *> &forwardOps) {
  std::vector<Fp8Choice> choices;
  train.walk([&](Operation *op) {
    if (!isa<LinearOp, MatmulOp, ScaledMatmulOp>(op))
      return;
    Fp8Choice choice;
    choice.location = fileLineCol(op->getLoc());
    choice.phase = forwardOps.contains(op) ? "forward" : "backward";
    GemmDims dims = gemmDims(op);
    choice.m = dims.m;
    choice.n = dims.n;
    choice.k = dims.k;
    if (auto scaled = dyn_cast<ScaledMatmulOp>(op)) {
      choice.operands =
          fp8Name(scaled.getLhs()) + " x " + fp8Name(scaled.getRhs());
    } else {
      choice.operands = typeText(
          cast<RankedTensorType>(op->getOperand(0).getType()).getElementType());
      choice.reason = whyNotFp8(op, forwardOps).value_or("");
    }
    choices.push_back(std::move(choice));
  });
  return choices;
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
    if (isa<CrossEntropyOp, MseLossOp>(op))
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
  if (isa<LayerNormOp, RmsNormOp, BatchNormOp>(op) &&
      op->getNumOperands() > 1) {
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

namespace {

/// One kernel of the step as the report shows it.
struct KernelRow {
  const KernelRecord *record;
  std::string phase;
  KernelBound bound;
  /// With --report-counters: the modelled time, and the counters it came
  /// from (none for GEMMs and for kernels the file lacks).
  ModelledTime modelled;
  const EmulatedCounters *counters = nullptr;
  /// What the cuda target's compiled kernel adds (none elsewhere).
  CompiledKernel compiled;
};

/// What a kernel is, whatever its number: its family (the name without
/// the model's prefix and number, StepEmitter::kernelName's
/// `<model>_k<n>_`: gpt_k12_layer_norm -> layer_norm), where its first op
/// is (or what it does, for the optimizer's), and how many kernels of that
/// family and op came before it (`seen` counts them).
std::string kernelIdentity(const KernelRecord &record, StringRef model,
                           llvm::StringMap<int> &seen) {
  StringRef family = record.name;
  if (family.consume_front(model) && family.consume_front("_k"))
    family = family.drop_while(llvm::isDigit).drop_front();
  else
    family = record.name;
  std::string key =
      family.str() + " at " +
      (record.ops.empty() ? record.origin
                          : fileLineCol(record.ops.front()->getLoc()));
  return key + " #" + std::to_string(seen[key]++);
}

/// The modelled time of `row` from `counters` (KernelModel.h), which name
/// the kernel `countedName`: GEMMs from their shape, kernels from their
/// counters, the bound where there are none.
void modelRow(KernelRow &row, StringRef countedName,
              const llvm::StringMap<EmulatedCounters> &counters,
              const llvm::StringMap<CompiledKernel> &compiled,
              const GpuSpec &gpu) {
  const KernelRecord &record = *row.record;
  if (record.kind == KernelKind::Gemm) {
    row.modelled = modelGemm(row.bound.seconds);
    return;
  }
  auto found = counters.find(countedName);
  if (found == counters.end()) {
    row.modelled.seconds = row.bound.seconds;
    row.modelled.limitedBy = "not counted";
    return;
  }
  row.counters = &found->second;
  auto code = compiled.find(record.name);
  if (code != compiled.end())
    row.compiled = code->second;
  row.modelled = modelKernel(double(record.cost.bytes()),
                             double(record.cost.flops), found->second, gpu,
                             row.compiled);
}

llvm::json::Object countersJson(const EmulatedCounters &c,
                                const ModelledTime &t,
                                const CompiledKernel &compiled) {
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
  // Each class's instructions and the lanes active in them on average (32:
  // no divergence), as Nsight Compute's instructions executed and threads
  // per instruction; and over every class counted.
  llvm::json::Object classes;
  double instructions = 0, lanes = 0;
  for (auto [name, k] : llvm::zip_equal(instructionClassNames, c.classes)) {
    classes[name] = llvm::json::Object{
        {"instructions", k.instructions},
        {"active_lanes", ratio(k.lanes, k.instructions)}};
    instructions += k.instructions;
    lanes += k.lanes;
  }
  return llvm::json::Object{
      {"instructions_by_class", std::move(classes)},
      {"active_lanes", ratio(lanes, instructions)},
      {"registers", compiled.registers},
      {"spill_store_bytes", compiled.spillStoreBytes},
      {"spill_load_bytes", compiled.spillLoadBytes},
      {"spill_wavefronts", t.spillWavefronts},
      {"load_requests", c.loadRequests},
      {"load_rounds", c.loadRounds},
      {"store_requests", c.storeRequests},
      {"atomic_requests", c.atomicRequests},
      {"sectors", c.sectors},
      {"ideal_sectors", c.idealSectors},
      {"sector_efficiency", ratio(c.idealSectors, c.sectors)},
      {"lines", c.lines},
      {"distinct_sectors", c.distinctSectors},
      {"shared_requests", c.sharedRequests},
      {"shared_wavefronts", c.sharedWavefronts},
      {"shared_ideal_wavefronts", c.sharedIdealWavefronts},
      {"mma_products", c.mmaProducts},
      {"shared_bytes_per_block", c.sharedBytesPerBlock},
      {"warps_per_sm", t.warpsPerSm},
      {"terms_seconds", llvm::json::Object{{"dram", t.dram},
                                           {"l2", t.l2},
                                           {"l1", t.l1},
                                           {"tensor", t.tensor},
                                           {"fp32", t.fp32},
                                           {"latency", t.latency},
                                           {"issue", t.issue},
                                           {"issue+l1", t.sm}}},
      {"warp_instructions", t.warpInstructions}};
}

/// Which part of the step a kernel belongs to.
std::string phaseOf(const KernelRecord &kernel,
                    const llvm::DenseSet<Operation *> &forwardOps) {
  if (kernel.ops.empty())
    return StringRef(kernel.origin).starts_with("optimizer") ? "optimizer"
                                                             : "other";
  // A kernel with any backward op is backward work: the classifier (the
  // loss and its gradient), a backward loop kernel that recomputes a
  // forward elementwise op.
  return llvm::all_of(kernel.ops,
                      [&](Operation *op) { return forwardOps.contains(op); })
             ? "forward"
             : "backward";
}

/// The ops of a kernel for the table: the first one, and how many more.
std::string opsText(const KernelRecord &kernel) {
  if (kernel.ops.empty())
    return kernel.origin;
  std::string text = kernel.ops.front()->getName().getStringRef().str();
  if (kernel.ops.size() > 1)
    text += " +" + std::to_string(kernel.ops.size() - 1);
  return text;
}

/// A link between ranks, for the all-reduce model of --data-parallel.
struct Link {
  const char *name;
  double gigabytesPerSecond; // per direction
  double latencySeconds;     // per ring step
};
// Latencies per ring step as NCCL's low-latency protocol reaches them,
// roughly: about 1 us between GPUs of a node, 5 us across a network.
constexpr Link kLinks[] = {
    {"NVLink (H100 SXM, 450 GB/s, 1 us a ring step)", 450.0, 1e-6},
    {"InfiniBand 100 Gb/s (12.5 GB/s, 5 us a ring step)", 12.5, 5e-6},
};

/// A ring all-reduce of `bytes` over `ranks`: each rank sends, and
/// receives, 2(N-1)/N of the data in 2(N-1) steps.
double allReduceSeconds(int64_t bytes, int ranks, const Link &link) {
  return 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes) /
             (link.gigabytesPerSecond * 1e9) +
         2.0 * (ranks - 1) * link.latencySeconds;
}

/// A ring all-gather of `bytes` in all over `ranks`: each rank receives
/// (N-1)/N of the data in N-1 steps. A reduce-scatter (--shard-optimizer's
/// gradient buckets) moves the same, the other way: half an all-reduce.
double allGatherSeconds(int64_t bytes, int ranks, const Link &link) {
  return 1.0 * (ranks - 1) / ranks * static_cast<double>(bytes) /
             (link.gigabytesPerSecond * 1e9) +
         1.0 * (ranks - 1) * link.latencySeconds;
}
double reduceScatterSeconds(int64_t bytes, int ranks, const Link &link) {
  return allGatherSeconds(bytes, ranks, link);
}

/// The optimizer's slots and what --optimizer-state and --master-weights
/// save: moments narrower than f32, and bf16 parameters and gradients in
/// place of f32 master weights, their half copies and f32 gradients.
struct TrainingState {
  struct Slot {
    StringRef name;
    Type type;
  };
  SmallVector<Slot> slots;
  int64_t elements = 0;         ///< of the flat parameter buffer
  int64_t slotElementBytes = 0; ///< every slot's element, summed
  int64_t accumulatorBytes = 0; ///< of those, the gradient accumulator's
  int64_t savedByState = 0, savedByMasterWeights = 0;
};
TrainingState trainingState(ModelOp train, const MemorySummary &memory) {
  TrainingState state;
  auto optimizer = train->getAttrOfType<OptimizerAttr>(kOptimizerAttr);
  if (!optimizer || train.getNumParams() == 0)
    return state;
  Type param =
      cast<RankedTensorType>(train.getParams()[0].getType()).getElementType();
  int64_t paramBytes = param.getIntOrFloatBitWidth() / 8;
  state.elements = memory.gradients / paramBytes;
  size_t moments = optimizer.getKind() == OptimizerKind::Sgd ? 1 : 2;
  for (auto [index, slot] : llvm::enumerate(llvm::zip(
           optimizer.getSlotNames(), optimizer.getSlotTypes(param)))) {
    auto [name, type] = slot;
    int64_t bytes = type.getIntOrFloatBitWidth() / 8;
    state.slots.push_back({name, type});
    state.slotElementBytes += bytes;
    if (index < moments)
      state.savedByState += state.elements * (4 - bytes);
    if (name == "grad_accumulator")
      state.accumulatorBytes = bytes;
  }
  MasterWeights master = optimizer.getMasterWeights();
  if (master != MasterWeights::F32) {
    // f32 master weights (4), their bf16 copies (2) and f32 gradients (4)
    // against bf16 parameters (2) and gradients (2), and Kahan's slot.
    int64_t kahan = master == MasterWeights::Kahan ? 2 : 0;
    state.savedByMasterWeights = state.elements * (4 + 2 + 4 - 2 - 2 - kahan);
  }
  return state;
}

llvm::json::Value optimizerJson(OptimizerAttr optimizer,
                                const TrainingState &state) {
  llvm::json::Array slots;
  for (const TrainingState::Slot &slot : state.slots) {
    std::string type;
    llvm::raw_string_ostream(type) << slot.type;
    slots.push_back(llvm::json::Object{{"name", slot.name}, {"type", type}});
  }
  return llvm::json::Object{
      {"kind", stringifyOptimizerKind(optimizer.getKind())},
      {"master_weights", stringifyMasterWeights(optimizer.getMasterWeights())},
      {"slots", std::move(slots)},
      {"state_bytes_per_parameter", state.slotElementBytes},
      {"saved_bytes_by_state", state.savedByState},
      {"saved_bytes_by_master_weights", state.savedByMasterWeights}};
}

/// --shard-optimizer (ZeRO-1) over `ranks`: what one rank keeps of the
/// optimizer state against the whole, and the parameters gathered after
/// every update (the f32 parameters and their half copies; with sharded
/// master weights, the half copies and the f32 copies of the parameters
/// read in f32, the masters being optimizer state).
struct ShardedOptimizer {
  int64_t slots = 0, bytesPerParameter = 0, wholeBytes = 0, rankBytes = 0,
          gatherBytes = 0;
  double rankBytesPerParameter = 0;
};
ShardedOptimizer shardOptimizer(const MemorySummary &memory,
                                const TrainingState &state, int ranks) {
  ShardedOptimizer sharded;
  // The layout of Codegen.cpp: the control block, then the slots.
  int64_t control =
      (static_cast<int64_t>(sizeof(mpc_train_control)) + 63) / 64 * 64;
  sharded.slots = static_cast<int64_t>(state.slots.size());
  int64_t masterBytes = memory.shardedMasters ? 4 : 0;
  sharded.bytesPerParameter = state.slotElementBytes + masterBytes;
  // The runtime's shards: whole chunks of the gradient statistics, the
  // descriptor's shard_unit (mpc_runtime.cpp).
  int64_t unit = gradStatsChunk(state.elements);
  int64_t capacity =
      ((state.elements + ranks - 1) / ranks + unit - 1) / unit * unit;
  sharded.wholeBytes = memory.optimizerState;
  // The gradient accumulator stays whole on every rank (mpc_runtime.cpp).
  int64_t shardedBytes =
      state.slotElementBytes - state.accumulatorBytes + masterBytes;
  sharded.rankBytes = control + capacity * shardedBytes +
                      state.elements * state.accumulatorBytes;
  sharded.rankBytesPerParameter =
      1.0 * shardedBytes / ranks + state.accumulatorBytes;
  int64_t halfCopies =
      memory.params - memory.parameterBytes - memory.stateBytes;
  sharded.gatherBytes =
      (memory.shardedMasters ? memory.parameterBytes : memory.gradients) +
      std::max<int64_t>(halfCopies, 0);
  return sharded;
}

/// The communication of a data-parallel step on one link: buckets go out
/// in order on one stream, each once backward has finished it (the
/// roofline bounds of the kernels before it); what runs past the end of
/// backward is exposed.
struct Communication {
  std::vector<double> readySeconds, bucketSeconds;
  double totalSeconds = 0, backwardEndSeconds = 0, exposedSeconds = 0;
};
Communication modelCommunication(const std::vector<GradientBucket> &buckets,
                                 const std::vector<double> &kernelSeconds,
                                 int ranks, bool scattered, const Link &link) {
  Communication result;
  std::vector<double> elapsed{0.0};
  for (double seconds : kernelSeconds)
    elapsed.push_back(elapsed.back() + seconds);
  double free = 0;
  for (const GradientBucket &bucket : buckets) {
    double ready = elapsed[std::min(bucket.afterKernels, kernelSeconds.size())];
    double seconds = scattered
                         ? reduceScatterSeconds(bucket.bytes, ranks, link)
                         : allReduceSeconds(bucket.bytes, ranks, link);
    result.readySeconds.push_back(ready);
    result.bucketSeconds.push_back(seconds);
    result.totalSeconds += seconds;
    result.backwardEndSeconds = std::max(result.backwardEndSeconds, ready);
    free = std::max(free, ready) + seconds;
  }
  result.exposedSeconds = std::max(0.0, free - result.backwardEndSeconds);
  return result;
}

std::string microseconds(double seconds) {
  return llvm::formatv("{0:F3}", seconds * 1e6).str();
}

llvm::json::Object memoryJson(const MemorySummary &m) {
  int64_t halfCopies = m.params - m.parameterBytes - m.stateBytes;
  llvm::json::Array tensors;
  for (const MemorySummary::Tensor &tensor : m.trainActivationTensors)
    tensors.push_back(
        llvm::json::Object{{"op", tensor.op},
                           {"location", tensor.location},
                           {"shape", llvm::json::Array(tensor.shape)},
                           {"bytes", tensor.bytes}});
  return llvm::json::Object{
      {"train_activation_tensors", std::move(tensors)},
      {"parameters_state_and_half_copies", m.params},
      {"parameters", m.parameterBytes},
      {"state", m.stateBytes},
      {"half_copies_and_alignment", halfCopies},
      {"gradients", m.gradients},
      {"optimizer_state", m.optimizerState},
      {"activations", m.activations},
      {"train_activations", m.trainActivations},
      {"train_activations_without_reuse", m.trainActivationsWithoutReuse},
      {"eval_activations", m.evalActivations},
      // cuBLASLt's workspace, part of both activation figures.
      {"gemm_workspace", m.gemmWorkspace},
      // What the library allocates, per arena, as its descriptor says.
      {"arena_bytes", llvm::json::Array{m.params, m.gradients, m.optimizerState,
                                        m.activations}},
      {"total", m.params + m.gradients + m.optimizerState + m.activations}};
}

llvm::json::Object castJson(const CastCount &casts) {
  return llvm::json::Object{{"count", casts.count}, {"bytes", casts.bytes}};
}

} // namespace

int mlir::mpc::printReport(ModuleOp module, const CompileOptions &options,
                           llvm::raw_ostream &out) {
  HalfType halfType = options.half.value_or(HalfType::F16);
  const char *half = halfType == HalfType::F16 ? "f16" : "bf16";
  const char *level = levelName(options.amp);
  const GpuSpec *gpu = findGpu(options.reportGpu);
  if (!gpu) {
    llvm::errs() << "mpc compile: error: unknown GPU '" << options.reportGpu
                 << "' for --report-gpu\n";
    return 1;
  }
  std::optional<llvm::StringMap<EmulatedCounters>> counters;
  if (!options.reportCounters.empty()) {
    std::string message;
    llvm::raw_string_ostream errors(message);
    counters = readEmulatedCounters(options.reportCounters, errors);
    if (!counters) {
      llvm::errs() << "mpc compile: error: --report-counters: " << message
                   << "\n";
      return 1;
    }
  }
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
  // O0 is f32 throughout: f32 master weights and moments.
  quiet.masterWeights = MasterWeights::F32;
  quiet.optimizer.masterWeights = MasterWeights::F32;
  quiet.optimizer.optimizerState = OptimizerState::F32;
  FailureOr<LoweredModel> baseline =
      lower(module, AmpLevel::O0, halfType, quiet);
  if (failed(baseline))
    return 1;
  ModelOp forward = chosen->forwardModel();

  // 1. Every forward op but the casts, in program order.
  std::vector<std::vector<std::string>> opRows;
  for (Operation &op : forward.getBody().front().without_terminator()) {
    if (isa<CastOp>(op))
      continue;
    auto policy = dyn_cast<PrecisionPolicyOpInterface>(op);
    opRows.push_back(
        {fileLineCol(op.getLoc()), op.getName().getStringRef().str(),
         policy ? stringifyPrecisionClass(policy.getPrecisionClass()).str()
                : std::string("-"),
         typeText(floatResultType(&op)), reason(&op, options.amp)});
  }

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

  // 3. Memory, from the plans the generated library allocates.
  // A --debug-nonfinite library materialises every op's output (no fusion)
  // and launches the checks: the report describes that library.
  bool fuse = options.fuse && !options.debugNonfinite;
  // The cuda target reserves cuBLASLt's workspace for its architecture.
  int64_t workspace =
      options.target == Target::Cuda
          ? gemmWorkspaceBytes(options.smVersion ? options.smVersion
                                                 : defaultSmVersion)
          : 0;
  // Its convolutions are cuDNN calls, which need no scratch.
  bool cuda = options.target == Target::Cuda;
  bool cudnn = cuda && options.cudnn;
  // Kernels in blocks of threads (the cuda target's, or emulated) are
  // formed a little differently from the cpu target's (formSteps).
  bool blocks = cuda || options.emulateBlocks;
  MemorySummary at =
      planMemory(chosen->trainModel(), chosen->forwardModel(), fuse, workspace,
                 cudnn, options.classifierChunks, blocks,
                 options.batchNormsWhereRead);
  MemorySummary o0 =
      planMemory(baseline->trainModel(), baseline->forwardModel(), fuse,
                 workspace, cudnn, options.classifierChunks, blocks,
                 options.batchNormsWhereRead);

  // 4. The kernels of one training step, as the library launches them.
  CodegenOptions codegen;
  codegen.debugNonfinite = options.debugNonfinite;
  codegen.fuse = options.fuse;
  codegen.gemmWorkspaceBytes = workspace;
  codegen.cuda = cuda;
  codegen.cudnnConvolutions = cudnn;
  codegen.emulateBlocks = blocks;
  codegen.bucketBytes = options.bucketBytes;
  codegen.batchNormsWhereRead = options.batchNormsWhereRead;
  codegen.classifierChunks = options.classifierChunks;
  int smVersion = options.smVersion ? options.smVersion : defaultSmVersion;
  if (options.target == Target::Cuda)
    codegen.smVersion = smVersion;
  // As `mpc compile` decides (Compiler.cpp); the --profile-emulated build
  // the counters come from is a cpu target's, with clusters.
  codegen.threadBlockClusters =
      cuda ? smVersion >= minClusterSmVersion : blocks;
  FailureOr<GeneratedModel> generated =
      generateModel(chosen->trainModel(), chosen->forwardModel(), codegen);
  if (failed(generated))
    return 1;
  // The modelled times' issue term and registers come from the compiled
  // kernels: the cuda target's, compiled here as `mpc compile` would.
  llvm::StringMap<CompiledKernel> compiled;
  if (counters && options.target == Target::Cuda) {
    CudaImage image;
    if (!compileWithNvrtc(generated->kernelSource, smVersion,
                          "(the kernels --report compiled)", image))
      return 1;
    llvm::StringMap<CompiledKernel> ptxas;
    for (const KernelResources &resources : image.resources) {
      CompiledKernel &k = ptxas[resources.name];
      k.registers = resources.registers;
      k.spillStoreBytes = resources.spillStoreBytes;
      k.spillLoadBytes = resources.spillLoadBytes;
    }
    compiled = analyseCompiledKernels(image.ptx, image.kernels, ptxas);
  }
  // The counters come from a --profile-emulated build: the cpu target
  // running the cuda target's kernels, numbered apart from them wherever
  // the two targets' kernels differ (im2col where cuda calls cuDNN). A
  // kernel's counters are found by what it is (kernelIdentity) in that
  // build's kernels.
  llvm::StringMap<std::string> countedNames;
  StringRef model = chosen->trainModel().getSymName();
  if (counters && cuda) {
    CodegenOptions emulated = codegen;
    emulated.cuda = false;
    emulated.cudnnConvolutions = false;
    emulated.gemmWorkspaceBytes = 0;
    emulated.smVersion = 0;
    emulated.threadBlockClusters = true; // as --profile-emulated builds
    emulated.emulateBlocks = true;
    // On copies: generating code changes the model (its training state),
    // and the kernels above keep pointers to its ops.
    OwningOpRef<ModelOp> train(cast<ModelOp>(chosen->trainModel()->clone()));
    OwningOpRef<ModelOp> forward(
        cast<ModelOp>(chosen->forwardModel()->clone()));
    FailureOr<GeneratedModel> profiled =
        generateModel(*train, *forward, emulated);
    if (failed(profiled))
      return 1;
    llvm::StringMap<int> seen;
    for (const KernelRecord &record : profiled->trainKernels)
      if (record.kind != KernelKind::Gemm)
        countedNames[kernelIdentity(record, model, seen)] = record.name;
  }
  llvm::StringMap<int> seenKernels;

  // The same step without kernel fusion (--no-fuse), for the before/after.
  struct StepTotals {
    int64_t kernels = 0;
    KernelCost cost;
    double seconds = 0;
    int64_t activations = 0;
  } unfused;
  // The launches, traffic and bound of another build's training step.
  auto totalsOf = [&](const GeneratedModel &step) {
    StepTotals totals;
    for (const KernelRecord &record : step.trainKernels) {
      ++totals.kernels;
      totals.cost += record.cost;
      totals.seconds += rooflineBound(record, *gpu).seconds;
    }
    return totals;
  };
  if (fuse) {
    CodegenOptions plain = codegen;
    plain.fuse = false;
    FailureOr<GeneratedModel> separate =
        generateModel(chosen->trainModel(), chosen->forwardModel(), plain);
    if (failed(separate))
      return 1;
    unfused = totalsOf(*separate);
    unfused.activations =
        planMemory(chosen->trainModel(), chosen->forwardModel(), false,
                   workspace, cudnn, 0, blocks)
            .trainActivations;
  }
  // The same step with every classifier whole (--classifier-chunks=1),
  // where it runs in chunks: what the chunks cost in bytes and bound
  // beside the activations they save.
  std::optional<StepTotals> wholeClassifier;
  if (llvm::any_of(generated->classifierChunks,
                   [](const GeneratedModel::ClassifierChunks &chunking) {
                     return chunking.chunks() > 1;
                   })) {
    CodegenOptions whole = codegen;
    whole.classifierChunks = 1;
    // On copies: forming kernels again would erase ops the records of the
    // chunked step above point to.
    OwningOpRef<ModelOp> train(cast<ModelOp>(chosen->trainModel()->clone()));
    OwningOpRef<ModelOp> forward(
        cast<ModelOp>(chosen->forwardModel()->clone()));
    FailureOr<GeneratedModel> unchunked =
        generateModel(*train, *forward, whole);
    if (failed(unchunked))
      return 1;
    wholeClassifier = totalsOf(*unchunked);
    wholeClassifier->activations =
        planMemory(*train, *forward, fuse, workspace, cudnn, 1, blocks)
            .trainActivations;
  }
  llvm::DenseSet<Operation *> forwardOps = findForwardOps(chosen->trainModel());
  std::vector<KernelRow> kernels;
  KernelCost stepCost;
  double stepSeconds = 0, modelledSeconds = 0;
  int64_t gemmCalls = 0, countedKernels = 0;
  // The optimizer step (mpc-fuse-optimizer): its kernels and their traffic.
  KernelCost optimizerCost;
  int64_t optimizerKernels = 0;
  for (const KernelRecord &record : generated->trainKernels) {
    KernelRow row{&record, phaseOf(record, forwardOps),
                  rooflineBound(record, *gpu)};
    if (counters) {
      std::string countedName = record.name;
      if (record.kind != KernelKind::Gemm && cuda) {
        auto it = countedNames.find(kernelIdentity(record, model, seenKernels));
        if (it != countedNames.end())
          countedName = it->second;
      }
      modelRow(row, countedName, *counters, compiled, *gpu);
      modelledSeconds += row.modelled.seconds;
      countedKernels += row.counters != nullptr;
    }
    if (row.phase == "optimizer") {
      optimizerCost += record.cost;
      ++optimizerKernels;
    }
    stepCost += record.cost;
    stepSeconds += row.bound.seconds;
    gemmCalls += record.kind == KernelKind::Gemm;
    kernels.push_back(std::move(row));
  }

  auto optimizerAttr =
      chosen->trainModel()->getAttrOfType<OptimizerAttr>(kOptimizerAttr);
  StringRef optimizerName = stringifyOptimizerKind(optimizerAttr.getKind());
  // What --nonfinite-updates=skip costs: without a loss scaler or clipping,
  // the gradient statistics kernel is there for the inf/NaN check alone.
  auto scaling =
      chosen->trainModel()->getAttrOfType<LossScalingAttr>(kLossScalingAttr);
  bool guardOnly = optimizerAttr.getSkipNonfinite() &&
                   scaling.getMode() == LossScaleMode::None &&
                   optimizerAttr.getClipNorm().convertToDouble() <= 0;
  KernelCost guardCost;
  double guardSeconds = 0;
  for (const KernelRow &row : kernels)
    if (guardOnly && row.phase == "optimizer" &&
        StringRef(row.record->name).ends_with("_grad_stats")) {
      guardCost += row.record->cost;
      guardSeconds += row.bound.seconds;
    }

  // FP8 (--fp8): each GEMM's choice, what quantizing costs (the quantize
  // kernels and the FP8 copies' transposes), and the step without FP8.
  std::vector<Fp8Choice> fp8Gemms;
  KernelCost quantizeCost;
  double quantizeSeconds = 0, withoutFp8Seconds = 0;
  int64_t quantizeKernels = 0, fp8GemmCount = 0;
  if (options.fp8 != Fp8Gemms::None) {
    fp8Gemms = fp8Choices(chosen->trainModel(), forwardOps);
    for (const Fp8Choice &choice : fp8Gemms)
      fp8GemmCount += choice.reason.empty();
    auto quantizes = [](Operation *op) {
      if (isa<QuantizeOp>(op))
        return true;
      auto transpose = dyn_cast<TransposeOp>(op);
      return transpose && isa<Float8E4M3FNType, Float8E5M2Type>(
                              transpose.getType().getElementType());
    };
    for (const KernelRow &row : kernels)
      if (llvm::any_of(row.record->ops, quantizes)) {
        quantizeCost += row.record->cost;
        quantizeSeconds += row.bound.seconds;
        ++quantizeKernels;
      }
    PipelineOptions noFp8 = pipeline;
    noFp8.fp8.gemms = Fp8Gemms::None;
    noFp8.werrorNumerics = false;
    FailureOr<LoweredModel> plain = lower(module, options.amp, halfType, noFp8);
    if (failed(plain))
      return 1;
    FailureOr<GeneratedModel> plainModel =
        generateModel(plain->trainModel(), plain->forwardModel(), codegen);
    if (failed(plainModel))
      return 1;
    for (const KernelRecord &record : plainModel->trainKernels)
      withoutFp8Seconds += rooflineBound(record, *gpu).seconds;
  }

  // Data parallel: the gradient buckets and their all-reduce on each link.
  const std::vector<GradientBucket> &buckets = generated->gradientBuckets;
  std::vector<double> kernelSeconds;
  for (const KernelRow &row : kernels)
    kernelSeconds.push_back(row.bound.seconds);
  std::vector<Communication> communication;
  int64_t reducedBytes = 0;
  for (const GradientBucket &bucket : buckets)
    reducedBytes += bucket.bytes;
  if (!buckets.empty())
    for (const Link &link : kLinks)
      communication.push_back(
          modelCommunication(buckets, kernelSeconds, options.reportRanks,
                             options.shardOptimizer, link));
  TrainingState trainState = trainingState(chosen->trainModel(), at);
  std::optional<ShardedOptimizer> sharded;
  if (!buckets.empty() && options.shardOptimizer)
    sharded = shardOptimizer(at, trainState, options.reportRanks);

  if (options.reportJson) {
    llvm::json::Array opArray;
    for (const auto &row : opRows)
      opArray.push_back(llvm::json::Object{{"location", row[0]},
                                           {"op", row[1]},
                                           {"category", row[2]},
                                           {"type", row[3]},
                                           {"reason", row[4]}});
    llvm::json::Array chunkArray;
    for (const GeneratedModel::ClassifierChunks &chunking :
         generated->classifierChunks)
      chunkArray.push_back(llvm::json::Object{
          {"location", fileLineCol(chunking.loss->getLoc())},
          {"rows", chunking.rows},
          {"chunk_rows", chunking.chunkRows},
          {"chunks", chunking.chunks()},
          {"logit_bytes", chunking.logitBytes},
          {"bytes_per_extra_chunk", chunking.bytesPerExtraChunk}});
    llvm::json::Value fp8Json = nullptr;
    if (options.fp8 != Fp8Gemms::None) {
      llvm::json::Array gemmArray;
      for (const Fp8Choice &choice : fp8Gemms)
        gemmArray.push_back(llvm::json::Object{
            {"location", choice.location},
            {"phase", choice.phase},
            {"m", choice.m},
            {"n", choice.n},
            {"k", choice.k},
            {"operands", choice.operands},
            {"fp8", choice.reason.empty()},
            {"reason", choice.reason.empty()
                           ? llvm::json::Value(nullptr)
                           : llvm::json::Value(choice.reason)}});
      fp8Json =
          llvm::json::Object{{"gemms", std::move(gemmArray)},
                             {"fp8_gemms", fp8GemmCount},
                             {"scaling", fp8ScalingText(pipeline.fp8)},
                             {"quantize_kernels", quantizeKernels},
                             {"quantize_bytes", quantizeCost.bytes()},
                             {"quantize_seconds", quantizeSeconds},
                             {"bound_seconds_without_fp8", withoutFp8Seconds}};
    }
    llvm::json::Array kernelArray;
    for (const KernelRow &row : kernels) {
      const KernelRecord &record = *row.record;
      llvm::json::Array ops;
      for (Operation *op : record.ops)
        ops.push_back(
            llvm::json::Object{{"op", op->getName().getStringRef().str()},
                               {"location", fileLineCol(op->getLoc())}});
      kernelArray.push_back(llvm::json::Object{
          {"name", record.name},
          {"kind", record.kind == KernelKind::Gemm ? "gemm"
                   : record.kind == KernelKind::TensorCoreKernel
                       ? "tensor_core_kernel"
                       : "kernel"},
          {"phase", row.phase},
          {"ops", std::move(ops)},
          {"origin", record.origin},
          {"flops", record.cost.flops},
          {"bytes_read", record.cost.bytesRead},
          {"bytes_written", record.cost.bytesWritten},
          {"bytes", record.cost.bytes()},
          {"bound_seconds", row.bound.seconds},
          {"bound_by", row.bound.memoryBound ? "memory" : "compute"}});
      if (counters) {
        llvm::json::Object &entry = *kernelArray.back().getAsObject();
        entry["modelled_seconds"] = row.modelled.seconds;
        entry["limited_by"] = row.modelled.limitedBy;
        entry["counters"] =
            row.counters
                ? llvm::json::Value(countersJson(*row.counters, row.modelled,
                                                row.compiled))
                : llvm::json::Value(nullptr);
      }
    }
    llvm::json::Value dataParallel = nullptr;
    if (!buckets.empty()) {
      llvm::json::Array bucketArray, linkArray;
      for (auto [index, bucket] : llvm::enumerate(buckets)) {
        llvm::json::Array params, seconds;
        for (const std::string &param : bucket.params)
          params.push_back(param);
        for (const Communication &link : communication)
          seconds.push_back(link.bucketSeconds[index]);
        bucketArray.push_back(llvm::json::Object{
            {"params", std::move(params)},
            {"offset", bucket.offset},
            {"bytes", bucket.bytes},
            {"after_kernel", int64_t(bucket.afterKernels) - 1},
            {"ready_seconds", communication.front().readySeconds[index]},
            {"allreduce_seconds", std::move(seconds)}});
      }
      for (auto [link, model] : llvm::zip(kLinks, communication))
        linkArray.push_back(llvm::json::Object{
            {"name", link.name},
            {"gigabytes_per_second", link.gigabytesPerSecond},
            {"latency_seconds", link.latencySeconds},
            {"allreduce_seconds", model.totalSeconds},
            {"backward_end_seconds", model.backwardEndSeconds},
            {"exposed_seconds", model.exposedSeconds}});
      llvm::json::Value shardJson = nullptr;
      if (sharded) {
        llvm::json::Array seconds;
        for (const Link &link : kLinks)
          seconds.push_back(allGatherSeconds(sharded->gatherBytes,
                                             options.reportRanks, link));
        shardJson = llvm::json::Object{
            {"slots", sharded->slots},
            {"master_weights_sharded", at.shardedMasters},
            {"bytes_per_parameter", sharded->bytesPerParameter},
            {"bytes_per_parameter_sharded", sharded->rankBytesPerParameter},
            {"optimizer_bytes", sharded->wholeBytes},
            {"optimizer_bytes_per_rank", sharded->rankBytes},
            {"gather_bytes", sharded->gatherBytes},
            {"gather_seconds", std::move(seconds)}};
      }
      dataParallel =
          llvm::json::Object{{"ranks", options.reportRanks},
                             {"bucket_cap_bytes", options.bucketBytes},
                             // What allreduce_seconds models.
                             {"collective", options.shardOptimizer
                                                ? "reduce-scatter"
                                                : "all-reduce"},
                             {"shard_optimizer", std::move(shardJson)},
                             {"bytes_per_step", reducedBytes},
                             {"buckets", std::move(bucketArray)},
                             {"links", std::move(linkArray)}};
    }
    llvm::json::Object report{
        {"model", forward.getSymName().str()},
        {"data_parallel", std::move(dataParallel)},
        {"amp", level},
        {"half", options.amp == AmpLevel::O0 ? llvm::json::Value(nullptr)
                                             : llvm::json::Value(half)},
        {"ops", std::move(opArray)},
        {"casts",
         llvm::json::Object{
             {"forward", llvm::json::Object{{"count", forwardCount},
                                            {"bytes", forwardBytes}}},
             {"parameters", castJson(paramCasts)},
             {"inputs", castJson(inputCasts)},
             {"between_ops", castJson(otherCasts)},
             {"training_step", castJson(stepCasts)}}},
        {"memory", llvm::json::Object{{"chosen", memoryJson(at)},
                                      {"O0", memoryJson(o0)}}},
        {"optimizer", optimizerJson(optimizerAttr, trainState)},
        {"classifier_chunks", std::move(chunkArray)},
        {"fp8", std::move(fp8Json)},
        {"gpu",
         llvm::json::Object{{"name", gpu->name},
                            {"description", gpu->description},
                            {"half_tensor_tflops", gpu->halfTensorTflops},
                            {"fp8_tensor_tflops", gpu->fp8TensorTflops},
                            {"fp32_tflops", gpu->fp32Tflops},
                            {"bandwidth_gbs", gpu->bandwidthGBs}}},
        {"kernels", std::move(kernelArray)},
        {"step",
         llvm::json::Object{
             {"kernels", int64_t(kernels.size())},
             {"gemm_calls", gemmCalls},
             {"flops", stepCost.flops},
             {"bytes_read", stepCost.bytesRead},
             {"bytes_written", stepCost.bytesWritten},
             {"bytes", stepCost.bytes()},
             {"bound_seconds", stepSeconds},
             {"modelled_seconds", counters ? llvm::json::Value(modelledSeconds)
                                           : llvm::json::Value(nullptr)},
             {"counted_kernels", countedKernels}}},
        {"unfused_step", fuse ? llvm::json::Value(llvm::json::Object{
                                    {"kernels", unfused.kernels},
                                    {"bytes", unfused.cost.bytes()},
                                    {"bound_seconds", unfused.seconds},
                                    {"train_activations", unfused.activations}})
                              : llvm::json::Value(nullptr)},
        {"whole_classifier_step",
         wholeClassifier
             ? llvm::json::Value(llvm::json::Object{
                   {"kernels", wholeClassifier->kernels},
                   {"bytes", wholeClassifier->cost.bytes()},
                   {"bound_seconds", wholeClassifier->seconds},
                   {"train_activations", wholeClassifier->activations}})
             : llvm::json::Value(nullptr)},
        {"optimizer_step",
         llvm::json::Object{{"optimizer", optimizerName.str()},
                            {"kernels", optimizerKernels},
                            {"bytes_read", optimizerCost.bytesRead},
                            {"bytes_written", optimizerCost.bytesWritten},
                            {"bytes", optimizerCost.bytes()},
                            {"nonfinite_guard_bytes", guardCost.bytes()},
                            {"nonfinite_guard_seconds", guardSeconds}}}};
    out << llvm::formatv("{0:2}", llvm::json::Value(std::move(report))) << "\n";
    return 0;
  }

  std::string config =
      options.amp == AmpLevel::O0
          ? std::string("--amp=O0")
          : llvm::formatv("--amp={0} --half={1}", level, half).str();
  out << "mpc precision report: model @" << forward.getSymName() << ", "
      << config << "\n\n";

  opRows.insert(opRows.begin(),
                {"location", "op", "category", "type", "reason"});
  out << "Forward ops after precision assignment (" << opRows.size() - 1
      << "):\n";
  printTable(out, opRows);

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
       row("  of which GEMM workspace", &MemorySummary::gemmWorkspace),
       {"total", std::to_string(total(o0)), std::to_string(total(at)),
        percent(total(at), total(o0))}},
      {false, true, true, true});
  if (at.shardedMasters)
    out << "The f32 master weights are optimizer state, sharded with the "
           "slots (--shard-optimizer); the parameters as stored are the f32 "
           "copies of those the steps read in f32.\n";
  out << "\nActivations (train step peak, memory reused by liveness) at "
      << label << ": " << percent(at.trainActivations, o0.trainActivations)
      << " of O0 (" << at.trainActivations << " of " << o0.trainActivations
      << " bytes)\n";

  // 5. The kernels, each bounded by the roofline of the named GPU.
  out << "\nKernels of one training step at " << label << " (" << kernels.size()
      << " launches, " << gemmCalls << " of them GEMM calls), roofline on "
      << gpu->description << ":\n";
  std::vector<std::vector<std::string>> kernelRows = {
      {"#", "kernel", "phase", "op", "location", "FLOPs", "bytes", "bound (us)",
       "bound by"}};
  if (counters)
    kernelRows.front().insert(kernelRows.front().end(),
                              {"modelled (us)", "limited by"});
  for (auto [index, row] : llvm::enumerate(kernels)) {
    const KernelRecord &record = *row.record;
    kernelRows.push_back(
        {std::to_string(index), record.name, row.phase, opsText(record),
         record.ops.empty() ? "-" : fileLineCol(record.ops.front()->getLoc()),
         std::to_string(record.cost.flops), std::to_string(record.cost.bytes()),
         microseconds(row.bound.seconds),
         row.bound.memoryBound ? "memory" : "compute"});
    if (counters)
      kernelRows.back().insert(
          kernelRows.back().end(),
          {microseconds(row.modelled.seconds), row.modelled.limitedBy});
  }
  SmallVector<bool> kernelAlignment = {true, false, false, false, false,
                                       true, true,  true,  false};
  if (counters)
    kernelAlignment.append({true, false});
  printTable(out, kernelRows, kernelAlignment);
  out << "\nStep total: " << stepCost.flops << " FLOPs, " << stepCost.bytes()
      << " bytes (" << stepCost.bytesRead << " read, " << stepCost.bytesWritten
      << " written)\n";
  if (fuse)
    out << "Kernel fusion (mpc-form-kernels): " << kernels.size()
        << " launches, " << stepCost.bytes() << " bytes, bound "
        << microseconds(stepSeconds) << " us, activations "
        << at.trainActivations
        << " bytes; without (--no-fuse): " << unfused.kernels << " launches, "
        << unfused.cost.bytes() << " bytes, bound "
        << microseconds(unfused.seconds) << " us, activations "
        << unfused.activations << " bytes\n";
  for (const GeneratedModel::ClassifierChunks &chunking :
       generated->classifierChunks) {
    int64_t chunks = chunking.chunks();
    out << "Classifier at " << fileLineCol(chunking.loss->getLoc()) << ": "
        << chunks << (chunks == 1 ? " chunk" : " chunks") << " of "
        << chunking.chunkRows << " rows (--classifier-chunks to choose), "
        << chunking.logitBytes / chunking.rows * chunking.chunkRows
        << " bytes of logits at a time of " << chunking.logitBytes;
    if (chunks > 1)
      out << "; each chunk after the first reads the weight and dW again: "
          << (chunks - 1) * chunking.bytesPerExtraChunk << " bytes";
    out << "\n";
  }
  if (wholeClassifier)
    out << "  the step with the classifier whole (--classifier-chunks=1): "
        << wholeClassifier->kernels << " launches, "
        << wholeClassifier->cost.bytes() << " bytes, bound "
        << microseconds(wholeClassifier->seconds) << " us, activations "
        << wholeClassifier->activations << " bytes; in chunks: "
        << stepCost.bytes() << " bytes, bound " << microseconds(stepSeconds)
        << " us, activations " << at.trainActivations << " bytes\n";
  if (options.fp8 != Fp8Gemms::None) {
    out << "FP8 (--fp8="
        << (options.fp8 == Fp8Gemms::Auto
                ? "auto, for the " + std::string(gpu->name) + ","
                : std::string("all,"))
        << " " << fp8ScalingText(pipeline.fp8) << "): " << fp8GemmCount
        << " of " << fp8Gemms.size()
        << " GEMMs on FP8 operands (e4m3 activations and weights, e5m2 "
           "gradients); quantizing them takes "
        << quantizeKernels << " kernels, " << quantizeCost.bytes()
        << " bytes, bound " << microseconds(quantizeSeconds)
        << " us; the step's bound " << microseconds(stepSeconds)
        << " us, without FP8 (--fp8=none) " << microseconds(withoutFp8Seconds)
        << " us\n";
    std::vector<std::vector<std::string>> rows = {
        {"location", "phase", "m x n x k", "operands", "not FP8 because"}};
    for (const Fp8Choice &choice : fp8Gemms)
      rows.push_back(
          {choice.location, choice.phase,
           llvm::formatv("{0} x {1} x {2}", choice.m, choice.n, choice.k).str(),
           choice.operands, choice.reason.empty() ? "-" : choice.reason});
    printTable(out, rows, {false, false, true, false, false});
  }
  out << "Optimizer step (" << optimizerName
      << "): " << optimizerKernels << " kernels, " << optimizerCost.bytes()
      << " bytes (" << optimizerCost.bytesRead << " read, "
      << optimizerCost.bytesWritten
      << " written), one update pass over the flat buffers\n";
  if (guardCost.bytes() > 0)
    out << "  of which the inf/NaN check of --nonfinite-updates=skip (no loss "
           "scaler looks at the gradients): "
        << guardCost.bytes() << " bytes, " << microseconds(guardSeconds)
        << " us ("
        << percent(static_cast<int64_t>(guardSeconds * 1e9),
                   static_cast<int64_t>(stepSeconds * 1e9))
        << " of the step's bound); --nonfinite-updates=apply saves it\n";
  if (!trainState.slots.empty()) {
    out << "  state per parameter: ";
    llvm::interleaveComma(trainState.slots, out,
                          [&](const TrainingState::Slot &slot) {
                            out << slot.name << " " << slot.type;
                          });
    out << " (" << trainState.slotElementBytes << " bytes)";
    if (trainState.savedByState > 0)
      out << "; moments narrower than f32 (--optimizer-state) save "
          << trainState.savedByState << " bytes";
    out << "\n";
  }
  if (optimizerAttr.getMasterWeights() != MasterWeights::F32)
    out << "  parameters: bf16 without f32 master weights, updated "
        << (optimizerAttr.getMasterWeights() == MasterWeights::None
                ? "with stochastic rounding"
            : optimizerAttr.getMasterWeights() == MasterWeights::Kahan
                ? "to nearest with a bf16 Kahan compensation"
                : "to nearest (small updates round away)")
        << " (--master-weights="
        << stringifyMasterWeights(optimizerAttr.getMasterWeights())
        << "): bf16 parameters and gradients in place of f32 master weights, "
           "their half copies and f32 gradients save "
        << trainState.savedByMasterWeights << " bytes\n";
  out << llvm::formatv("Roofline bound of the step on {0} (f16/bf16 tensor "
                       "{1} TFLOP/s, fp32 {2} TFLOP/s, {3} GB/s): {4} us, the "
                       "sum of the kernels' bounds\n",
                       gpu->description, gpu->halfTensorTflops, gpu->fp32Tflops,
                       gpu->bandwidthGBs, microseconds(stepSeconds));
  if (counters)
    out << "Modelled time of the step (--report-counters, "
        << options.reportCounters << "): " << microseconds(modelledSeconds)
        << " us; " << countedKernels << " kernels priced from their counters, "
        << gemmCalls << " GEMMs at cuBLASLt's measured efficiency, "
        << int64_t(kernels.size()) - countedKernels - gemmCalls
        << " at their bound (no counters)\n";
  if (!buckets.empty()) {
    // ZeRO-1 sums each bucket only where its shards are kept.
    const char *collective =
        options.shardOptimizer ? "reduce-scatter (--shard-optimizer)"
                               : "all-reduce";
    out << "\nData parallel (--data-parallel): " << buckets.size()
        << " gradient buckets of at most " << options.bucketBytes
        << " bytes (--bucket-mb), " << reducedBytes
        << " bytes of f32 gradients per step, each summed over the ranks "
           "once backward has finished it; a ring "
        << collective << " over " << options.reportRanks
        << " ranks, modelled on each link:\n";
    std::vector<std::vector<std::string>> rows = {
        {"#", "parameters", "bytes", "after kernel", "ready (us)"}};
    for (const Link &link : kLinks)
      rows.front().push_back(std::string(link.name) + " (us)");
    for (auto [index, bucket] : llvm::enumerate(buckets)) {
      std::string params = bucket.params.front();
      if (bucket.params.size() > 1)
        params += " .. " + bucket.params.back() + " (" +
                  std::to_string(bucket.params.size()) + ")";
      std::vector<std::string> row = {
          std::to_string(index), params, std::to_string(bucket.bytes),
          std::to_string(int64_t(bucket.afterKernels) - 1),
          microseconds(communication.front().readySeconds[index])};
      for (const Communication &link : communication)
        row.push_back(microseconds(link.bucketSeconds[index]));
      rows.push_back(std::move(row));
    }
    SmallVector<bool> rightAligned(rows.front().size(), true);
    rightAligned[1] = false;
    printTable(out, rows, rightAligned);
    for (auto [link, model] : llvm::zip(kLinks, communication))
      out << "  " << link.name << ": "
          << (options.shardOptimizer ? "reduce-scatter " : "all-reduce ")
          << microseconds(model.totalSeconds)
          << " us in all, exposed after backward "
          << microseconds(model.exposedSeconds) << " us (backward ends at "
          << microseconds(model.backwardEndSeconds)
          << " us of the step's bound)\n";
    if (sharded) {
      int ranks = options.reportRanks;
      out << llvm::formatv(
          "Optimizer state sharded over {0} ranks (--shard-optimizer, "
          "ZeRO-1): {1} slots{8}, {2} bytes per parameter, of which a rank "
          "keeps {3:F2}: {4} bytes of optimizer state a rank instead of {5} "
          "(saves {6:F2} bytes per parameter); the updated parameters are "
          "gathered after every step, {7} bytes:\n",
          ranks, sharded->slots, sharded->bytesPerParameter,
          sharded->rankBytesPerParameter, sharded->rankBytes,
          sharded->wholeBytes,
          sharded->bytesPerParameter - sharded->rankBytesPerParameter,
          sharded->gatherBytes,
          at.shardedMasters ? " and the f32 master weights" : "");
      for (const Link &link : kLinks)
        out << "  " << link.name << ": all-gather "
            << microseconds(allGatherSeconds(sharded->gatherBytes, ranks, link))
            << " us\n";
    }
  }
  return 0;
}
