//===- EmitOptimizer.cpp - loss scale, optimizer, half copies ---*- C++ -*-===//
//
// This file emits what mpc-insert-loss-scaling and mpc-fuse-optimizer asked
// for: the kernel of mpc.loss_scale, the optimizer step that ends the
// training step, and the function that refreshes the half copies of the
// parameters. All of it reads and writes the training control block
// (mpc_train_control, runtime/device/mpc_training.h) in device memory, so a
// step never waits on the host.
//
// The optimizer step, over the flat gradient buffer G (laid out as the
// parameters), when the runtime applies updates:
//   accumulate   (accumulate = N > 1)  A = (first micro-batch ? 0 : A) + G;
//                 the rest runs after micro-batch N-1 only, on A
//   grad_stats   (loss scaling, clipping, or skip_nonfinite) per-block
//                 sums of squares of the unscaled gradients and inf/NaN
//                 flags
//   prepare      one thread: found_inf, global norm, clip factor, the loss
//                 scaler's transition (skip or apply; without a scaler,
//                 skip_nonfinite skips a step with inf/NaN gradients), the
//                 scheduled rate and Adam's bias corrections
//   update       one pass: read gradient, master weight, moments; write
//                 master weight, moments and the half copy; nothing at all
//                 when the step is skipped
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstddef>

using namespace mlir;
using namespace mlir::mpc;

