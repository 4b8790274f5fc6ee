//===- EmitModel.cpp - step functions, descriptor and header ------*- C++ -*-===//
//
// This file implements generateModel: it plans and emits the training step
// (forward, backward, SGD update) and the evaluation step, then writes the
// model descriptor that libmpcrt reads, and the header applications include.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"
#include "compiler/cuda/CudaTarget.h"
#include "compiler/cuda/Occupancy.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::mpc;

// The verifier's rank limit is what a descriptor holds.
static_assert(kMaxInterfaceRank == MPC_MAX_RANK);

namespace {

const char *dtypeEnum(Type element) {
  if (element.isF32())
    return "MPC_F32";
  if (element.isF16())
    return "MPC_F16";
  if (element.isBF16())
    return "MPC_BF16";
  if (element.isInteger(32))
    return "MPC_I32";
  return "MPC_I64";
}

/// Copies `from` into `to`, element by element, when a value cannot be
/// computed in the buffer it must end up in (an output that is an alias or
/// a block argument, a gradient shared by two parameters).
void emitCopy(StepEmitter &emitter, Value from, const Buffer &to) {
  auto type = cast<RankedTensorType>(from.getType());
  std::string element = cType(type.getElementType());
  std::string name = emitter.kernelName("copy");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ in, {1} *__restrict__ "
      "out, long long n) {{\n"
      "  MPC_FOR_EACH(i, n) out[i] = in[i];\n"
      "}\n",
      name, element));
  std::string target = llvm::formatv("({0} *)(arena{1} + {2})", element,
                                     static_cast<int>(to.arena), to.offset);
  emitter.launch(name, elementwiseGrid(type.getNumElements()), 256,
                 {emitter.constPointer(from), target,
                  std::to_string(type.getNumElements()) + "LL"},
                 KernelCost().reads(from).writes(from));
}

/// The data-parallel buckets of a training step and how they are summed.
struct BucketPlan {
  std::vector<GradientBucket> buckets;
  /// Micro-batches per optimizer step: with more than one, only the last
  /// communicates, summing each rank's accumulated gradients.
  int64_t accumulate = 1;
  std::string accumulateKernel; // added on first use
};

