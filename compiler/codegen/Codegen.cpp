//===- Codegen.cpp - kernel formation, memory plan, model source --*- C++ -*-===//
//
// This file implements the parts of code generation that do not depend on
// an op's kind: splitting the body into steps, planning memory, and
// assembling step functions, the model descriptor and the header.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cmath>
#include <map>

using namespace mlir;
using namespace mlir::mpc;

//===----------------------------------------------------------------------===//
// Kernel formation
//===----------------------------------------------------------------------===//

bool mlir::mpc::isAlias(Operation *op) { return isa<ReshapeOp>(op); }

bool Step::isFusedElementwise() const {
  return group ? *group == FusionKind::Loop : isElementwise(ops.front());
}

Value mlir::mpc::writtenResult(const Step &step) {
  Value product = step.ops.front()->getResult(0);
  for (Operation *op : llvm::drop_begin(step.ops))
    if (auto widen = dyn_cast<CastOp>(op); widen && widen.getInput() == product)
      return widen.getResult();
  return product;
}

bool Step::isAlias() const { return !group && mpc::isAlias(ops.front()); }

std::vector<Step> mlir::mpc::formSteps(ModelOp model, bool fuse,
                                       bool cpuThreads) {
  // mpc-form-kernels decides; each mpc.fusion it made is one step, and is
  // unwrapped again (its ops back in the body, its results replaced by what
  // it yields) so that the emitters see the ops and values of the model.
  if (fuse) {
    MpcFormKernelsPassOptions options;
    // Where a kernel's block is one cpu thread (the cpu target without
    // --emulate-blocks), a batch norm gradient's passes over its channel
    // evaluate the ReLU's gradient three times, one element after another:
    // the ResNet example's step took 2.9 ms on one thread with, 2.55 ms
    // without. The GPU's passes are bound by memory, which fusing saves.
    options.batchNormGradientPrologues = !cpuThreads;
    formKernels(model, options);
  }
  std::vector<Step> steps;
  Block &body = model.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator())) {
    auto fusion = dyn_cast<FusionOp>(op);
    if (!fusion) {
      steps.push_back(Step{{&op}, std::nullopt});
      continue;
    }
    Step step{{}, fusion.getKind()};
    for (Operation *inner : fusion.getGroupOps()) {
      inner->moveBefore(fusion);
      step.ops.push_back(inner);
    }
    fusion.replaceAllUsesWith(fusion.getYieldOp().getValues());
    fusion.erase();
    steps.push_back(std::move(step));
  }
  return steps;
}

//===----------------------------------------------------------------------===//
// Memory plan
//===----------------------------------------------------------------------===//

static int64_t alignTo64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

int64_t mlir::mpc::saturatingProduct(std::initializer_list<int64_t> factors) {
  int64_t product = 1;
  for (int64_t factor : factors) {
    std::optional<int64_t> next = llvm::checkedMul(product, factor);
    if (!next || *next > saturatedBytes)
      return saturatedBytes;
    product = *next;
  }
  return product;
}