namespace {

/// A double literal that reads back exactly (inf and NaN as expressions
/// of the float macros, which every target defines).
std::string doubleLiteral(double value) {
  if (!std::isfinite(value))
    return "(double)" + floatLiteral(value);
  return llvm::formatv("{0:e17}", value).str();
}

/// Sharded master weights: this rank's shard of them in the optimizer
/// arena (MemoryPlan::shardedMasters), its element 0 the flat buffer's
/// ctx->shard_begin.
std::string masterShardPointer(const MemoryPlan &plan) {
  return llvm::formatv("(float *)(arena{0} + {1} + {2}LL * "
                       "ctx->shard_capacity + {3}LL)",
                       static_cast<int>(MPC_ARENA_OPTIMIZER), plan.slotsOffset,
                       plan.masterShardElementBytes,
                       plan.masterShardWholeBytes)
      .str();
}

/// Sharded master weights: the whole f32 copies of the parameters a step
/// reads in f32 (the parameter arena's first bytes), from every rank's
/// masters. Each rank writes its shard's elements and -0.0 for the others,
/// and the ranks sum the copies: x + -0.0 is x for every x, +0.0 and -0.0
/// included, so the sum in rank order is the owners' values bit for bit.
/// Written whether or not the step updated, as the masters it reads are
/// current either way.
void emitMasterCopies(ModelOp model, StepEmitter &emitter) {
  const MemoryPlan &plan = emitter.getPlan();
  std::string table;
  int64_t copied = 0, segments = 0;
  for (auto [i, param] : llvm::enumerate(model.getParams())) {
    int64_t at = plan.paramCopyOffsets[i];
    if (at < 0)
      continue;
    table += llvm::formatv("{{{0}LL, {1}LL, {2}LL}, ",
                           plan.paramBuffers[i].offset / 4, at / 4,
                           plan.paramBuffers[i].bytes / 4)
                 .str();
    copied += plan.paramBuffers[i].bytes / 4;
    ++segments;
  }
  if (segments == 0)
    return;
  std::string name = emitter.kernelName("master_copies");
  emitter.addKernel(llvm::formatv(
      "// The f32 copies of the parameters read in f32: {{flat element,\n"
      "// copy element, elements} each, from this rank's master shard.\n"
      "__global__ void {0}(const float *__restrict__ masters, float "
      "*__restrict__ copies, long long shard_begin, long long shard_count) "
      "{{\n"
      "  static const long long segments[{1}][3] = {{{2}};\n"
      "  for (int s = 0; s < {1}; ++s) {{\n"
      "    const long long flat = segments[s][0], copy = segments[s][1];\n"
      "    MPC_FOR_EACH(i, segments[s][2]) {{\n"
      "      long long at = flat + i - shard_begin;\n"
      "      copies[copy + i] = at >= 0 && at < shard_count ? masters[at] "
      ": -0.0f;\n"
      "    }\n"
      "  }\n"
      "}\n",
      name, segments, table));
  emitter.setSource({}, "optimizer: f32 copies of the sharded master weights");
  emitter.launch(name, elementwiseGrid(copied), 256,
                 {masterShardPointer(plan),
                  llvm::formatv("(float *)arena{0}",
                                static_cast<int>(MPC_ARENA_PARAMS))
                      .str(),
                  "ctx->shard_begin", "ctx->shard_count"},
                 KernelCost().readsBytes(4 * copied).writesBytes(4 * copied));
  emitter.hostStatement("// every rank's shard of the f32 copies");
  emitter.hostStatement(llvm::formatv(
      "MPC_CHECK(mpc_rt_sum_across_ranks(ctx, (float *)arena{0}, {1}LL));",
      static_cast<int>(MPC_ARENA_PARAMS), copied));
}

const char *modeEnum(LossScaleMode mode) {
  switch (mode) {
  case LossScaleMode::None:
    return "MPC_LOSS_SCALE_NONE";
  case LossScaleMode::Static:
    return "MPC_LOSS_SCALE_STATIC";
  case LossScaleMode::Dynamic:
    return "MPC_LOSS_SCALE_DYNAMIC";
  }
  llvm_unreachable("unknown loss scale mode");
}


/// The optimizer's per-element update of `p` from the gradient `g` (both
/// f32 registers), as torch.optim computes it.
std::string updateCode(OptimizerAttr optimizer) {
  std::string code;
  llvm::raw_string_ostream os(code);
  if (optimizer.getKind() == OptimizerKind::Sgd) {
    // torch.optim.SGD, dampening 0: d = g + wd p; buf = momentum buf + d;
    // d = nesterov ? d + momentum buf : buf; p -= lr d.
    os << "    g += weight_decay * p;\n"
       << "    float m = momentum * mpc_load(slot0 + i) + g;\n"
       << "    mpc_store(slot0 + i, m);\n";
    if (optimizer.getNesterov())
      os << "    g += momentum * m;\n";
    else
      os << "    g = m;\n";
    os << "    p -= lr * g;\n";
    return code;
  }
  // torch.optim.Adam / AdamW (single-tensor): AdamW decays the weight
  // first, Adam adds wd p to the gradient; m.lerp_(g, 1 - beta1);
  // v = beta2 v + (1 - beta2) g g; p -= step_size m / (sqrt(v) /
  // sqrt(1 - beta2^t) + eps).
  if (optimizer.getKind() == OptimizerKind::AdamW)
    os << "    p *= 1.0f - lr * weight_decay;\n";
  else
    os << "    g += weight_decay * p;\n";
  os << llvm::formatv(
      "    float m = mpc_load(slot0 + i);\n"
      "    m += {0} * (g - m);\n"
      "    float v = {1} * mpc_load(slot1 + i) + {3} * g * g;\n"
      "    mpc_store(slot0 + i, m);\n"
      "    mpc_store(slot1 + i, v);\n"
      "    float denom = sqrtf(v) / bias_correction2_sqrt + {2};\n"
      "    p -= step_size * (m / denom);\n",
      floatLiteral(1.0 - optimizer.getBeta1().convertToDouble()),
      floatLiteral(optimizer.getBeta2().convertToDouble()),
      floatLiteral(optimizer.getEps().convertToDouble()),
      floatLiteral(1.0 - optimizer.getBeta2().convertToDouble()));
  return code;
}

/// The flat gradient buffer's segments where some gradients are kept half
/// (MemoryPlan::gradientTypes): each such gradient's parameter one, and
/// each run of f32 gradients between them. Gradient i of a half segment s
/// is half_grads[begins[s] + i], (half *)arena1 indexed so that a
/// parameter's half gradient starts at its f32 place.
struct GradientSegments {
  SmallVector<int64_t> begins;
  SmallVector<bool> half;
  int64_t halfElements = 0;