/// Data parallel: sums the buckets that became final after step `step`
/// over the ranks (runtime/mpc_model.h). With gradient accumulation the
/// last micro-batch adds each bucket to the accumulator (the optimizer's
/// last slot) and sums that, so that the ranks communicate once per
/// optimizer step; mpc_compute_gradients (no update) sums the gradients.
void emitReadyBuckets(BucketPlan &plan, size_t step, StepEmitter &emitter) {
  const MemoryPlan &memory = emitter.getPlan();
  // Where byte `offset` of the gradients is in an arena: in the gradients',
  // or in the accumulator, the last slot (whole on every rank even when the
  // moments are sharded by --shard-optimizer, after their shards).
  auto inGradients = [&](int64_t offset) {
    return llvm::formatv("arena{0} + {1}", static_cast<int>(MPC_ARENA_GRADS),
                         offset)
        .str();
  };
  auto inAccumulator = [&](int64_t offset) {
    int arena = static_cast<int>(MPC_ARENA_OPTIMIZER);
    if (memory.shardedSlots)
      return llvm::formatv("arena{0} + {1} + {2}LL * ctx->shard_capacity + {3}",
                           arena, memory.slotsOffset,
                           memory.slotElementBytesBefore.back(), offset)
          .str();
    return llvm::formatv("arena{0} + {1}", arena,
                         memory.slotsOffset + memory.slotOffsets.back() +
                             offset)
        .str();
  };
  auto reduce = [&](const std::string &at, int64_t count) {
    emitter.hostStatement(llvm::formatv(
        "MPC_CHECK(mpc_rt_reduce_gradients(ctx, (float *)({0}), {1}LL));", at,
        count));
  };
  // A step that updates, sharded: each rank sums only its shard (ZeRO-1's
  // reduce-scatter), which is all its optimizer reads.
  auto reduceForUpdate = [&](auto at, const GradientBucket &bucket) {
    if (!memory.scatteredGradients)
      return reduce(at(bucket.offset), bucket.bytes / 4);
    emitter.hostStatement(llvm::formatv(
        "MPC_CHECK(mpc_rt_reduce_scatter_gradients(ctx, (float *)({0}), "
        "{1}LL, {2}LL));",
        at(0), bucket.offset / 4, bucket.bytes / 4));
  };
  for (GradientBucket &bucket : plan.buckets) {
    if (bucket.readyStep != step)
      continue;
    int64_t count = bucket.bytes / 4;
    emitter.hostStatement("// gradient bucket: " +
                          llvm::join(bucket.params, ", "));
    if (plan.accumulate == 1) {
      bucket.afterKernels = emitter.getKernelRecords().size();
      if (!memory.scatteredGradients) {
        reduce(inGradients(bucket.offset), count);
        continue;
      }
      // mpc_compute_gradients sums the gradients whole.
      emitter.hostStatement("if (ctx->apply_update) {");
      reduceForUpdate(inGradients, bucket);
      emitter.hostStatement("} else {");
      reduce(inGradients(bucket.offset), count);
      emitter.hostStatement("}");
      continue;
    }
    if (plan.accumulateKernel.empty()) {
      plan.accumulateKernel = emitter.kernelName("accumulate_bucket");
      // The optimizer's accumulate_grads, on one bucket's range.
      emitter.addKernel(llvm::formatv(
          "__global__ void {0}(const float *__restrict__ grads, float "
          "*__restrict__ sum, long long n) {{\n"
          "  MPC_FOR_EACH(i, n) mpc_store(sum + i, mpc_load(sum + i) + "
          "mpc_load(grads + i));\n"
          "}\n",
          plan.accumulateKernel));
    }
    emitter.hostStatement(
        llvm::formatv("if (ctx->apply_update && ctx->micro_step == {0}) {{",
                      plan.accumulate - 1));
    emitter.setSource({}, "optimizer: accumulate a gradient bucket");
    emitter.launch(plan.accumulateKernel, elementwiseGrid(count), 256,
                   {"(const float *)(" + inGradients(bucket.offset) + ")",
                    "(float *)(" + inAccumulator(bucket.offset) + ")",
                    std::to_string(count) + "LL"},
                   KernelCost()
                       .readsBytes(2 * bucket.bytes)
                       .writesBytes(bucket.bytes)
                       .flopsPer(count, 1));
    bucket.afterKernels = emitter.getKernelRecords().size();
    reduceForUpdate(inAccumulator, bucket);
    emitter.hostStatement("} else if (!ctx->apply_update) {");
    reduce(inGradients(bucket.offset), count);
    emitter.hostStatement("}");
  }
}

/// Emits every step of `model` and moves results where the descriptor
/// expects them; with `buckets`, sums each over the ranks once it is final.
/// With `fuse`, casts in a row, each a launch of its own otherwise, share
/// one.
LogicalResult emitBody(ModelOp model, const std::vector<Step> &steps,
                       const MemoryPlan &plan, StepEmitter &emitter,
                       ArrayRef<Value> gradients, bool fuse,
                       NonfiniteSites *nonfinite = nullptr,
                       BucketPlan *buckets = nullptr) {
  for (size_t i = 0; i < steps.size(); ++i) {
    // A gradient kept half: its producer wrote it where the optimizer
    // reads it (its check, too, under --debug-nonfinite).
    if (plan.isElidedGradientCast(steps[i].ops.front()))
      continue;
    SmallVector<const Step *> casts;
    int64_t tiles = 0;
    for (size_t j = i;
         fuse && j < steps.size() && isBatchableCast(steps[j], plan); ++j) {
      tiles += castBatchTiles(
          cast<RankedTensorType>(steps[j].ops.front()->getResult(0).getType())
              .getNumElements());
      if (tiles > 65535) // the grid's x
        break;
      casts.push_back(&steps[j]);
    }
    if (casts.size() > 1 && castsAreIndependent(casts, plan)) {
      SmallVector<Operation *> ops;
      for (const Step *cast : casts)
        ops.push_back(cast->ops.front());
      emitter.setOrigin(ops.front());
      emitter.setSource(ops);
      emitCastBatch(casts, emitter);
      emitter.setOrigin(nullptr);
    } else {
      casts = {&steps[i]};
      if (failed(emitStep(steps[i], emitter)))
        return failure();
    }
    if (plan.failed())
      return failure();
    for (const Step *step : casts) {
      if (nonfinite)
        emitNonfiniteChecks(*step, emitter, *nonfinite);
      if (buckets)
        emitReadyBuckets(*buckets, step - steps.data(), emitter);
    }
    i += casts.size() - 1;
  }
  OutputOp output = model.getOutputOp();
  SmallVector<Value> outputs{output.getLoss()};
  llvm::append_range(outputs, output.getOutputs());
  auto sourceOf = [](Value value) {
    SmallVector<Operation *, 1> ops;
    if (Operation *def = value.getDefiningOp())
      ops.push_back(def);
    return ops;
  };
  for (auto [value, buffer] : llvm::zip(outputs, plan.outputBuffers)) {
    const Buffer &actual = plan.lookup(value);
    emitter.setSource(sourceOf(value), "copy to an output");
    if (actual.arena != buffer.arena || actual.offset != buffer.offset)
      emitCopy(emitter, value, buffer);
  }
  for (auto [value, buffer] : llvm::zip(gradients, plan.paramBuffers)) {
    Buffer target{MPC_ARENA_GRADS, buffer.offset, buffer.bytes};
    const Buffer &actual = plan.lookup(value);
    emitter.setSource(sourceOf(value), "copy to a gradient");
    if (actual.arena != target.arena || actual.offset != target.offset)
      emitCopy(emitter, value, target);
  }
  if (buckets) {
    emitReadyBuckets(*buckets, steps.size(), emitter);
    // The cuda target reduces the buckets on a stream of their own; the
    // optimizer must not read a gradient before its bucket is summed.
    emitter.hostStatement("MPC_CHECK(mpc_rt_gradients_reduced(ctx));");
  }
  return success();
}