LogicalResult mlir::mpc::checkAddressable(ModelOp train) {
  // `bytes` at saturatedBytes or above is a saturated sum or product
  // (scratch, the total); a tensor's own size is exact.
  auto refuse = [](Location loc, const Twine &what, int64_t bytes,
                   bool exact = false) -> LogicalResult {
    InFlightDiagnostic diag = emitError(loc) << what << " needs ";
    if (!exact && bytes >= saturatedBytes)
      diag << "more than 2^61 bytes";
    else
      diag << bytes << " bytes";
    diag << "; more than a target can address (2^47 bytes, 128 TiB)";
    return diag;
  };
  // Everything side by side: an upper bound of what the plans place.
  std::optional<int64_t> total = 0;
  auto add = [&](int64_t bytes, int64_t times = 1) {
    if (total)
      total = llvm::checkedMulAdd(alignTo64(bytes), times, *total);
  };
  auto checkValue = [&](Value value, int64_t times) -> LogicalResult {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type)
      return success();
    int64_t bytes = storageBytes(type);
    if (bytes > maxAddressableBytes) {
      std::string text;
      llvm::raw_string_ostream(text) << type;
      return refuse(value.getLoc(), "a tensor of '" + text + "'", bytes,
                    /*exact=*/true);
    }
    add(bytes, times);
    return success();
  };
  // A parameter has a gradient, a half copy, up to two optimizer slots and
  // a gradient accumulator beside it.
  for (BlockArgument param : train.getParams())
    if (failed(checkValue(param, 6)))
      return failure();
  for (BlockArgument arg : llvm::concat<BlockArgument>(train.getInputs(),
                                                       train.getStates()))
    if (failed(checkValue(arg, 1)))
      return failure();
  WalkResult walk = train.getBody().walk([&](Operation *op) {
    for (Value result : op->getResults())
      if (failed(checkValue(result, 1)))
        return WalkResult::interrupt();
    if (isa<FusionOp>(op))
      return WalkResult::advance();
    Step step;
    step.ops.push_back(op);
    int64_t scratch = scratchBytes(step);
    if (scratch > maxAddressableBytes) {
      (void)refuse(op->getLoc(),
                   "the scratch memory of '" +
                       op->getName().getStringRef() + "'",
                   scratch);
      return WalkResult::interrupt();
    }
    add(scratch);
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (!total || *total > maxAddressableBytes)
    return refuse(train.getLoc(), "model @" + train.getSymName(),
                  total.value_or(saturatedBytes));
  return success();
}

namespace {
/// A value (or scratch buffer) that needs activation memory for
/// [firstStep, lastStep].
struct Interval {
  int64_t firstStep, lastStep, bytes;
  Value value;             // null for scratch
  const Operation *owner;  // for scratch
};
} // namespace

/// Values a step writes that a later step, the terminator, or nothing reads;
/// values used only inside a fused group stay in registers.
static bool isMaterialisedResult(Value result, const Step &step) {
  Operation *def = result.getDefiningOp();
  if (auto constant = dyn_cast<ConstantOp>(def);
      constant && isa<SplatElementsAttr>(constant.getValue()) &&
      step.ops.size() == 1) {
    // A splat constant that only feeds elementwise ops becomes a literal.
    bool onlyElementwiseUsers = !result.use_empty() &&
        llvm::all_of(result.getUsers(),
                     [](Operation *user) { return isElementwise(user); });
    return !onlyElementwiseUsers;
  }
  // A batch norm gradient writes only the gradients something reads (a
  // model input's dx is not), in a group or not.
  if (isa<BatchNormGradOp>(def) && result.use_empty())
    return false;
  if (!step.group)
    return true;
  // cuBLASLt's GELU epilogue writes the GELU's input beside its output.
  if (*step.group == FusionKind::Gemm && isa<GeluOp>(step.ops.back()))
    return true;
  // The attention kernels write every result (an unread logsumexp too),
  // but a gradient scattered into the group's sum goes there.
  if (*step.group == FusionKind::Attention && isAttentionLike(def) &&
      result.use_empty())
    return true;
  // The kernels before a quantization in its group store what it reads.
  if (QuantizeOp quantize = storedAmaxQuantize(step);
      quantize && result == quantize.getInput())
    return true;
  for (Operation *user : result.getUsers())
    if (!llvm::is_contained(step.ops, user))
      return true;
  return false;
}

/// The half type of the parameters' mirror (MemoryPlan::halfMirror): the
/// first a parameter is cast to; null without any.
static Type halfMirrorTypeOf(ModelOp model) {
  for (BlockArgument param : model.getParams())
    for (Operation *user : param.getUsers())
      if (auto cast = dyn_cast<CastOp>(user); cast && isParamHalfCast(cast))
        return cast.getResult().getType().getElementType();
  return {};
}

SmallVector<bool> mlir::mpc::shardedMasterCopies(ModelOp train,
                                                ModelOp eval) {
  auto optimizer = train->getAttrOfType<OptimizerAttr>(kOptimizerAttr);
  if (!optimizer || !optimizer.getShardOptimizer() ||
      optimizer.getMasterWeights() != MasterWeights::F32 ||
      train.getNumParams() == 0 || eval.getNumParams() != train.getNumParams())
    return {};
  Type halfType = halfMirrorTypeOf(train);
  if (!halfType)
    return {};
  SmallVector<bool> copies(train.getNumParams(), false);
  for (ModelOp model : {train, eval})
    for (auto [i, param] : llvm::enumerate(model.getParams())) {
      bool mirrored = false;
      for (Operation *user : param.getUsers()) {
        auto cast = dyn_cast<CastOp>(user);
        if (!mirrored && cast && isParamHalfCast(cast) &&
            cast.getResult().getType().getElementType() == halfType) {
          mirrored = true;
          continue;
        }
        copies[i] = true;
      }
    }
  return copies;
}

void MemoryPlan::keepHalfGradients(
    ModelOp model, const std::vector<Step> &steps, ArrayRef<Value> gradients,
    const llvm::DenseMap<Value, int> &gradientUses,
    llvm::function_ref<bool(Operation *)> isAlias) {
  // Only where the optimizer's kernels alone read the gradient arena: an
  // accumulator, the ranks' sums and ZeRO-1's scatter read it as f32.
  auto optimizer = model->getAttrOfType<OptimizerAttr>(kOptimizerAttr);
  if (!optimizer || optimizer.getAccumulate() > 1 ||
      optimizer.getDataParallel() || optimizer.getShardOptimizer() ||
      shardedMasters)
    return;
  llvm::DenseMap<Operation *, const Step *> stepOf;
  for (const Step &step : steps)
    for (Operation *op : step.ops)
      stepOf[op] = &step;
  for (auto [i, gradient] : llvm::enumerate(gradients)) {
    auto widen = gradient.getDefiningOp<CastOp>();
    if (!widen || gradientUses.lookup(gradient) != 1 ||
        !gradientTypes[i].isF32() ||
        !widen.getResult().getType().getElementType().isF32())
      continue;
    Value half = widen.getInput();
    auto halfTensor = cast<RankedTensorType>(half.getType());
    Type halfType = halfTensor.getElementType();
    Operation *producer = half.getDefiningOp();
    const Step *castStep = stepOf.lookup(widen);
    // The cast a step of its own, its operand a result some other step
    // stores (not an alias of another value) and reads nothing else.
    if (!(halfType.isF16() || halfType.isBF16()) ||
        (halfGradientType && halfType != halfGradientType) || !producer ||
        isAlias(producer) || !half.hasOneUse() || buffers.count(half) ||
        !castStep || castStep->ops.size() != 1 ||
        !castStep->isFusedElementwise() ||
        llvm::is_contained(castStep->ops, producer))
      continue;
    halfGradientType = halfType;
    gradientTypes[i] = halfType;
    buffers[half] = {MPC_ARENA_GRADS, paramBuffers[i].offset,
                     storageBytes(halfTensor)};
    elidedGradientCasts.insert(widen);
  }
}

/// Whether `norm`'s result may be applied where it is read
/// (MemoryPlan::appliedWhereRead): a batch norm in training that saves its
/// statistics (so that they, and x, are kept for its gradient) and is a
/// step of its own, whose result has one reader: an elementwise op of its
/// shape in another step, whose code reads its operands through
/// buildElementFunction's loads (a loop kernel, or the epilogue of a batch
/// norm's row kernel).
static bool canApplyWhereRead(
    BatchNormOp norm, const std::vector<Step> &steps,
    const llvm::DenseMap<Operation *, int64_t> &stepOf) {
  if (!norm.getStats() || !norm.getResult().hasOneUse() ||
      steps[stepOf.lookup(norm)].ops.size() != 1)
    return false;
  Operation *reader = *norm.getResult().getUsers().begin();
  auto at = stepOf.find(reader);
  if (at == stepOf.end() || !isElementwise(reader) ||
      cast<RankedTensorType>(reader->getResult(0).getType()).getShape() !=
          norm.getResult().getType().getShape())
    return false;
  const Step &step = steps[at->second];
  if (step.isFusedElementwise())
    return true;
  Operation *row = rowKernelOp(step);
  if (step.group != FusionKind::Row || !isa_and_nonnull<BatchNormOp>(row))
    return false;
  // The row kernel's epilogue (rowOutput): the ops after it, up to the
  // next row op or a max pooling.
  for (Operation *op :
       llvm::make_range(std::next(llvm::find(step.ops, row)), step.ops.end())) {
    if (op == reader)
      return true;
    if (isRowFusible(op) || isa<MaxPool2dWithIndicesOp>(op))
      return false;
  }
  return false;
}

/// Whether `pool`'s input gradient may be gathered where it is read
/// (MemoryPlan::gatheredWhereRead): the pooling gradient is a step of its
/// own, and its result has one reader, the gradient of a batch norm in
/// another step, which reads it as dy (through rowInput, every form of its
/// kernels).
static bool canGatherWhereRead(
    MaxPool2dIndicesGradOp pool, const std::vector<Step> &steps,
    const llvm::DenseMap<Operation *, int64_t> &stepOf) {
  if (!pool.getResult().hasOneUse() ||
      steps[stepOf.lookup(pool)].ops.size() != 1)
    return false;
  auto reader = dyn_cast<BatchNormGradOp>(*pool.getResult().getUsers().begin());
  return reader && reader.getGrad() == pool.getResult() &&
         stepOf.count(reader) &&
         stepOf.lookup(reader) != stepOf.lookup(pool);
}

MemoryPlan::MemoryPlan(ModelOp model, const std::vector<Step> &steps,
                       ArrayRef<Value> gradients, int64_t gemmWorkspaceBytes,
                       bool cudnnConvolutions, ArrayRef<bool> masterCopies,
                       bool halfGradients, bool batchNormsWhereRead,
                       bool gatherPoolGradients)
    : cudnnConvolutions(cudnnConvolutions) {
  shardedMasters =
      model.getNumParams() > 0 && masterCopies.size() == model.getNumParams();
  // Reshapes that are a step of their own share their operand's buffer; in
  // a kernel group they are index arithmetic.
  llvm::DenseSet<Operation *> aliases;
  for (const Step &step : steps)
    if (step.isAlias())
      aliases.insert(step.ops.front());
  auto isAlias = [&](Operation *op) { return aliases.contains(op); };
  // Algorithm:
  // 1. Parameters, then state, are packed into the parameter arena in
  //    declaration order; gradients mirror the parameters' offsets.
  // 2. Inputs, the loss and the GEMM workspace (cuda target, 256-aligned)
  //    are pinned at the start of the activation arena, where train and
  //    eval plans agree; evaluation's extra outputs follow, in declaration
  //    order (the training step has none: mpc-autodiff drops them).
  // 3. A value that is exactly one parameter's gradient is computed in place
  //    in the gradient arena.
  // 4. Every other materialised value gets activation memory for the steps
  //    between its definition and its last use (an alias extends its
  //    source's), placed greedily by size (see below).
  // 5. A step that can write a result over an operand (inPlaceCandidate)
  //    does, when the operand's buffer is an activation read by nothing
  //    after the step: the two are one interval, which the result's uses
  //    extend.
  //    Sharded master weights: the parameters' offsets are in the flat
  //    buffer (the gradients', the masters' shards), and only the
  //    parameters a step reads in f32 have a place, their f32 copy.
  int64_t offset = 0, flat = 0;
  for (auto [i, param] : llvm::enumerate(model.getParams())) {
    Buffer buffer{MPC_ARENA_PARAMS, flat,
                  storageBytes(cast<RankedTensorType>(param.getType()))};
    paramBuffers.push_back(buffer);
    flat += buffer.bytes;
    if (!shardedMasters) {
      buffers[param] = buffer;
      offset += buffer.bytes;
      continue;
    }
    paramCopyOffsets.push_back(masterCopies[i] ? offset : -1);
    if (masterCopies[i]) {
      buffers[param] = {MPC_ARENA_PARAMS, offset, buffer.bytes};
      offset += buffer.bytes;
    }
  }
  arenaBytes[MPC_ARENA_GRADS] = flat;
  for (BlockArgument state : model.getStates()) {
    Buffer buffer{MPC_ARENA_PARAMS, offset,
                  storageBytes(cast<RankedTensorType>(state.getType()))};
    buffers[state] = buffer;
    stateBuffers.push_back(buffer);
    offset += buffer.bytes;
  }
  // Half copies of the parameters (mixed precision) live with them: they
  // are the half model, read by every step and written by the fused
  // optimizer, so they are not activations. The first half type a
  // parameter is cast to gets a mirror of the parameter region: the copy of
  // a parameter at byte offset o is at halfMirror.offset + o / 2, so the
  // optimizer writes it from the same flat index it updates (parameters
  // without a copy leave holes). Other casts of parameters follow it.
  halfMirrorType = halfMirrorTypeOf(model);
  if (halfMirrorType) {
    offset = alignTo64(offset);
    halfMirror = Buffer{MPC_ARENA_PARAMS, offset,
                        arenaBytes[MPC_ARENA_GRADS] / 2};
    offset += halfMirror->bytes;
  }
  for (auto [i, param] : llvm::enumerate(model.getParams())) {
    bool mirrored = false;
    for (Operation *user : param.getUsers())
      if (auto cast = dyn_cast<CastOp>(user);
          cast && !buffers.count(cast.getResult())) {
        if (!mirrored && halfMirror && isParamHalfCast(cast) &&
            cast.getResult().getType().getElementType() == halfMirrorType) {
          buffers[cast.getResult()] = {
              MPC_ARENA_PARAMS, halfMirror->offset + paramBuffers[i].offset / 2,
              storageBytes(cast.getResult().getType())};
          halfMirrorValues.insert(cast.getResult());
          mirrored = true;
          continue;
        }
        offset = (offset + 1) / 2 * 2; // half-precision alignment
        Buffer buffer{MPC_ARENA_PARAMS, offset,
                      storageBytes(cast.getResult().getType())};
        buffers[cast.getResult()] = buffer;
        offset += buffer.bytes;
      }
  }
  arenaBytes[MPC_ARENA_PARAMS] = offset;

  // The optimizer arena: one gradient-arena-sized region per slot, then the
  // training control block.
  if (auto optimizer = model->getAttrOfType<OptimizerAttr>(kOptimizerAttr)) {
    optimizerSlots = optimizer.getSlotNames().size();
    // Without parameters the slots are empty (f32 for the descriptor).
    Type param = model.getNumParams() > 0
                     ? cast<RankedTensorType>(model.getParams()[0].getType())
                           .getElementType()
                     : Float32Type::get(model.getContext());
    int64_t elements =
        arenaBytes[MPC_ARENA_GRADS] / (param.getIntOrFloatBitWidth() / 8);
    int64_t elementBytesBefore = 0, slotBytes = 0;
    for (Type slot : optimizer.getSlotTypes(param)) {
      int64_t bytes = slot.getIntOrFloatBitWidth() / 8;
      slotTypes.push_back(slot);
      slotOffsets.push_back(slotBytes);
      slotElementBytesBefore.push_back(elementBytesBefore);
      elementBytesBefore += bytes;
      slotBytes += (elements * bytes + 3) / 4 * 4;
    }
    int64_t controlBytes = static_cast<int64_t>(sizeof(mpc_train_control));
    if (optimizer.getShardOptimizer()) {
      // The runtime sizes the slots by the ranks: they go last.
      shardedSlots = true;
      slotsOffset = alignTo64(controlBytes);
      arenaBytes[MPC_ARENA_OPTIMIZER] = slotsOffset + slotBytes;
      if (shardedMasters) {
        // The masters' shard follows the slots' (the accumulator, whole,
        // is the last slot): an f32 element a parameter element.
        masterShardWholeBytes = 0;
        masterShardElementBytes = elementBytesBefore;
        if (optimizer.getAccumulate() > 1) {
          masterShardElementBytes = slotElementBytesBefore.back();
          masterShardWholeBytes =
              (elements * (elementBytesBefore - masterShardElementBytes) + 3) /
              4 * 4;
        }
        arenaBytes[MPC_ARENA_OPTIMIZER] += elements * 4;
      }
    } else {
      controlOffset = alignTo64(slotBytes);
      arenaBytes[MPC_ARENA_OPTIMIZER] = controlOffset + controlBytes;
    }
  }

  OutputOp output = model.getOutputOp();
  int64_t pinned = 0;
  auto pin = [&](Type type) {
    Buffer buffer{MPC_ARENA_ACTIVATIONS, pinned,
                  storageBytes(cast<RankedTensorType>(type))};
    pinned = alignTo64(pinned + buffer.bytes);
    return buffer;
  };
  for (BlockArgument input : model.getInputs()) {
    buffers[input] = pin(input.getType());
    inputBuffers.push_back(buffers[input]);
  }
  // Outputs are pinned whether or not the value can be written there; the
  // step copies into the pinned buffer when it cannot (see generateModel).
  // The loss and the GEMM workspace come first, where the training step
  // (which returns no extra outputs) and evaluation agree.
  llvm::DenseSet<Value> placedOutputs;
  auto pinOutput = [&](Value value) {
    Buffer buffer = pin(value.getType());
    outputBuffers.push_back(buffer);
    Operation *def = value.getDefiningOp();
    if (def && !isAlias(def) && !buffers.count(value) &&
        placedOutputs.insert(value).second)
      buffers[value] = buffer;
  };
  pinOutput(output.getLoss());
  if (gemmWorkspaceBytes > 0) {
    int64_t start = (pinned + gemmWorkspaceAlignment - 1) /
                    gemmWorkspaceAlignment * gemmWorkspaceAlignment;
    gemmWorkspace = {MPC_ARENA_ACTIVATIONS, start, gemmWorkspaceBytes};
    pinned = alignTo64(start + gemmWorkspaceBytes);
  }
  for (Value value : output.getOutputs())
    pinOutput(value);

  llvm::DenseMap<Value, int> gradientUses;
  for (Value gradient : gradients)
    ++gradientUses[gradient];
  for (auto [i, gradient] : llvm::enumerate(gradients)) {
    Operation *def = gradient.getDefiningOp();
    if (def && !isAlias(def) && gradientUses[gradient] == 1 &&
        !buffers.count(gradient))
      buffers[gradient] = {MPC_ARENA_GRADS, paramBuffers[i].offset,
                           paramBuffers[i].bytes};
  }
  for (Value param : model.getParams())
    gradientTypes.push_back(
        cast<RankedTensorType>(param.getType()).getElementType());
  if (halfGradients)
    keepHalfGradients(model, steps, gradients, gradientUses, isAlias);

  // Liveness, in step indices; the terminator reads at steps.size().
  llvm::DenseMap<Operation *, int64_t> stepOf;
  for (auto [index, step] : llvm::enumerate(steps))
    for (Operation *op : step.ops)
      stepOf[op] = index;
  auto rootOf = [&](Value value) {
    while (Operation *def = value.getDefiningOp()) {
      if (!isAlias(def))
        break;
      value = def->getOperand(0);
    }
    return value;
  };
  if (batchNormsWhereRead)
    for (const Step &step : steps)
      for (Operation *op : step.ops) {
        if (auto norm = dyn_cast<BatchNormOp>(op);
            norm && canApplyWhereRead(norm, steps, stepOf))
          appliedBatchNorms.insert(norm);
        if (auto pool = dyn_cast<MaxPool2dIndicesGradOp>(op);
            pool && gatherPoolGradients &&
            canGatherWhereRead(pool, steps, stepOf)) {
          gatheredPoolGradients.insert(pool);
          // A gradient sliced over its channels' elements reads dy in two
          // kernels: the first stores what it gathers, the second reads
          // it back, so the gather (bound by its instructions) runs once.
          auto reader = cast<BatchNormGradOp>(
              *pool.getResult().getUsers().begin());
          if (batchNormSplits(reader.getInput().getType()) > 1)
            storedGathers.insert(pool);
        }
      }
  llvm::DenseMap<Value, int64_t> lastUse;
  for (auto [index, step] : llvm::enumerate(steps))
    for (Operation *op : step.ops)
      for (Value operand : op->getOperands()) {
        int64_t &last = lastUse[rootOf(operand)];
        last = std::max<int64_t>(last, index);
        // Where a batch norm is applied, what it is applied from is read.
        if (BatchNormOp norm = appliedWhereRead(operand))
          for (Value from : std::initializer_list<Value>{
                   norm.getInput(), norm.getStats(), norm.getGamma(),
                   norm.getBeta()}) {
            int64_t &fromLast = lastUse[rootOf(from)];
            fromLast = std::max<int64_t>(fromLast, index);
          }
        // Where a pooling's gradient is gathered, what it gathers from.
        if (MaxPool2dIndicesGradOp pool = gatheredWhereRead(operand))
          for (Value from : std::initializer_list<Value>{pool.getGrad(),
                                                         pool.getIndices()}) {
            int64_t &fromLast = lastUse[rootOf(from)];
            fromLast = std::max<int64_t>(fromLast, index);
          }
      }
  for (Value operand : output->getOperands())
    lastUse[rootOf(operand)] = steps.size();

  // Results written over an operand's buffer (5), and that operand's root.
  for (auto [index, step] : llvm::enumerate(steps)) {
    std::optional<std::pair<Value, Value>> candidate = inPlaceCandidate(step);
    if (!candidate)
      continue;
    auto [result, operand] = *candidate;
    Value root = rootOf(operand);
    Operation *def = root.getDefiningOp();
    if (!def || buffers.count(root) || buffers.count(result) ||
        appliedWhereRead(root) || gatheredWhereRead(root) ||
        lastUse.lookup(root) != static_cast<int64_t>(index) ||
        lastUse.lookup(result) == static_cast<int64_t>(steps.size()))
      continue;
    writtenOverValues[result] = root;
    lastUse[root] = std::max(lastUse[root], lastUse.lookup(result));
  }

  std::vector<Interval> intervals;
  for (auto [index, step] : llvm::enumerate(steps)) {
    for (Operation *op : step.ops) {
      if (isAlias(op))
        continue;
      for (Value result : op->getResults()) {
        if (buffers.count(result) || !isMaterialisedResult(result, step) ||
            writtenOverValues.count(result) || appliedWhereRead(result) ||
            (gatheredWhereRead(result) &&
             !storedGathers.contains(result.getDefiningOp())))
          continue;
        int64_t last = lastUse.lookup(result);
        intervals.push_back(
            {static_cast<int64_t>(index), std::max<int64_t>(last, index),
             storageBytes(cast<RankedTensorType>(result.getType())), result,
             nullptr});
      }
    }
    if (int64_t bytes = scratchBytes(step, cudnnConvolutions))
      intervals.push_back({static_cast<int64_t>(index),
                           static_cast<int64_t>(index), bytes, Value(),
                           step.ops.front()});
  }

  // Greedy by size (Pisarchyk and Lee, "Efficient Memory Management for
  // Deep Neural Net Inference", 2020; TensorFlow Lite's arena planner):
  // the largest buffers are placed first, each in the smallest gap left
  // between the buffers already placed whose lifetimes overlap its own, or
  // after them. Placing in program order instead (first fit) fragments
  // the arena around the large, short-lived buffers of a step.
  int64_t peak = pinned;
  activationBytesWithoutReuse = pinned;
  for (const Interval &interval : intervals)
    activationBytesWithoutReuse += alignTo64(interval.bytes);
  std::vector<size_t> order(intervals.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return intervals[a].bytes > intervals[b].bytes;
  });
  struct Placed {
    int64_t offset, end;
    const Interval *interval;
  };
  std::vector<Placed> placed;
  for (size_t index : order) {
    const Interval &interval = intervals[index];
    std::vector<const Placed *> overlapping;
    for (const Placed &block : placed)
      if (block.interval->firstStep <= interval.lastStep &&
          interval.firstStep <= block.interval->lastStep)
        overlapping.push_back(&block);
    llvm::sort(overlapping, [](const Placed *a, const Placed *b) {
      return a->offset < b->offset;
    });
    std::optional<int64_t> best;
    int64_t bestGap = 0, candidate = pinned;
    for (const Placed *block : overlapping) {
      int64_t gap = block->offset - candidate;
      if (gap >= interval.bytes && (!best || gap < bestGap)) {
        best = candidate;
        bestGap = gap;
      }
      candidate = std::max(candidate, alignTo64(block->end));
    }
    int64_t offset = best ? *best : candidate;
    placed.push_back({offset, offset + interval.bytes, &interval});
    peak = std::max(peak, alignTo64(offset + interval.bytes));
    Buffer buffer{MPC_ARENA_ACTIVATIONS, offset, interval.bytes};
    if (interval.value)
      buffers[interval.value] = buffer;
    else
      scratchBuffers[interval.owner] = buffer;
  }
  arenaBytes[MPC_ARENA_ACTIVATIONS] = peak;
  for (auto [result, root] : writtenOverValues)
    buffers[result] = buffers.lookup(root);

  // Aliases share their root's buffer.
  for (const Step &step : steps)
    for (Operation *op : step.ops)
      if (isAlias(op) && !buffers.count(op->getResult(0))) {
        auto it = buffers.find(rootOf(op->getResult(0)));
        if (it != buffers.end()) {
          // Copied first: inserting may grow the map and move `it`'s entry.
          Buffer root = it->second;
          buffers[op->getResult(0)] = root;
        }
      }
}