  explicit GradientSegments(const MemoryPlan &plan) {
    if (!plan.halfGradientType)
      return;
    for (auto [i, type] : llvm::enumerate(plan.gradientTypes)) {
      bool isHalf = type == plan.halfGradientType;
      if (isHalf || begins.empty() || half.back()) {
        begins.push_back(plan.paramBuffers[i].offset / 4);
        half.push_back(isHalf);
      }
      if (isHalf)
        halfElements += plan.paramBuffers[i].bytes / 4;
    }
  }
  bool empty() const { return begins.empty(); }
  /// The kernel's tables of them, as MPC_FOR_EACH_SEGMENTED reads them,
  /// each line indented by `indent`.
  std::string tables(StringRef indent) const {
    auto literal = [](int64_t begin) { return std::to_string(begin) + "LL"; };
    auto flag = [](bool isHalf) { return std::string(isHalf ? "1" : "0"); };
    return llvm::formatv("{0}static const long long begins[{1}] = {{{2}};\n"
                         "{0}static const unsigned char kept_half[{1}] = "
                         "{{{3}};\n",
                         indent, begins.size(),
                         llvm::join(llvm::map_range(begins, literal), ", "),
                         llvm::join(llvm::map_range(half, flag), ", "))
        .str();
  }
  /// The f32 gradient `i` of segment `s`.
  static std::string load(StringRef f32, StringRef s, StringRef i) {
    return llvm::formatv("(kept_half[{1}] ? mpc_load(half_grads + "
                         "begins[{1}] + {2}) : mpc_load({0} + {2}))",
                         f32, s, i)
        .str();
  }
};

} // namespace

std::string mlir::mpc::lossScalerConfigLiteral(LossScalingAttr scaling,
                                               StringRef noMaxScale) {
  return llvm::formatv(
             "{{{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}",
             modeEnum(scaling.getMode()),
             floatLiteral(scaling.getInitScale().convertToDouble()),
             doubleLiteral(scaling.getGrowthFactor().convertToDouble()),
             doubleLiteral(scaling.getBackoffFactor().convertToDouble()),
             scaling.getGrowthInterval(), scaling.getHysteresis(),
             floatLiteral(scaling.getMinScale().convertToDouble()), noMaxScale)
      .str();
}

LogicalResult mlir::mpc::emitLossScale(LossScaleOp op, StepEmitter &emitter) {
  std::string name = emitter.kernelName("loss_scale");
  emitter.addKernel(llvm::formatv(
      "// The scale this step's backward pass is seeded with; recorded as\n"
      "// the step's scale, which the optimizer and the runtime divide out.\n"
      "__global__ void {0}(mpc_train_control *control, float *out) {{\n"
      "  if (blockIdx.x != 0 || threadIdx.x != 0) return;\n"
      "  float scale = control->scaler.scale;\n"
      "  control->step_scale = scale;\n"
      "  out[0] = scale;\n"
      "}\n",
      name));
  emitter.launch(name, 1, 32,
                 {emitter.controlPointer(),
                  emitter.pointer(op.getResult())},
                 KernelCost().readsBytes(4).writesBytes(8));
  return success();
}