/// The valid range of an integer input: the class count of the
/// cross-entropy or the rows of the embedding that reads it (through
/// reshapes).
struct IndexBound {
  int64_t bound = 0;
  std::optional<int64_t> ignoreIndex;
};
IndexBound findIndexBound(Value input) {
  SmallVector<Value> worklist{input};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (Operation *user : value.getUsers()) {
      // Only as the targets or the indices: an input may be the logits.
      if (auto loss = dyn_cast<CrossEntropyOp>(user);
          loss && loss.getTargets() == value)
        return {loss.getLogits().getType().getShape().back(),
                loss.getIgnoreIndex()};
      if (auto embedding = dyn_cast<EmbeddingOp>(user);
          embedding && embedding.getIndices() == value)
        return {embedding.getTable().getType().getDimSize(0), std::nullopt};
      if (isAlias(user))
        worklist.push_back(user->getResult(0));
    }
  }
  return {};
}

void printTensorDesc(llvm::raw_ostream &os, StringRef name, Type type,
                     const Buffer &buffer, InitializerAttr init,
                     IndexBound bound) {
  auto tensor = cast<RankedTensorType>(type);
  os << "  {\"" << name << "\", " << dtypeEnum(tensor.getElementType())
     << ", " << tensor.getRank() << ", {";
  llvm::interleaveComma(tensor.getShape(), os);
  os << "}, " << tensor.getNumElements() << ", " << buffer.arena << ", "
     << buffer.offset << ", ";
  if (init) {
    ArrayRef<double> args = init.getArgs().asArrayRef();
    os << static_cast<int>(init.getKind()) << ", " << args.size() << ", {";
    llvm::interleaveComma(args, os, [&](double v) {
      os << llvm::formatv("{0:e17}", v).str();
    });
    os << "}, ";
  } else {
    os << "0, 0, {0, 0}, ";
  }
  os << bound.bound << ", " << (bound.ignoreIndex ? 1 : 0) << ", "
     << bound.ignoreIndex.value_or(0) << "},\n";
}

} // namespace