const Buffer &MemoryPlan::lookup(Value value, Operation *reader) const {
  auto it = buffers.find(value);
  if (it != buffers.end())
    return it->second;
  // Reported once: the first miss is the one to fix.
  if (!missingEntry) {
    InFlightDiagnostic diag =
        emitError(value.getLoc())
        << "internal error: code generation reads this value, which has no "
           "place in the memory plan";
    if (reader)
      diag.attachNote(reader->getLoc())
          << "read by the code of '" << reader->getName() << "'";
  }
  missingEntry = true;
  static const Buffer placeholder;
  return placeholder;
}

Buffer MemoryPlan::scratch(const Step &step) const {
  auto it = scratchBuffers.find(step.ops.front());
  if (it != scratchBuffers.end())
    return it->second;
  if (!missingEntry)
    step.ops.front()->emitError()
        << "internal error: code generation asks for scratch memory this "
           "step was not planned with";
  missingEntry = true;
  return Buffer();
}

//===----------------------------------------------------------------------===//
// StepEmitter
//===----------------------------------------------------------------------===//

std::string mlir::mpc::cType(Type elementType) {
  if (elementType.isF32())
    return "float";
  if (elementType.isF16())
    return "__half";
  if (elementType.isBF16())
    return "__nv_bfloat16";
  if (isa<Float8E4M3FNType>(elementType))
    return "__nv_fp8_e4m3";
  if (isa<Float8E5M2Type>(elementType))
    return "__nv_fp8_e5m2";
  if (elementType.isInteger(1))
    return "unsigned char";
  if (elementType.isInteger(8))
    return "signed char";
  if (elementType.isInteger(32))
    return "int";
  if (elementType.isInteger(64))
    return "long long";
  llvm_unreachable("element type without a storage type");
}