LogicalResult mlir::mpc::emitOptimizerStep(ModelOp train,
                                           StepEmitter &emitter) {
  auto optimizer = train->getAttrOfType<OptimizerAttr>(kOptimizerAttr);
  auto scaling = train->getAttrOfType<LossScalingAttr>(kLossScalingAttr);
  if (!optimizer || !scaling)
    return train.emitError()
           << "code generation needs mpc.optimizer and mpc.loss_scaling on "
              "the model: run mpc-insert-loss-scaling and mpc-fuse-optimizer";
  if (train.getNumParams() == 0)
    return success();
  const MemoryPlan &plan = emitter.getPlan();
  Type element =
      cast<RankedTensorType>(train.getParams()[0].getType()).getElementType();
  std::string storage = cType(element);
  int64_t gradBytes = plan.arenaBytes[MPC_ARENA_GRADS];
  int64_t n = gradBytes / (element.getIntOrFloatBitWidth() / 8);
  std::string count = std::to_string(n) + "LL";
  std::string control = emitter.controlPointer();
  // Sharded (ZeRO-1): this rank's shard of each slot, ctx->shard_capacity
  // elements a slot, after the control block.
  bool sharded = plan.shardedSlots;
  auto slotType = [&](int64_t slot) { return cType(plan.slotTypes[slot]); };
  auto slotPointer = [&](int64_t slot) {
    if (sharded)
      return llvm::formatv("({0} *)(arena{1} + {2} + {3}LL * "
                           "ctx->shard_capacity)",
                           slotType(slot),
                           static_cast<int>(MPC_ARENA_OPTIMIZER),
                           plan.slotsOffset, plan.slotElementBytesBefore[slot])
          .str();
    return llvm::formatv("({0} *)(arena{1} + {2})", slotType(slot),
                         static_cast<int>(MPC_ARENA_OPTIMIZER),
                         plan.slotsOffset + plan.slotOffsets[slot])
        .str();
  };
  int64_t accumulate = optimizer.getAccumulate();
  bool scaled = scaling.getMode() != LossScaleMode::None;
  bool clips = optimizer.getClipNorm().convertToDouble() > 0;
  bool adam = optimizer.getKind() != OptimizerKind::Sgd;
  // Without a loss scaler nothing else looks at the gradients before the
  // update: skip_nonfinite adds the statistics pass (one read of them).
  bool guardsNonfinite = !scaled && optimizer.getSkipNonfinite();
  bool stats = scaled || clips || guardsNonfinite;

  // Data parallel: the body summed every rank's gradients, bucket by
  // bucket (EmitDataParallel.cpp), before anything here reads them.
  if (optimizer.getDataParallel() && !element.isF32())
    return train.emitError()
           << "data parallelism sums f32 gradients; at O3 they are " << element
           << " (use O0, O1 or O2)";
  emitter.hostStatement("if (ctx->apply_update) {");
  std::string grads = "(const " + storage + " *)arena1";
  if (accumulate > 1) {
    // The accumulator is the last slot; the optimizer reads it.
    std::string accumulator = slotPointer(plan.optimizerSlots - 1);
    std::string name = emitter.kernelName("accumulate_grads");
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const {1} *__restrict__ grads, {1} "
        "*__restrict__ sum, long long n, int first) {{\n"
        "  MPC_FOR_EACH(i, n)\n"
        "    mpc_store(sum + i, (first ? 0.0f : mpc_load(sum + i)) + "
        "mpc_load(grads + i));\n"
        "}\n",
        name, storage));
    emitter.setSource({}, "optimizer: accumulate gradients");
    // Data parallel: the last micro-batch has accumulated bucket by bucket
    // already, to sum the accumulator over the ranks (EmitModel.cpp).
    if (optimizer.getDataParallel())
      emitter.hostStatement(
          llvm::formatv("if (ctx->micro_step != {0}) {{", accumulate - 1));
    emitter.launch(name, elementwiseGrid(n), 256,
                   {grads, accumulator, count, "ctx->micro_step == 0"},
                   KernelCost()
                       .readsElements(2 * n, element)
                       .writesElements(n, element)
                       .flopsPer(n, 1));
    if (optimizer.getDataParallel())
      emitter.hostStatement("}");
    emitter.hostStatement(
        llvm::formatv("if (ctx->micro_step == {0}) {{", accumulate - 1));
    grads = "(const " + accumulator.substr(1);
  }

  // The statistics' chunks, a block each (gradStatsChunk).
  int64_t statsChunk = gradStatsChunk(n);
  int64_t statsBlocks = (n + statsChunk - 1) / statsChunk;
  // Scaled gradient -> gradient: 1/scale, and 1/N for the mean over
  // micro-batches. In double, rounded once.
  // Data parallel: the sum is over ranks too (an exact product of two small
  // integers, so N ranks divide as N accumulated micro-batches do).
  std::string unscale =
      optimizer.getDataParallel()
          ? llvm::formatv("(1.0 / (double)control->step_scale) / ({0}.0 * "
                          "(double)control->values.world_size)",
                          accumulate)
                .str()
          : llvm::formatv("(1.0 / (double)control->step_scale) / {0}.0",
                          accumulate)
                .str();
  // Gradients kept half, read where they are (segments.load).
  GradientSegments segments(plan);
  std::string halfGradsParameter, halfGrads;
  if (!segments.empty()) {
    halfGradsParameter = ", const " + cType(plan.halfGradientType) +
                         " *__restrict__ half_grads";
    halfGrads = "(const " + cType(plan.halfGradientType) + " *)arena1";
  }
  // Bytes of the gradients, read once.
  auto readGradients = [&](KernelCost &cost) {
    cost.readsElements(n - segments.halfElements, element);
    if (!segments.empty())
      cost.readsElements(segments.halfElements, plan.halfGradientType);
  };
  if (stats) {
    std::string name = emitter.kernelName("grad_stats");
    // A thread takes its elements of the chunk in the order the plain loop
    // does, segment by segment: the same sums, bit for bit.
    std::string statsLoop =
        "    for (long long i = begin + threadIdx.x; i < end; "
        "i += blockDim.x) {\n"
        "      float g = mpc_load(grads + i);\n";
    if (!segments.empty())
      statsLoop = llvm::formatv(
          "{0}"
          "    for (long long s = mpc_segment_of(begins, {1}LL, begin); "
          "s < {1}LL && begins[s] < end; ++s) {{\n"
          "     const long long segment_end = s + 1 < {1}LL && begins[s + 1] "
          "< end ? begins[s + 1] : end;\n"
          "     long long i = begin + threadIdx.x;\n"
          "     if (i < begins[s]) i += (begins[s] - i + blockDim.x - 1) / "
          "blockDim.x * blockDim.x;\n"
          "     for (; i < segment_end; i += blockDim.x) {{\n"
          "      float g = {2};\n",
          segments.tables("    "), segments.begins.size(),
          GradientSegments::load("grads", "s", "i"));
    std::string statsLoopEnd =
        segments.empty() ? "    }\n" : "     }\n    }\n";
    emitter.addKernel(llvm::formatv(
        "// Per chunk of {3} gradients, a block each: the sum of squares of\n"
        "// the unscaled gradients and whether any is inf or NaN. Only the\n"
        "// chunks [first_chunk, end_chunk) (a rank's shard); 0 for others.\n"
        "__global__ void {0}(const {1} *__restrict__ grads{4}, "
        "mpc_train_control *control, long long n, long long first_chunk, "
        "long long end_chunk) {{\n"
        "  const float unscale = (float)({2});\n"
        "  mpc_sum sumsq = 0.0f;\n"
        "  float nonfinite = 0.0f;\n"
        "  const long long chunk = blockIdx.x;\n"
        "  if (chunk >= first_chunk && chunk < end_chunk) {{\n"
        "    const long long begin = chunk * {3}LL;\n"
        "    const long long end = begin + {3}LL < n ? begin + {3}LL : n;\n"
        "{5}"
        "      if (!MPC_ISFINITE(g)) nonfinite = 1.0f;\n"
        "      float u = g * unscale;\n"
        "      sumsq += u * u;\n"
        "{6}"
        "  }\n"
        "  sumsq = mpc_block_reduce_sum(sumsq);\n"
        "  nonfinite = mpc_block_reduce_max(nonfinite);\n"
        "  if (threadIdx.x == 0) {{\n"
        "    control->partial_sumsq[chunk] = sumsq;\n"
        "    control->partial_nonfinite[chunk] = nonfinite;\n"
        "  }\n"
        "}\n",
        name, storage, unscale, statsChunk, halfGradsParameter, statsLoop,
        statsLoopEnd));
    emitter.setSource({}, "optimizer: gradient statistics");
    // Blocks of up to 1024 threads: the MPC_GRAD_STATS_BLOCKS (256) blocks
    // then fill a GPU (2 of them a multiprocessor), where blocks of 256
    // left an H100 a quarter occupied, too few loads in flight: GPT-2
    // small's 124M gradients read at 0.5 TB/s (0.97 ms). The cpu target
    // runs a block on one thread either way; a small chunk takes fewer.
    int64_t threads = std::min<int64_t>(1024, (statsChunk + 31) / 32 * 32);
    std::string chunks = std::to_string(statsBlocks) + "LL";
    // Sharded: this rank's chunks; the others' partials come from the
    // ranks that own them.
    std::string firstChunk =
        plan.scatteredGradients
            ? llvm::formatv("ctx->shard_begin / {0}LL", statsChunk).str()
            : std::string("0LL");
    std::string endChunk =
        plan.scatteredGradients
            ? llvm::formatv("(ctx->shard_begin + ctx->shard_count + {0}LL - "
                            "1) / {0}LL",
                            statsChunk)
                  .str()
            : chunks;
    SmallVector<std::string> statsArguments = {grads};
    if (!segments.empty())
      statsArguments.push_back(halfGrads);
    statsArguments.append({control, count, firstChunk, endChunk});
    KernelCost statsCost;
    readGradients(statsCost);
    emitter.launch(name, statsBlocks, threads, statsArguments,
                   statsCost.writesBytes(2 * 4 * statsBlocks).flopsPer(n, 3));
    if (plan.scatteredGradients) {
      // Every partial is one rank's and zero on the others: the sum, in
      // any order, is exact, the partials of the unsharded step.
      emitter.hostStatement("// the partial statistics of every rank's shard");
      emitter.hostStatement(
          "MPC_CHECK(mpc_rt_sum_across_ranks(ctx, (" + control +
          ")->partial_sumsq, 2LL * MPC_GRAD_STATS_BLOCKS));");
    }
  }

  {
    std::string name = emitter.kernelName("optimizer_prepare");
    std::string source;
    llvm::raw_string_ostream os(source);
    os << "// One thread: the step's scalars, and the loss scaler's\n"
       << "// transition (mpc_training.h), which decides skip or apply.\n"
       << "__global__ void " << name
       << "(mpc_train_control *control) {\n"
       << "  if (blockIdx.x != 0 || threadIdx.x != 0) return;\n"
       << "  const float base_lr = control->values.learning_rate;\n"
       << "  double sumsq = 0.0;\n"
       << "  int found_inf = 0;\n";
    if (stats)
      os << "  for (int b = 0; b < " << statsBlocks << "; ++b) {\n"
         << "    sumsq += (double)control->partial_sumsq[b];\n"
         << "    found_inf |= control->partial_nonfinite[b] != 0.0f;\n"
         << "  }\n";
    os << "  double norm = MPC_SQRT(sumsq);\n"
       << "  double multiplier = " << unscale << ";\n";
    if (clips)
      os << "  // torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6),\n"
         << "  // at most 1.\n"
         << "  double clip = "
         << doubleLiteral(optimizer.getClipNorm().convertToDouble())
         << " / (norm + 1e-6);\n"
         << "  if (clip < 1.0) multiplier *= clip;\n";
    // NVRTC has no INFINITY macro: the kernel spells "no cap" mpc_inf().
    os << "  const mpc_loss_scaler_config config = "
       << lossScalerConfigLiteral(scaling, "mpc_inf()") << ";\n"
       << "  int applied = mpc_loss_scaler_transition(&config, "
          "&control->scaler, found_inf);\n";
    if (guardsNonfinite)
      os << "  // No loss scaler, and inf/NaN gradients: skipped all the same\n"
         << "  // (skip_nonfinite), counted as the scaler counts its skips.\n"
         << "  if (found_inf && applied) {\n"
         << "    applied = 0;\n"
         << "    control->scaler.total_skipped += 1;\n"
         << "  }\n";
    bool scheduled = optimizer.getSchedule() == LrSchedule::WarmupCosine;
    if (scheduled || adam)
      os << "  // Applied steps before this one: Adam's t - 1 and the\n"
         << "  // schedule's position; a skipped step advances neither.\n"
         << "  long long before = control->scaler.total_steps - "
            "control->scaler.total_skipped - applied;\n";
    if (scheduled)
      os << "  double lr = mpc_warmup_cosine_lr((double)base_lr, "
         << doubleLiteral(optimizer.getMinLr().convertToDouble()) << ", "
         << optimizer.getWarmupSteps() << "LL, " << optimizer.getDecaySteps()
         << "LL, before);\n";
    else
      os << "  double lr = (double)base_lr;\n";
    os << "  control->found_inf = found_inf;\n"
       << "  control->applied = applied;\n"
       << "  control->grad_norm = " << (stats ? "(float)norm" : "mpc_nan()")
       << ";\n"
       << "  control->grad_multiplier = (float)multiplier;\n"
       << "  control->learning_rate = (float)lr;\n";
    if (adam)
      os << "  double t = (double)(before + 1);\n"
         << "  control->step_size = (float)(lr / (1.0 - MPC_POW("
         << doubleLiteral(optimizer.getBeta1().convertToDouble()) << ", t)));\n"
         << "  control->bias_correction2_sqrt = (float)MPC_SQRT(1.0 - MPC_POW("
         << doubleLiteral(optimizer.getBeta2().convertToDouble()) << ", t));\n";
    os << "}\n";
    emitter.addKernel(source);
    emitter.setSource({}, "optimizer: prepare (loss scaler, clipping, "
                          "schedule)");
    emitter.launch(name, 1, 32, {control},
                   KernelCost()
                       .readsBytes(2 * 4 * statsBlocks +
                                   static_cast<int64_t>(sizeof(
                                       mpc_loss_scaler_state)) +
                                   4)
                       .writesBytes(static_cast<int64_t>(
                           offsetof(mpc_train_control, partial_sumsq)))
                       .flopsPer(statsBlocks, 2));
  }
  emitFp8ScalingUpdate(train, emitter, optimizer.getDataParallel());

  {
    std::string name = emitter.kernelName(
        std::string(stringifyOptimizerKind(optimizer.getKind())) + "_update");
    // Sharded: the rank's range of the flat buffers.
    std::string shardBegin = sharded ? " + ctx->shard_begin" : "";
    // Sharded master weights: the rank's shard of them, from its element
    // 0.
    std::string params = plan.shardedMasters
                             ? masterShardPointer(plan)
                             : "(" + storage + " *)arena0" + shardBegin;
    std::string updateGrads = grads + shardBegin;
    SmallVector<std::string> parameters = {
        storage + " *__restrict__ params",
        "const " + storage + " *__restrict__ grads",
        slotType(0) + " *__restrict__ slot0"};
    SmallVector<std::string> args = {params, updateGrads, slotPointer(0)};
    if (!segments.empty()) {
      parameters.insert(parameters.begin() + 2,
                        halfGradsParameter.substr(2));
      args.insert(args.begin() + 2, halfGrads);
    }
    if (adam) {
      parameters.push_back(slotType(1) + " *__restrict__ slot1");
      args.push_back(slotPointer(1));
    }
    MasterWeights master = optimizer.getMasterWeights();
    if (master == MasterWeights::Kahan) {
      int64_t slot = adam ? 2 : 1;
      parameters.push_back(slotType(slot) + " *__restrict__ compensation");
      args.push_back(slotPointer(slot));
    }
    if (master == MasterWeights::None) {
      // The seed is the session's; the step is read from the control
      // block (a CUDA graph replays the arguments it was captured with).
      parameters.push_back("unsigned long long seed");
      args.push_back("ctx->seed");
    }
    bool writesHalf = plan.halfMirror.has_value();
    if (writesHalf) {
      std::string half = cType(plan.halfMirrorType);
      parameters.push_back(half + " *__restrict__ half_copy");
      args.push_back(llvm::formatv("({0} *)(arena{1} + {2})", half,
                                   static_cast<int>(MPC_ARENA_PARAMS),
                                   plan.halfMirror->offset)
                         .str() +
                     shardBegin);
    }
    parameters.append({"const mpc_train_control *__restrict__ control",
                       "long long n"});
    args.append({control, sharded ? std::string("ctx->shard_count") : count});

    std::string source;
    llvm::raw_string_ostream os(source);
    os << "// The fused update: one pass over the flat buffers, in f32. A\n"
       << "// skipped step (inf/NaN gradients) writes nothing at all.\n"
       << "__global__ void " << name << "(";
    llvm::interleaveComma(parameters, os);
    os << ") {\n"
       << "  if (!control->applied) return;\n"
       << "  const float multiplier = control->grad_multiplier;\n";
    // Adam's learning rate is in its step size (NVRTC warns of a constant
    // that nothing reads).
    if (optimizer.getKind() != OptimizerKind::Adam)
      os << "  const float lr = control->learning_rate;\n";
    os << "  const float weight_decay = control->values.weight_decay;\n";
    if (adam)
      os << "  const float step_size = control->step_size;\n"
         << "  const float bias_correction2_sqrt = "
            "control->bias_correction2_sqrt;\n";
    else
      os << "  const float momentum = control->values.momentum;\n";
    if (master == MasterWeights::None)
      os << "  const unsigned long long rounding_key =\n"
         << "      mpc_rounding_key(seed, control->values.step);\n";
    if (segments.empty())
      os << "  MPC_FOR_EACH(i, n) {\n";
    else
      os << segments.tables("  ") << "  MPC_FOR_EACH_SEGMENTED(i, s, n, begins, "
         << segments.begins.size() << "LL) {\n";
    os << "    float p = mpc_load(params + i);\n";
    if (master == MasterWeights::Kahan)
      os << "    const float stored = p;\n";
    os << "    float g = "
       << (segments.empty() ? std::string("mpc_load(grads + i)")
                            : GradientSegments::load("grads", "s", "i"))
       << " * multiplier;\n"
       << updateCode(optimizer);
    switch (master) {
    case MasterWeights::F32:
    case MasterWeights::Nearest:
      os << "    mpc_store(params + i, p);\n";
      break;
    case MasterWeights::None:
      os << "    // Rounded stochastically: an update smaller than half an\n"
         << "    // ulp survives in expectation.\n"
         << "    mpc_store_stochastic(params + i, p, "
            "mpc_rounding_bits(rounding_key, i));\n";
      break;
    case MasterWeights::Kahan:
      // optimi's Kahan summation: the compensation carries what rounding
      // the parameter to nearest lost into the next step's update.
      os << "    float update = (p - stored) + mpc_load(compensation + i);\n"
         << "    mpc_store(params + i, stored + update);\n"
         << "    mpc_store(compensation + i, update - (mpc_load(params + i) - "
            "stored));\n";
      break;
    }
    if (writesHalf)
      os << "    mpc_store(half_copy + i, p);\n";
    os << "  }\n}\n";
    emitter.addKernel(source);
    // One pass: reads gradient, master weight and moments; writes master
    // weight, moments and the half copy.
    int64_t slots = adam ? 2 : 1;
    KernelCost cost;
    readGradients(cost);
    cost.readsElements(n, element).writesElements(n, element);
    for (int64_t slot = 0; slot < slots; ++slot)
      cost.readsElements(n, plan.slotTypes[slot])
          .writesElements(n, plan.slotTypes[slot]);
    if (master == MasterWeights::Kahan)
      cost.readsElements(n, element).writesElements(n, element);
    cost.flopsPer(n, (adam ? 16 : 7) +
                         (master == MasterWeights::None ? 12 : 0) +
                         (master == MasterWeights::Kahan ? 5 : 0));
    if (writesHalf)
      cost.writesElements(n, plan.halfMirrorType);
    std::string kind = stringifyOptimizerKind(optimizer.getKind()).str();
    emitter.setSource({}, "optimizer: " + kind + " update");
    emitter.launch(name, elementwiseGrid(n), 256, args, cost);
  }
  if (sharded) {
    // Every rank gets the shards the others updated (a skipped step
    // changed nothing, and the ranks agree on that).
    emitter.hostStatement("// gather the ranks' updated shards");
    if (plan.shardedMasters)
      emitMasterCopies(train, emitter);
    else
      emitter.hostStatement(
          "MPC_CHECK(mpc_rt_gather_shards(ctx, (float *)arena0, 4, " + count +
          "));");
    if (plan.halfMirror)
      emitter.hostStatement(llvm::formatv(
          "MPC_CHECK(mpc_rt_gather_shards(ctx, arena{0} + {1}, {2}, {3}));",
          static_cast<int>(MPC_ARENA_PARAMS), plan.halfMirror->offset,
          plan.halfMirrorType.getIntOrFloatBitWidth() / 8, count));
  }
  if (accumulate > 1)
    emitter.hostStatement("}");
  emitter.hostStatement("}");
  return success();
}