MemorySummary mlir::mpc::summarizeMemory(const MemoryPlan &trainPlan,
                                         const MemoryPlan &evalPlan) {
  MemorySummary memory;
  // Both plans place parameters, state and their half copies alike.
  memory.params = std::max(trainPlan.arenaBytes[MPC_ARENA_PARAMS],
                           evalPlan.arenaBytes[MPC_ARENA_PARAMS]);
  // Sharded master weights: the parameter arena holds the f32 copies of
  // the parameters read in f32, the masters are optimizer state.
  memory.shardedMasters = trainPlan.shardedMasters;
  for (auto [i, buffer] : llvm::enumerate(trainPlan.paramBuffers))
    if (!trainPlan.shardedMasters || trainPlan.paramCopyOffsets[i] >= 0)
      memory.parameterBytes += buffer.bytes;
  for (const Buffer &buffer : trainPlan.stateBuffers)
    memory.stateBytes += buffer.bytes;
  memory.gradients = trainPlan.arenaBytes[MPC_ARENA_GRADS];
  memory.optimizerState = trainPlan.arenaBytes[MPC_ARENA_OPTIMIZER];
  memory.trainActivations = trainPlan.arenaBytes[MPC_ARENA_ACTIVATIONS];
  memory.trainActivationsWithoutReuse = trainPlan.activationBytesWithoutReuse;
  memory.evalActivations = evalPlan.arenaBytes[MPC_ARENA_ACTIVATIONS];
  // The descriptor holds one workspace: both plans pin it at one place.
  assert(trainPlan.gemmWorkspace.offset == evalPlan.gemmWorkspace.offset &&
         trainPlan.gemmWorkspace.bytes == evalPlan.gemmWorkspace.bytes);
  memory.gemmWorkspace = trainPlan.gemmWorkspace.bytes;
  memory.activations =
      std::max(memory.trainActivations, memory.evalActivations);
  for (const auto &[value, buffer] : trainPlan.getBuffers()) {
    if (buffer.arena != MPC_ARENA_ACTIVATIONS)
      continue;
    Operation *op = value.getDefiningOp();
    // A value written over another's buffer is listed once, as the other.
    if (trainPlan.writtenOver(value))
      continue;
    // A reshape that is its operand's buffer is listed once, as the operand.
    if (auto reshape = dyn_cast_or_null<ReshapeOp>(op))
      if (trainPlan.isMaterialised(reshape.getInput()) &&
          trainPlan.lookup(reshape.getInput()).arena == buffer.arena &&
          trainPlan.lookup(reshape.getInput()).offset == buffer.offset)
        continue;
    memory.trainActivationTensors.push_back(
        {op ? op->getName().getStringRef().str() : "argument",
         fileLineCol(value.getLoc()),
         SmallVector<int64_t, 4>(
             cast<RankedTensorType>(value.getType()).getShape()),
         buffer.bytes});
  }
  llvm::sort(memory.trainActivationTensors, [](const auto &a, const auto &b) {
    return std::tie(b.bytes, a.location, a.op) <
           std::tie(a.bytes, b.location, b.op);
  });
  return memory;
}

/// The state the training pipeline added (delayed FP8 scaling's table),
/// given to evaluation too, unread: both steps' plans then place
/// parameters, state and half copies alike, and the runtime's descriptor
/// has one list of state.
static void addTrainingState(ModelOp train, ModelOp eval) {
  for (unsigned i = eval.getNumStates(); i < train.getNumStates(); ++i) {
    BlockArgument state = train.getStates()[i];
    eval.addState(train.getArgName(state), state.getType(),
                  cast<InitializerAttr>(train.getStateInits()[i]),
                  state.getLoc());
  }
}

MemorySummary mlir::mpc::planMemory(ModelOp train, ModelOp eval, bool fuse,
                                    int64_t gemmWorkspaceBytes,
                                    bool cudnnConvolutions,
                                    int64_t classifierChunks, bool blocks,
                                    bool batchNormsWhereRead) {
  addTrainingState(train, eval);
  SmallVector<Value> gradients(train.getOutputOp().getGradients());
  std::vector<Step> trainSteps = formSteps(train, fuse, !blocks);
  chooseClassifierChunks(train, trainSteps, gradients, gemmWorkspaceBytes,
                         cudnnConvolutions, classifierChunks);
  SmallVector<bool> masterCopies = shardedMasterCopies(train, eval);
  MemoryPlan trainPlan(train, trainSteps, gradients, gemmWorkspaceBytes,
                       cudnnConvolutions, masterCopies,
                       /*halfGradients=*/true, fuse && batchNormsWhereRead,
                       /*gatherPoolGradients=*/blocks);
  std::vector<Step> evalSteps = formSteps(eval, fuse, !blocks);
  MemoryPlan evalPlan(eval, evalSteps, {}, gemmWorkspaceBytes,
                      cudnnConvolutions, masterCopies);
  return summarizeMemory(trainPlan, evalPlan);
}