std::string mlir::mpc::elementCType(Value value) {
  return cType(cast<RankedTensorType>(value.getType()).getElementType());
}

std::string mlir::mpc::cStringLiteral(StringRef text) {
  std::string literal = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      literal += '\\';
    literal += c;
  }
  return literal + "\"";
}

SmallVector<int64_t> mlir::mpc::rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

std::string mlir::mpc::coordinateCode(ArrayRef<int64_t> shape,
                                      StringRef prefix) {
  std::string code;
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  for (auto [d, extent] : llvm::enumerate(shape))
    code += llvm::formatv("    long long {0}{1} = (i / {2}LL) % {3}LL;\n",
                          prefix, d, strides[d], extent)
                .str();
  return code;
}

std::string mlir::mpc::offsetCode(StringRef name, StringRef linear,
                                  ArrayRef<int64_t> shape,
                                  ArrayRef<int64_t> dims) {
  if (dims.empty()) // nothing to add (a reduction over every dim)
    return "";
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  std::string code = llvm::formatv("    {{ long long rest = {0};\n", linear);
  for (int64_t d : llvm::reverse(dims))
    code +=
        llvm::formatv("      {0} += (rest % {1}LL) * {2}LL; rest /= {1}LL;\n",
                      name, shape[d], strides[d])
            .str();
  return code + "    }\n";
}