void mlir::mpc::emitSyncHalfCopies(ModelOp train, StepEmitter &emitter) {
  const MemoryPlan &plan = emitter.getPlan();
  if (!plan.halfMirror)
    return;
  int64_t n = plan.arenaBytes[MPC_ARENA_GRADS] / 4; // f32 parameters
  std::string half = cType(plan.halfMirrorType);
  std::string name = emitter.kernelName("sync_half_copies");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const float *__restrict__ params, {1} "
      "*__restrict__ half_copy, long long n) {{\n"
      "  MPC_FOR_EACH(i, n) mpc_store(half_copy + i, params[i]);\n"
      "}\n",
      name, half));
  emitter.setSource({}, "half copies of the parameters");
  std::string halfCopy = llvm::formatv("({0} *)(arena{1} + {2})", half,
                                       static_cast<int>(MPC_ARENA_PARAMS),
                                       plan.halfMirror->offset)
                             .str();
  if (!plan.shardedMasters) {
    emitter.launch(
        name, elementwiseGrid(n), 256,
        {"(const float *)arena0", halfCopy, std::to_string(n) + "LL"},
        KernelCost().readsBytes(4 * n).writesElements(n, plan.halfMirrorType));
    return;
  }
  // Sharded master weights: each rank its shard, then the ranks gather
  // them, as after an update (collective: every rank syncs together).
  emitter.launch(name, elementwiseGrid(n), 256,
                 {masterShardPointer(plan), halfCopy + " + ctx->shard_begin",
                  "ctx->shard_count"},
                 KernelCost().readsBytes(4 * n).writesElements(
                     n, plan.halfMirrorType));
  emitter.hostStatement(llvm::formatv(
      "MPC_CHECK(mpc_rt_gather_shards(ctx, arena{0} + {1}, {2}, {3}LL));",
      static_cast<int>(MPC_ARENA_PARAMS), plan.halfMirror->offset,
      plan.halfMirrorType.getIntOrFloatBitWidth() / 8, n));
  emitMasterCopies(train, emitter);
}