FailureOr<GeneratedModel>
mlir::mpc::generateModel(ModelOp train, ModelOp eval,
                         const CodegenOptions &options) {
  addTrainingState(train, eval);
  std::string name = train.getSymName().str();
  std::vector<std::string> kernels;

  OutputOp trainOutput = train.getOutputOp();
  SmallVector<Value> gradients(trainOutput.getGradients());
  // --debug-nonfinite checks every op's output: nothing stays in registers.
  bool fuse = options.fuse && !options.debugNonfinite;
  std::vector<Step> trainSteps = formSteps(train, fuse, !options.emulateBlocks);
  chooseClassifierChunks(train, trainSteps, gradients,
                         options.gemmWorkspaceBytes, options.cudnnConvolutions,
                         options.classifierChunks);
  SmallVector<bool> masterCopies = shardedMasterCopies(train, eval);
  MemoryPlan trainPlan(train, trainSteps, gradients, options.gemmWorkspaceBytes,
                       options.cudnnConvolutions, masterCopies,
                       options.halfGradients,
                       fuse && options.batchNormsWhereRead,
                       /*gatherPoolGradients=*/options.emulateBlocks);
  // ZeRO-1 sums each rank's shard of the gradients only (a reduce-scatter:
  // Gloo on the cpu target, NCCL reduces on the cuda target).
  trainPlan.scatteredGradients = trainPlan.shardedSlots;
  trainPlan.threadBlockClusters = options.threadBlockClusters;
  StepEmitter trainEmitter(trainPlan, name, name + "_train_step", kernels,
                           /*training=*/true);
  // The cuda target's cuDNN convolutions, one table for both steps.
  std::vector<std::string> convolutions;
  trainEmitter.setConvolutionTable(&convolutions);
  NonfiniteSites nonfinite;
  llvm::DenseSet<Operation *> forwardOps = findForwardOps(train);
  nonfinite.forwardOps = &forwardOps;
  NonfiniteSites *checks = options.debugNonfinite ? &nonfinite : nullptr;
  auto optimizer = train->getAttrOfType<OptimizerAttr>(kOptimizerAttr);
  bool dataParallel = optimizer && optimizer.getDataParallel();
  BucketPlan buckets;
  if (dataParallel) {
    buckets.accumulate = optimizer.getAccumulate();
    buckets.buckets = planGradientBuckets(train, trainSteps, trainPlan,
                                          gradients, options.bucketBytes);
  }
  if (failed(emitBody(train, trainSteps, trainPlan, trainEmitter, gradients,
                      fuse, checks, dataParallel ? &buckets : nullptr)))
    return failure();
  if (failed(emitOptimizerStep(train, trainEmitter)))
    return failure();
  StepEmitter syncEmitter(trainPlan, name, name + "_sync_half_copies",
                          kernels, /*training=*/false);
  emitSyncHalfCopies(train, syncEmitter);

  std::vector<Step> evalSteps = formSteps(eval, fuse, !options.emulateBlocks);
  MemoryPlan evalPlan(eval, evalSteps, {}, options.gemmWorkspaceBytes,
                      options.cudnnConvolutions, masterCopies);
  evalPlan.threadBlockClusters = options.threadBlockClusters;
  StepEmitter evalEmitter(evalPlan, name, name + "_eval", kernels,
                          /*training=*/false);
  evalEmitter.setConvolutionTable(&convolutions);
  nonfinite.forwardOps = nullptr; // evaluation is all forward
  if (failed(
          emitBody(eval, evalSteps, evalPlan, evalEmitter, {}, fuse, checks)))
    return failure();
  // The optimizer, the half-copy sync and the buckets read the plans too.
  if (trainPlan.failed() || evalPlan.failed())
    return failure();

  GeneratedModel model;
  model.trainKernels = trainEmitter.getKernelRecords();
  model.gradientBuckets = std::move(buckets.buckets);
  for (const Step &step : trainSteps)
    if (step.group == FusionKind::LinearClassifier) {
      LinearClassifierOps ops = linearClassifierOps(step);
      // dW's sum: the f32 accumulator where dW is half, or dW itself.
      int64_t sumBytes = classifierScratch(step).accumulatorBytes;
      if (sumBytes == 0)
        sumBytes = storageBytes(
            cast<RankedTensorType>(ops.weightGradientResult.getType()));
      model.classifierChunks.push_back(
          {ops.loss, ops.rows, classifierChunkRows(step),
           storageBytes(ops.grad.getType()),
           2 * storageBytes(ops.linear.getWeight().getType()) + 2 * sumBytes});
    }
  {
    llvm::raw_string_ostream os(model.kernelSource);
    os << "// Kernels of model @" << name << ", generated by mpc. CUDA C++;\n"
       << "// the cpu target compiles it with runtime/device/mpc_device.h.\n";
    auto hasFp8 = [](ModelOp model) {
      return model.walk([](QuantizeOp) { return WalkResult::interrupt(); })
          .wasInterrupted();
    };
    // cuda_fp8.h only where there are FP8 tensors (NVRTC parses it).
    if (hasFp8(train) || hasFp8(eval))
      os << "#define MPC_DEVICE_FP8 1\n";
    os << "#include \"runtime/device/mpc_device.h\"\n"
       << "#include \"runtime/device/mpc_training.h\"\n";
    auto hasAttention = [](ModelOp model) {
      return model
          .walk([](Operation *op) {
            return isa<AttentionOp, AttentionGradOp>(op)
                       ? WalkResult::interrupt()
                       : WalkResult::advance();
          })
          .wasInterrupted();
    };
    if (hasAttention(train) || hasAttention(eval))
      os << "#include \"runtime/device/mpc_attention.h\"\n";
    os << "\n";
    if (options.debugNonfinite)
      os << nonfiniteKernelPrelude();
    // Each kernel declares the largest block it is launched with: ptxas
    // then budgets registers for it (and reports what it could not fit),
    // and a launch with more threads fails instead of running short of
    // registers.
    std::map<std::string, int> launchBlocks;
    std::map<std::string, int> registerBudgets;
    std::map<std::string, int> clusterSizes;
    for (const StepEmitter *emitter :
         {&trainEmitter, &syncEmitter, &evalEmitter}) {
      for (const auto &[kernel, block] : emitter->getLaunchBlocks())
        launchBlocks[kernel] = std::max(launchBlocks[kernel], block);
      registerBudgets.insert(emitter->getRegisterBudgets().begin(),
                             emitter->getRegisterBudgets().end());
      clusterSizes.insert(emitter->getClusterSizes().begin(),
                          emitter->getClusterSizes().end());
    }
    for (std::string kernel : kernels) {
      for (const KernelDeclaration &declaration : findKernels(kernel)) {
        auto found = launchBlocks.find(declaration.name);
        std::string head = "__global__ void " + declaration.name + "(";
        size_t at = kernel.find(head);
        if (found == launchBlocks.end() || at == std::string::npos)
          continue;
        // The blocks an SM holds at the kernel's register budget, by
        // CUDA's calculator (32 a thread: as many as its threads allow).
        std::string minBlocks;
        auto budget = registerBudgets.find(declaration.name);
        if (budget != registerBudgets.end() && options.smVersion)
          if (std::optional<KernelOccupancy> fit = theoreticalOccupancy(
                  options.smVersion, found->second, budget->second,
                  /*sharedBytes=*/0))
            minBlocks = ", " + std::to_string(fit->blocksPerSm);
        auto cluster = clusterSizes.find(declaration.name);
        std::string clusterDims =
            cluster == clusterSizes.end()
                ? ""
                : "MPC_CLUSTER_DIMS(" + std::to_string(cluster->second) + ") ";
        kernel.replace(at, head.size(),
                       "__global__ void __launch_bounds__(" +
                           std::to_string(found->second) + minBlocks + ") " +
                           clusterDims + declaration.name + "(");
      }
      os << kernel << "\n";
    }
  }

  {
    llvm::raw_string_ostream os(model.hostSource);
    os << "// Host code of model @" << name << ", generated by mpc.\n";
    if (options.emulateBlocks)
      os << "// The kernels' host build runs blocks of blockDim threads.\n"
         << "#define MPC_DEVICE_EMULATION 1\n";
    os << "#include \"" << name << "_kernels.cu\"\n"
       << "#include \"runtime/gemm.h\"\n"
       << "#include \"runtime/mpc_model.h\"\n\n"
       << "#define MPC_CHECK(call)                                \\\n"
       << "  do {                                               \\\n"
       << "    mpc_status mpc_status_ = (call);                 \\\n"
       << "    if (mpc_status_ != MPC_OK)                       \\\n"
       << "      return mpc_status_;                            \\\n"
       << "  } while (0)\n\n";
    if (options.cuda)
      os << cudaHostPreamble(name);
    if (options.debugNonfinite)
      os << nonfiniteHostChecks();
    os << trainEmitter.functionSource() << "\n"
       << evalEmitter.functionSource() << "\n";
    if (trainPlan.halfMirror)
      os << syncEmitter.functionSource() << "\n";
    if (options.cuda)
      os << cudaHostKernelTable(name, findKernels(model.kernelSource));

    os << "static const mpc_tensor_desc " << name << "_inputs[] = {\n";
    for (auto [i, input] : llvm::enumerate(train.getInputs()))
      printTensorDesc(os, train.getArgName(input), input.getType(),
                      trainPlan.inputBuffers[i], nullptr,
                      findIndexBound(input));
    os << "  {0}};\n";
    os << "static const mpc_tensor_desc " << name << "_params[] = {\n";
    for (auto [i, param] : llvm::enumerate(train.getParams()))
      printTensorDesc(os, train.getArgName(param), param.getType(),
                      trainPlan.paramBuffers[i],
                      cast<InitializerAttr>(train.getParamInits()[i]), {});
    os << "  {0}};\n";
    os << "static const mpc_tensor_desc " << name << "_states[] = {\n";
    for (auto [i, state] : llvm::enumerate(train.getStates()))
      printTensorDesc(os, train.getArgName(state), state.getType(),
                      trainPlan.stateBuffers[i],
                      cast<InitializerAttr>(train.getStateInits()[i]), {});
    os << "  {0}};\n";
    // The training step returns only the loss; evaluation returns them all.
    os << "static const mpc_tensor_desc " << name << "_outputs[] = {\n";
    OutputOp evalOutput = eval.getOutputOp();
    SmallVector<Value> outputs{evalOutput.getLoss()};
    llvm::append_range(outputs, evalOutput.getOutputs());
    for (auto [i, value] : llvm::enumerate(outputs)) {
      StringRef outputName =
          i == 0
              ? StringRef("loss")
              : cast<StringAttr>(evalOutput.getOutputNames()[i - 1]).getValue();
      printTensorDesc(os, outputName, value.getType(),
                      evalPlan.outputBuffers[i], nullptr, {});
    }
    os << "  {0}};\n\n";

    auto optimizer = train->getAttrOfType<OptimizerAttr>(kOptimizerAttr);
    auto scaling = train->getAttrOfType<LossScalingAttr>(kLossScalingAttr);
    os << "static const char *const " << name << "_optimizer_slots[] = {";
    for (StringRef slot : optimizer.getSlotNames())
      os << "\"" << slot << "\", ";
    os << "0};\n";
    os << "static const mpc_dtype " << name << "_optimizer_slot_dtypes[] = {";
    for (Type slot : trainPlan.slotTypes)
      os << dtypeEnum(slot) << ", ";
    os << "MPC_F32};\n";
    // The ops whose outputs the --debug-nonfinite checks name by index.
    os << "static const mpc_debug_site " << name << "_debug_sites[] = {\n";
    for (const NonfiniteSites::Site &site : nonfinite.sites)
      os << "  {" << cStringLiteral(site.op) << ", "
         << cStringLiteral(site.location) << ", " << (site.backward ? 1 : 0)
         << "},\n";
    os << "  {0}};\n\n";
    os << "static const mpc_conv_desc " << name << "_convolutions[] = {\n";
    for (const std::string &convolution : convolutions)
      os << "  " << convolution << ",\n";
    os << "  {0}};\n\n";

    // Sharded master weights: where each parameter's f32 copy is.
    os << "static const int64_t " << name << "_param_copies[] = {";
    for (int64_t offset : trainPlan.paramCopyOffsets)
      os << offset << ", ";
    os << "-1};\n\n";

    // Gradients the optimizer reads half (MemoryPlan::gradientTypes).
    if (trainPlan.halfGradientType) {
      os << "static const mpc_dtype " << name << "_gradient_dtypes[] = {";
      llvm::interleaveComma(trainPlan.gradientTypes, os,
                            [&](Type type) { os << dtypeEnum(type); });
      os << "};\n\n";
    }

    MemorySummary memory = summarizeMemory(trainPlan, evalPlan);
    os << "// Memory plan (bytes): parameters, state and half copies "
       << memory.params << ", gradients " << memory.gradients
       << ", optimizer state " << memory.optimizerState << ", activations "
       << memory.activations << " (train step " << memory.trainActivations
       << " reusing memory by liveness, "
       << memory.trainActivationsWithoutReuse << " without reuse; eval "
       << memory.evalActivations << "); of the activations, cuBLASLt's "
       << "workspace " << memory.gemmWorkspace << "\n";
    os << "static const mpc_model_desc " << name << "_desc = {\n"
       << "  MPC_MODEL_ABI_VERSION, \"" << name << "\", "
       << (options.cuda ? "MPC_TARGET_CUDA" : "MPC_TARGET_CPU") << ",\n"
       << "  " << train.getNumInputs() << ", " << name << "_inputs,\n"
       << "  " << train.getNumParams() << ", " << name << "_params,\n"
       << "  " << train.getNumStates() << ", " << name << "_states,\n"
       << "  " << outputs.size() << ", " << name << "_outputs,\n"
       << "  {" << memory.params << ", " << memory.gradients << ", "
       << memory.optimizerState << ", " << memory.activations << "},\n"
       << "  " << trainPlan.optimizerSlots << ", " << name
       << "_optimizer_slots, " << name << "_optimizer_slot_dtypes, \""
       << stringifyOptimizerKind(optimizer.getKind()) << "\",\n"
       << "  " << floatLiteral(optimizer.getLr().convertToDouble()) << ", "
       << floatLiteral(optimizer.getMomentum().convertToDouble()) << ", "
       << floatLiteral(optimizer.getWeightDecay().convertToDouble()) << ",\n"
       << "  " << optimizer.getAccumulate() << ",\n"
       << "  " << lossScalerConfigLiteral(scaling, "INFINITY") << ",\n"
       << "  " << trainPlan.controlOffset << ",\n"
       << "  " << trainPlan.gemmWorkspace.offset << ", "
       << trainPlan.gemmWorkspace.bytes << ",\n"
       << "  " << name << "_train_step, " << name << "_eval,\n"
       << "  "
       << (trainPlan.halfMirror ? name + "_sync_half_copies" : std::string("0"))
       << ",\n"
       << "  " << (options.debugNonfinite ? 1 : 0) << ", "
       << nonfinite.sites.size() << ", " << name << "_debug_sites,\n"
       << "  " << (optimizer.getDataParallel() ? 1 : 0) << ",\n"
       << "  " << (optimizer.getShardOptimizer() ? 1 : 0) << ", "
       << trainPlan.slotsOffset << ",\n"
       << "  " << convolutions.size() << ", " << name << "_convolutions,\n"
       // Sharded models sum f32 gradients (data parallelism's rule).
       << "  "
       << (trainPlan.shardedSlots
               ? gradStatsChunk(trainPlan.arenaBytes[MPC_ARENA_GRADS] / 4)
               : 0)
       << ",\n"
       << "  " << (trainPlan.shardedMasters ? 1 : 0) << ", "
       << (trainPlan.shardedMasters ? name + "_param_copies" : std::string("0"))
       << ",\n"
       << "  "
       << (trainPlan.halfGradientType ? name + "_gradient_dtypes"
                                      : std::string("0"))
       << ",\n"
       << "};\n\n"
       << "extern \"C\" const mpc_model_desc *mpc_model_" << name
       << "(void) { return &" << name << "_desc; }\n";
  }

  {
    llvm::raw_string_ostream os(model.header);
    std::string guard = "MPC_MODEL_" + llvm::StringRef(name).upper() + "_H";
    os << "// Model @" << name << ", compiled by mpc. Link lib" << name
       << ".a and libmpcrt.a.\n"
       << "#ifndef " << guard << "\n#define " << guard << "\n\n"
       << "#include \"runtime/mpc_runtime.h\"\n\n"
       << "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
    os << "// Inputs, in the order mpc_train_step and mpc_eval take them:\n";
    for (BlockArgument input : train.getInputs())
      os << "//   " << train.getArgName(input) << ": " << input.getType()
         << "\n";
    os << "// Outputs: loss: tensor<f32>";
    for (auto [outputName, value] :
         llvm::zip(trainOutput.getOutputNames(), trainOutput.getOutputs()))
      os << ", " << cast<StringAttr>(outputName).getValue() << ": "
         << value.getType();
    os << "\n\nconst mpc_model_desc *mpc_model_" << name << "(void);\n\n"
       << "#ifdef __cplusplus\n}\n#endif\n\n#endif // " << guard << "\n";
  }
  return model;
}