std::string mlir::mpc::floatLiteral(double value) {
  // Kernels compute in f32, so the literal is the f32 value, which is inf
  // for a finite double beyond f32's range (1e39): classify after rounding.
  float single = static_cast<float>(value);
  if (std::isnan(single))
    return "NAN";
  if (std::isinf(single))
    return single > 0 ? "INFINITY" : "-INFINITY";
  return llvm::formatv("{0:e9}f", single).str();
}

std::string mlir::mpc::warpRowUnrolledIndex(int64_t width) {
  return llvm::formatv("(r * {0}LL + MPC_ROW_LANE) + k * (long long)"
                       "MPC_ROW_LANES",
                       width)
      .str();
}

int64_t mlir::mpc::elementwiseGrid(int64_t n) {
  return tiledGrid(n, 4096); // MPC_TILE in mpc_device.h
}

int64_t mlir::mpc::gradStatsChunk(int64_t n) {
  int64_t chunk = (n + MPC_GRAD_STATS_BLOCKS - 1) / MPC_GRAD_STATS_BLOCKS;
  return std::max<int64_t>(16, (chunk + 15) / 16 * 16);
}

int64_t mlir::mpc::tiledGrid(int64_t n, int64_t tile) {
  constexpr int64_t maxGrid = 65535;
  return std::max<int64_t>(1, std::min(maxGrid, (n + tile - 1) / tile));
}

StepEmitter::StepEmitter(const MemoryPlan &plan, std::string modelName,
                         std::string functionName,
                         std::vector<std::string> &kernelSources,
                         bool training)
    : plan(plan), modelName(std::move(modelName)),
      functionName(std::move(functionName)),
      kernelSources(kernelSources), training(training) {}

std::string StepEmitter::pointer(Value value) const {
  const Buffer &buffer = plan.lookup(value, origin);
  return llvm::formatv("({0} *)(arena{1} + {2})",
                       cType(cast<RankedTensorType>(value.getType())
                                 .getElementType()),
                       static_cast<int>(buffer.arena), buffer.offset)
      .str();
}

std::string StepEmitter::constPointer(Value value) const {
  return "(const " + pointer(value).substr(1);
}

std::string StepEmitter::controlPointer() const {
  return llvm::formatv("(mpc_train_control *)(arena{0} + {1})",
                       static_cast<int>(MPC_ARENA_OPTIMIZER),
                       plan.controlOffset)
      .str();
}

std::string StepEmitter::stepValuesPointer() const {
  return llvm::formatv("(const mpc_step_values *)(arena{0} + {1})",
                       static_cast<int>(MPC_ARENA_OPTIMIZER),
                       plan.controlOffset +
                           static_cast<int64_t>(
                               offsetof(mpc_train_control, values)))
      .str();
}

std::string StepEmitter::scratchPointer(const Step &step, StringRef cTypeName,
                                        int64_t byteOffset,
                                        int64_t bytes) const {
  Buffer buffer = plan.scratch(step);
  if (bytes && byteOffset + bytes > buffer.bytes)
    llvm::report_fatal_error(
        llvm::Twine("mpc codegen: bytes [") + llvm::Twine(byteOffset) + ", " +
        llvm::Twine(byteOffset + bytes) + ") of a step's scratch, which has " +
        llvm::Twine(buffer.bytes));
  return llvm::formatv("({0} *)(arena{1} + {2})", cTypeName,
                       static_cast<int>(buffer.arena),
                       buffer.offset + byteOffset)
      .str();
}

std::string StepEmitter::kernelName(StringRef hint) {
  return llvm::formatv("{0}_k{1}_{2}", modelName, kernelSources.size(), hint)
      .str();
}

/// The first file:line:col location inside `loc` (fused and named
/// locations wrap one), if any.
static std::optional<FileLineColLoc> findFileLineCol(Location loc) {
  std::optional<FileLineColLoc> found;
  loc->walk([&](Location inner) {
    if (auto fileLoc = dyn_cast<FileLineColLoc>(inner)) {
      found = fileLoc;
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return found;
}

void StepEmitter::addKernel(std::string source) {
  if (origin) {
    std::string comment;
    llvm::raw_string_ostream os(comment);
    os << kernelOriginPrefix << origin->getName().getStringRef() << "'";
    if (std::optional<FileLineColLoc> loc = findFileLineCol(origin->getLoc()))
      os << " at " << loc->getFilename().getValue() << ":" << loc->getLine()
         << ":" << loc->getColumn();
    os << "\n";
    source = comment + source;
  }
  kernelSources.push_back(std::move(source));
}

int StepEmitter::convolutionIndex(const std::string &descriptor) {
  assert(convolutionTable && "a cuda step emitter has the model's table");
  auto found = llvm::find(*convolutionTable, descriptor);
  if (found != convolutionTable->end())
    return static_cast<int>(found - convolutionTable->begin());
  convolutionTable->push_back(descriptor);
  return static_cast<int>(convolutionTable->size() - 1);
}

void StepEmitter::setSource(ArrayRef<Operation *> ops, StringRef origin) {
  sourceOps.assign(ops.begin(), ops.end());
  sourceOrigin = origin.str();
}

void StepEmitter::recordCall(StringRef function, KernelKind kind,
                             bool halfInputs, const KernelCost &cost,
                             bool fp8Inputs) {
  records.push_back({function.str(), kind, sourceOps, sourceOrigin, halfInputs,
                     fp8Inputs, cost});
}

void StepEmitter::launch(StringRef kernel, int64_t grid, int block,
                         ArrayRef<std::string> args, const KernelCost &cost,
                         KernelKind kind, bool halfInputs) {
  recordCall(kernel, kind, halfInputs, cost);
  int &bound = launchBlocks[kernel.str()];
  bound = std::max(bound, block);
  std::string statement;
  llvm::raw_string_ostream os(statement);
  if (grid > 1) {
    // The work (bytes moved and FLOPs) decides on the cpu target whether
    // the launch is worth spreading over threads.
    int64_t work = cost.flops;
    if (__builtin_add_overflow(work, cost.bytes(), &work))
      work = INT64_MAX;
    os << "MPC_LAUNCH_PARALLEL(" << kernel << ", " << grid << ", " << block
       << ", " << work << "LL";
  } else {
    os << "MPC_LAUNCH(" << kernel << ", " << grid << ", " << block;
  }
  for (const std::string &arg : args)
    os << ", " << arg;
  os << ");";
  body.push_back(std::move(statement));
}

void StepEmitter::launchCluster(StringRef kernel, int64_t grid, int block,
                                int cluster, ArrayRef<std::string> args,
                                const KernelCost &cost) {
  assert(cluster > 1 && grid % cluster == 0 && "a grid of whole clusters");
  recordCall(kernel, KernelKind::Kernel, /*halfInputs=*/false, cost);
  int &bound = launchBlocks[kernel.str()];
  bound = std::max(bound, block);
  clusterSizes[kernel.str()] = cluster;
  std::string statement;
  llvm::raw_string_ostream os(statement);
  os << "MPC_LAUNCH_CLUSTER(" << kernel << ", " << grid << ", " << block
     << ", " << cluster;
  for (const std::string &arg : args)
    os << ", " << arg;
  os << ");";
  body.push_back(std::move(statement));
}

void StepEmitter::hostStatement(std::string statement) {
  body.push_back(std::move(statement));
}

void StepEmitter::checkedCall(std::string call) {
  body.push_back("MPC_CHECK(" + call + ");");
}

std::string StepEmitter::functionSource() const {
  std::string source;
  llvm::raw_string_ostream os(source);
  os << "static mpc_status " << functionName << "(mpc_step_context *ctx) {\n";
  for (int arena = 0; arena < MPC_NUM_ARENAS; ++arena)
    os << "  char *arena" << arena << " = (char *)ctx->arenas[" << arena
       << "];\n";
  os << "  (void)arena0; (void)arena1; (void)arena2; (void)arena3;\n";
  for (const std::string &statement : body)
    os << "  " << statement << "\n";
  os << "  return MPC_OK;\n}\n";
  return source;
}

Operation *mlir::mpc::rowKernelOp(const Step &step) {
  auto row = llvm::find_if(step.ops, isRowFusible);
  return row == step.ops.end() ? nullptr : *row;
}

MaxPool2dWithIndicesOp mlir::mpc::normalisingPool(const Step &step) {
  if (step.group != FusionKind::Row)
    return {};
  return dyn_cast<MaxPool2dWithIndicesOp>(step.ops.back());
}

QuantizeOp mlir::mpc::groupedQuantize(const Step &step) {
  if (step.group == FusionKind::Attention) {
    auto quantize = llvm::find_if(step.ops, llvm::IsaPred<QuantizeOp>);
    return quantize == step.ops.end() ? QuantizeOp()
                                      : cast<QuantizeOp>(*quantize);
  }
  if (step.group != FusionKind::Row)
    return {};
  auto rowOps = llvm::make_filter_range(step.ops, isRowFusible);
  if (llvm::range_size(rowOps) != 2)
    return {};
  return dyn_cast<QuantizeOp>(*std::next(rowOps.begin()));
}

QuantizeOp mlir::mpc::storedAmaxQuantize(const Step &step) {
  QuantizeOp quantize = groupedQuantize(step);
  return quantize && !quantize.getScaling() ? quantize : QuantizeOp();
}

QuantizeOp mlir::mpc::rowCastQuantize(const Step &step) {
  QuantizeOp quantize = groupedQuantize(step);
  return quantize && quantize.getScaling() ? quantize : QuantizeOp();
}

std::string mlir::mpc::indentLines(StringRef code, StringRef indent) {
  std::string result;
  SmallVector<StringRef> lines;
  code.split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (StringRef line : lines)
    result += (indent + line + "\n").str();
  return result;
}

Operation *mlir::mpc::storedAmaxProducer(const Step &step) {
  if (!storedAmaxQuantize(step))
    return nullptr;
  if (step.group == FusionKind::Attention)
    return *llvm::find_if(step.ops, isAttentionLike);
  return rowKernelOp(step);
}

std::string mlir::mpc::blockAmaxPartial(StringRef indent) {
  return (indent + "amax = mpc_block_reduce_max(amax);\n" + indent +
          "if (threadIdx.x == 0) amax_partials[blockIdx.x] = amax;\n")
      .str();
}

QuantizeScratch mlir::mpc::quantizeScratch(const Step &step, QuantizeOp op) {
  QuantizeScratch scratch;
  if (QuantizeOp stored = storedAmaxQuantize(step); stored == op) {
    // After the producing kernels' own scratch (a layer norm gradient's
    // partial sums of dgamma and dbeta, an attention gradient's D_i).
    Step producer = step;
    producer.ops.assign(step.ops.begin(), llvm::find(step.ops, op));
    scratch.amaxOffset = scratchBytes(producer);
    scratch.amaxBlocks = storedAmaxBlocks(storedAmaxProducer(step));
    // Those kernels have a block a row or a tile or a few: every block of
    // the cast pass reading thousands of partials would cost more than the
    // pass over the tensor it saves.
    scratch.castOffset = scratch.amaxOffset + scratch.amaxBlocks * 4;
    scratch.castPartials = 1;
    scratch.biasOffset = scratch.castOffset + 4;
  } else if (!op.getUnscaled() && !op.getScaling()) {
    scratch.amaxBlocks = scratch.castPartials = quantizeBlocks(op);
    scratch.biasOffset = scratch.amaxBlocks * 4;
  }
  scratch.end = scratch.biasOffset;
  // A bias sum in the group: each 32-row tile's column sums.
  if (llvm::any_of(step.ops, llvm::IsaPred<ReduceSumOp>))
    scratch.end +=
        saturatingProduct({quantizeBiasTileRows(op),
                           op.getInput().getType().getShape().back(), 4});
  return scratch;
}

namespace {
/// Sets the emitter's origin op for the lifetime of one step.
struct OriginScope {
  OriginScope(StepEmitter &emitter, Operation *op) : emitter(emitter) {
    emitter.setOrigin(op);
  }
  ~OriginScope() { emitter.setOrigin(nullptr); }
  StepEmitter &emitter;
};
} // namespace

LogicalResult mlir::mpc::emitStep(const Step &step, StepEmitter &emitter) {
  Operation *op = step.ops.front();
  // A row group's kernel is its row op's, with the loop ops around it fused.
  if (step.group == FusionKind::Row)
    op = rowKernelOp(step);
  // An attention group's views are strides of its kernels.
  if (step.group == FusionKind::Attention)
    op = *llvm::find_if(step.ops, isAttentionLike);
  if (step.isAlias())
    return success();
  OriginScope origin(emitter, op);
  // Kernels are named in the report after their first op: an attention
  // group's is the attention, not the first of its views.
  SmallVector<Operation *, 4> sourceOps(step.ops);
  if (step.group == FusionKind::Attention)
    std::rotate(sourceOps.begin(), llvm::find(sourceOps, op),
                llvm::find(sourceOps, op) + 1);
  // Kernels that find the amax of the quantization after them, or cast
  // their output themselves: the quantization's kernels (its cast or
  // transposed copy) are its own in the report.
  QuantizeOp grouped = groupedQuantize(step);
  if (grouped)
    sourceOps.erase(llvm::find(sourceOps, grouped.getOperation()),
                    sourceOps.end());
  emitter.setSource(sourceOps);
  // The optimizer (and the runtime, on a change) keep half copies current.
  if (step.ops.size() == 1 && op->getNumResults() == 1 &&
      emitter.getPlan().isHalfMirror(op->getResult(0)))
    return success();
  if (auto scale = dyn_cast<LossScaleOp>(op))
    return emitLossScale(scale, emitter);
  if (step.isFusedElementwise())
    return emitFusedElementwise(step, emitter);
  if (step.group == FusionKind::LinearClassifier)
    return emitLinearClassifier(emitter, step);
  for (auto family :
       {emitGemmLike, emitConvolution, emitRowOp, emitDataMovement,
        emitBackwardOp, emitAttention, emitFp8Op}) {
    FailureOr<bool> handled = family(op, step, emitter);
    if (failed(handled))
      return failure();
    if (!*handled)
      continue;
    if (!grouped)
      return success();
    emitter.setOrigin(grouped);
    emitter.setSource(SmallVector<Operation *>(
        llvm::find(step.ops, grouped.getOperation()), step.ops.end()));
    return failure(failed(emitFp8Op(grouped, step, emitter)));
  }
  return op->emitError() << "code generation for '" << op->getName()
                         << "' is not implemented yet";
}

std::string mlir::mpc::maxPoolIndexType(MaxPool2dGradOp op) {
  auto in = op.getInput().getType();
  return in.getDimSize(2) * in.getDimSize(3) <= INT32_MAX ? "int"
                                                          : "long long";
}

int64_t mlir::mpc::mseLossBlocks(MseLossOp op) {
  // Enough blocks to spread the elements, each a few thousand of them.
  return std::clamp<int64_t>(op.getInput().getType().getNumElements() / 4096, 1,
                             256);
}

/// Blocks for a norm gradient's row kernel over `input` normalised over
/// `gamma`'s elements (see layerNormGradBlocks): about 8 rows a block, up
/// to 1024 blocks, so that a GPU holds 8 blocks a multiprocessor (each
/// row's block reductions wait on barriers; other blocks fill the wait;
/// 256 blocks of 32 rows took GPT-2 small's 159 us a layer on an H100),
/// fewer where the blocks' partial sums (8 bytes a column each) would pass
/// 16 MiB.
static int64_t normGradBlocks(RankedTensorType input, RankedTensorType gamma) {
  int64_t width = gamma.getNumElements();
  int64_t rows = input.getNumElements() / width;
  int64_t cap = std::clamp<int64_t>((int64_t{16} << 20) / (8 * width), 256,
                                    1024);
  return std::clamp<int64_t>(rows / 8, 1, cap);
}

int64_t mlir::mpc::rmsNormGradBlocks(RmsNormGradOp op) {
  return normGradBlocks(op.getInput().getType(), op.getGamma().getType());
}

int64_t mlir::mpc::layerNormGradBlocks(LayerNormGradOp op) {
  return normGradBlocks(op.getInput().getType(), op.getGamma().getType());
}

std::optional<std::pair<Value, Value>>
mlir::mpc::inPlaceCandidate(const Step &step) {
  if (step.group != FusionKind::Classifier)
    return std::nullopt;
  auto grad = cast<CrossEntropyGradOp>(step.ops.back());
  if (storageBytes(grad.getResult().getType()) !=
      storageBytes(grad.getLogits().getType()))
    return std::nullopt;
  return std::make_pair(grad.getResult(), grad.getLogits());
}

LinearClassifierOps mlir::mpc::linearClassifierOps(const Step &step) {
  assert(step.group == FusionKind::LinearClassifier);
  LinearClassifierOps ops;
  for (Operation *op : step.ops) {
    if (auto linear = dyn_cast<LinearOp>(op))
      ops.linear = linear;
    else if (auto loss = dyn_cast<CrossEntropyOp>(op))
      ops.loss = loss;
    else if (auto grad = dyn_cast<CrossEntropyGradOp>(op))
      ops.grad = grad;
    else if (auto matmul = dyn_cast<MatmulOp>(op))
      (matmul.getTransposeLhs() ? ops.weightGradient : ops.inputGradient) =
          matmul;
  }
  ops.weightGradientResult = ops.weightGradient.getResult();
  for (Operation *op : step.ops)
    if (auto widen = dyn_cast<CastOp>(op))
      ops.weightGradientResult = widen.getResult();
  auto logits = ops.grad.getLogits().getType();
  ops.classes = logits.getShape().back();
  ops.rows = logits.getNumElements() / ops.classes;
  ops.width = ops.linear.getWeight().getType().getDimSize(1);
  return ops;
}

int64_t mlir::mpc::classifierChunkRows(const Step &step) {
  int64_t rows = linearClassifierOps(step).rows;
  return step.chunkRows > 0 ? std::min(step.chunkRows, rows) : rows;
}

ClassifierScratch mlir::mpc::classifierScratch(const Step &step) {
  LinearClassifierOps ops = linearClassifierOps(step);
  int64_t chunkRows = classifierChunkRows(step);
  ClassifierScratch scratch;
  scratch.rowValid = saturatingProduct({ops.rows, 4});
  scratch.count = saturatingProduct({2, ops.rows, 4});
  scratch.chunk = alignTo64(scratch.count + 4);
  scratch.accumulator =
      scratch.chunk +
      alignTo64(saturatingProduct(
          {chunkRows, ops.classes, elementBytes(ops.grad.getResult())}));
  auto dw = cast<RankedTensorType>(ops.weightGradientResult.getType());
  if (!dw.getElementType().isF32() && chunkRows < ops.rows)
    scratch.accumulatorBytes = saturatingProduct({dw.getNumElements(), 4});
  scratch.total = scratch.accumulator + scratch.accumulatorBytes;
  return scratch;
}

/// Rows a chunk of `rows` split `chunks` ways: a multiple of 8, so that
/// every chunk's rows start aligned for the GEMMs.
static int64_t rowsPerChunk(int64_t rows, int64_t chunks) {
  int64_t chunk = (rows + chunks - 1) / chunks;
  return std::min(rows, (chunk + 7) / 8 * 8);
}

/// The candidates for a classifier's chunk: all its rows, then halves down
/// to 128 rows, where a chunk's GEMMs still fill a GPU (128 rows by the
/// vocabulary).
static SmallVector<int64_t> chunkCandidates(int64_t rows) {
  SmallVector<int64_t> candidates{rows};
  constexpr int64_t fewestRows = 128;
  for (int64_t chunks = 2;; chunks *= 2) {
    int64_t chunk = rowsPerChunk(rows, chunks);
    if (chunk < fewestRows || chunk >= candidates.back())
      break;
    candidates.push_back(chunk);
  }
  return candidates;
}

void mlir::mpc::chooseClassifierChunks(ModelOp model, std::vector<Step> &steps,
                                       ArrayRef<Value> gradients,
                                       int64_t gemmWorkspaceBytes,
                                       bool cudnnConvolutions, int64_t chunks) {
  for (Step &step : steps) {
    if (step.group != FusionKind::LinearClassifier)
      continue;
    if (chunks > 0) {
      step.chunkRows = rowsPerChunk(linearClassifierOps(step).rows, chunks);
      continue;
    }
    // Chunks halve while halving lowers the activation peak by at least
    // 1/32 of it: each chunk more reads the weight and dW (or its f32 sum)
    // again, which a smaller saving does not pay for.
    SmallVector<int64_t> candidates =
        chunkCandidates(linearClassifierOps(step).rows);
    auto peakWith = [&](int64_t rows) {
      step.chunkRows = rows;
      return MemoryPlan(model, steps, gradients, gemmWorkspaceBytes,
                        cudnnConvolutions)
          .arenaBytes[MPC_ARENA_ACTIVATIONS];
    };
    int64_t chosen = candidates.front(), peak = peakWith(chosen);
    for (int64_t rows : llvm::drop_begin(candidates)) {
      int64_t next = peakWith(rows);
      if (peak - next < peak / 32)
        break;
      chosen = rows;
      peak = next;
    }
    step.chunkRows = chosen;
  }
}

int64_t mlir::mpc::scratchBytes(const Step &step, bool cudnnConvolutions) {
  if (step.group == FusionKind::LinearClassifier)
    return classifierScratch(step).total;
  // A kernel that finds the amax of a quantization after it: its own
  // scratch, then the quantization's.
  if (QuantizeOp quantize = storedAmaxQuantize(step))
    return quantizeScratch(step, quantize).end;
  // D_i per query, from the dQ kernel to the dK/dV kernel (EmitAttention):
  // an attention group's views come before its op.
  for (Operation *member : step.ops)
    if (auto grad = dyn_cast<AttentionGradOp>(member)) {
      AttentionShape shape = grad.getShape();
      return saturatingProduct({shape.batch, shape.heads, shape.queries, 4});
    }
  // A row group's scratch is its row op's, which a prologue precedes.
  Operation *op =
      step.group == FusionKind::Row ? rowKernelOp(step) : step.ops.front();
  if (isa<ReduceSumOp, ReduceMeanOp, ReduceMaxOp>(op)) {
    // The partial results of a split reduction (EmitRow.cpp).
    int64_t outputs =
        cast<RankedTensorType>(op->getResult(0).getType()).getNumElements();
    int64_t reduced =
        cast<RankedTensorType>(op->getOperand(0).getType()).getNumElements() /
        std::max<int64_t>(outputs, 1);
    int64_t splits = reductionSplits(outputs, reduced);
    return splits > 1 ? saturatingProduct({outputs, splits, 4}) : 0;
  }
  if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
    auto logits = loss.getLogits().getType();
    int64_t rows = logits.getNumElements() / logits.getShape().back();
    // Per-row loss and validity; a classifier also counts the targets.
    return saturatingProduct({2, rows, 4}) +
           (step.group == FusionKind::Classifier ? 4 : 0);
  }
  if (isa<CrossEntropyGradOp>(op))
    return 4; // count of targets that are not ignored
  if (auto loss = dyn_cast<MseLossOp>(op))
    return mseLossBlocks(loss) * 4; // the blocks' partial sums
  if (auto quantize = dyn_cast<QuantizeOp>(op))
    return quantizeScratch(step, quantize).end;
  if (isa<Conv2dOp, Conv2dGradInputOp, Conv2dGradWeightOp>(op))
    return convolutionScratchBytes(op, cudnnConvolutions);
  if (auto norm = dyn_cast<BatchNormOp>(op)) {
    // mean, rstd (unless the op returns them); and each slice's two
    // partial sums where a channel is summed in slices, as it always is
    // where a max pooling normalises (EmitRow.cpp).
    int64_t channels = norm.getGamma().getType().getNumElements();
    int64_t splits = batchNormSplits(norm.getInput().getType());
    bool sliced = splits > 1 || normalisingPool(step);
    return (norm.getStats() ? 0 : saturatingProduct({2, channels, 4})) +
           (sliced ? saturatingProduct({2, channels, splits, 4}) : 0);
  }
  if (auto grad = dyn_cast<RmsNormGradOp>(op))
    // Each block's partial sums of dgamma.
    return saturatingProduct({rmsNormGradBlocks(grad),
                              grad.getGamma().getType().getNumElements(), 4});
  if (auto grad = dyn_cast<LayerNormGradOp>(op))
    // Each block's partial sums of dgamma and dbeta.
    return saturatingProduct({layerNormGradBlocks(grad), 2,
                              grad.getGamma().getType().getNumElements(), 4});
  if (auto grad = dyn_cast<BatchNormGradOp>(op)) {
    // Per-channel mean, rstd, mean(dy) and mean(dy * xhat); and each
    // slice's partial sums where a channel is summed in slices: of dy and
    // dy * (x - mean), and of x and its squares unless the forward's
    // statistics are read.
    int64_t channels = grad.getGamma().getType().getNumElements();
    int64_t splits = batchNormSplits(grad.getInput().getType());
    int64_t sums = grad.getStats() ? 2 : 4;
    return saturatingProduct({4, channels, 4}) +
           (splits > 1 ? saturatingProduct({sums, channels, splits, 4}) : 0);
  }
  if (auto grad = dyn_cast<EmbeddingGradOp>(op)) {
    // The cpu target's lists (emitEmbeddingGrad): the first position of
    // each row and the next of each position, then a row of f32 sums.
    auto table = grad.getResult().getType();
    int64_t width = table.getDimSize(1);
    int64_t positions = grad.getGrad().getType().getNumElements() / width;
    return saturatingProduct({table.getDimSize(0) + positions, 8}) +
           saturatingProduct({width, 4});
  }
  if (auto grad = dyn_cast<ReduceMaxGradOp>(op))
    // ties per output
    return saturatingProduct({grad.getOutput().getType().getNumElements(), 4});
  if (auto grad = dyn_cast<MaxPool2dGradOp>(op))
    // Each window's argmax, an index into its input plane.
    return saturatingProduct({grad.getGrad().getType().getNumElements(),
                              maxPoolIndexType(grad) == "int" ? 4 : 8});
  return 0;
}
