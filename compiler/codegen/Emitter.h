//===- Emitter.h - what the parts of code generation share ------*- C++ -*-===//
//
// This file declares the pieces of code generation, for its own files
// (Codegen.h is its interface to the driver and the report):
//   - formSteps: splits a model body into steps, each a kernel group (a chain
//     of elementwise ops fused into one kernel) or a single op;
//   - MemoryPlan: where every materialised value lives (arena + offset), with
//     activation memory reused by liveness;
//   - StepEmitter: collects kernel source and host statements of one step
//     function; per-op emitters (EmitElementwise.cpp, EmitGemm.cpp, ...) call
//     it through emitOp.
// Kernels are CUDA C++ written for any block size (see
// runtime/device/mpc_device.h); the cpu target compiles the same source.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_CODEGEN_EMITTER_H
#define MPC_COMPILER_CODEGEN_EMITTER_H

#include "compiler/codegen/Codegen.h"
#include "compiler/cuda/Nvrtc.h" // kernelOriginPrefix
#include "dialect/MpcOps.h"
#include "passes/Passes.h"
#include "runtime/mpc_model.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace mlir::mpc {

//===----------------------------------------------------------------------===//
// Kernel formation
//===----------------------------------------------------------------------===//

/// One unit of the step function: a single op, or the ops of one kernel
/// group that mpc-form-kernels formed (in program order).
struct Step {
  SmallVector<Operation *, 4> ops;
  /// The group's kind; none for a single op outside any group.
  std::optional<FusionKind> group;
  /// A loop kernel: elementwise ops and views (a single elementwise op
  /// too), emitted by emitFusedElementwise.
  bool isFusedElementwise() const;
  /// A reshape of its own: its result is its operand's buffer, no kernel.
  bool isAlias() const;
  /// A linear_classifier group's rows of logits a chunk
  /// (chooseClassifierChunks); 0 for every other step.
  int64_t chunkRows = 0;
};

/// The op whose kernel a row group's step is: its softmax, norm or
/// quantization (the other ops are fused around it).
Operation *rowKernelOp(const Step &step);

/// The max pooling at the end of a batch norm's row group, whose loads
/// normalise (mpc-form-kernels' stem rule); null where there is none.
MaxPool2dWithIndicesOp normalisingPool(const Step &step);

/// The current-scaling quantization that follows the op whose kernels
/// store its input, in a row group (a layer norm or its input gradient)
/// or an attention group (the attention's output, or its gradient's
/// scattered dq, dk and dv): mpc-form-kernels grouped them so that those
/// kernels find the amax as they store, and the quantization has no amax
/// pass of its own. Null where there is none.
QuantizeOp storedAmaxQuantize(const Step &step);
/// The delayed-scaling quantization of a layer norm's output in its row
/// group: the norm's kernel casts y to FP8 itself (its scale is known
/// before the step), so y is not stored unless read elsewhere, and the
/// quantization only writes the transposed copy, from the FP8 bytes.
/// Null where there is none.
QuantizeOp rowCastQuantize(const Step &step);
/// Either of those: the quantization that follows the kernels of its group
/// that store (or cast) its input.
QuantizeOp groupedQuantize(const Step &step);
/// That op (null where there is no such quantization).
Operation *storedAmaxProducer(const Step &step);
/// `code`'s lines, each with `indent` before it (kernel source nested in a
/// block).
std::string indentLines(StringRef code, StringRef indent);
/// The kernel source of a row kernel that finds a stored amax: its
/// parameter, the thread's amax, and (indented by `indent`) the statements
/// that leave each block's in `amax_partials` (every thread reaches them).
constexpr const char *amaxPartialsParameter =
    ", float *__restrict__ amax_partials";
constexpr const char *threadAmaxDeclaration = "  float amax = 0.0f;\n";
std::string blockAmaxPartial(StringRef indent);
/// Blocks of the kernels of `producer` (storedAmaxProducer) that find a
/// quantization's amax: one partial amax each, the kernels' in launch
/// order.
int64_t storedAmaxBlocks(Operation *producer);
/// Blocks of layer_norm_grad's first kernel (either shape, EmitBackward.cpp).
int64_t layerNormGradInputGrid(LayerNormGradOp op);
/// Blocks of an attention's kernel, or of its gradient's two
/// (EmitAttention.cpp).
int64_t attentionBlocks(Operation *attention);

/// Where a quantization's partial results lie in its step's scratch: the
/// amax partials of current scaling (its amax pass's blocks; or those of
/// the row kernel before it, after that kernel's own scratch, and then
/// their maximum, which one block finds), then a bias sum's tile partials.
struct QuantizeScratch {
  int64_t amaxOffset = 0, amaxBlocks = 0;
  /// The partials the cast pass reads: all of them, or their maximum.
  int64_t castOffset = 0, castPartials = 0;
  int64_t biasOffset = 0, end = 0;
};
QuantizeScratch quantizeScratch(const Step &step, QuantizeOp op);

/// What a GEMM or reduction step writes: its op's result, or the f32 value
/// of the widening cast that mpc-form-kernels grouped with it (written from
/// the f32 accumulator: one rounding fewer).
Value writtenResult(const Step &step);

/// Ops that produce no data of their own where they are a step of their
/// own: their result is their operand's buffer (reshape).
bool isAlias(Operation *op);

/// Float operations per element of an elementwise op as its kernel
/// expression computes it (mpc_device.h for the helpers); compares and
/// selects are not counted.
int64_t elementwiseFlops(Operation *op, bool training);

/// Splits the body into steps in program order: the kernel groups of
/// mpc-form-kernels (formKernels, passes/FormKernels.cpp), or with `fuse`
/// false every op a step of its own and every result materialised
/// (--no-fuse, --debug-nonfinite). Grouping moves a group's ops to where
/// its last op was.
std::vector<Step> formSteps(ModelOp model, bool fuse = true,
                            bool cpuThreads = false);

/// The ops of a linear_classifier step (mpc-form-kernels), and its sizes:
/// logits = X · Wᵀ of `rows` rows and `classes` columns, X and W `width`
/// wide; dX = dlogits · W, dW = dlogitsᵀ · X' (X' is X through reshapes),
/// written as `weightGradientResult` (dW or its widening to f32).
struct LinearClassifierOps {
  LinearOp linear;
  CrossEntropyOp loss;
  CrossEntropyGradOp grad;
  MatmulOp inputGradient, weightGradient;
  Value weightGradientResult;
  int64_t rows = 0, classes = 0, width = 0;
};
LinearClassifierOps linearClassifierOps(const Step &step);
/// The step's rows of logits a chunk: its chunkRows, or all of them.
int64_t classifierChunkRows(const Step &step);
/// A linear_classifier step's scratch, byte offsets of: the per-row losses,
/// their validity, the count of targets, one chunk of logits (their
/// gradient written over them), and the f32 sum of dW's chunks where dW is
/// half (bf16 gradients: no master weights, O3) and there is more than one
/// chunk (each chunk's product added in f32, dW rounded once at the end,
/// as one GEMM over all rows would round it; accumulatorBytes 0 otherwise).
struct ClassifierScratch {
  int64_t rowLoss = 0, rowValid = 0, count = 0, chunk = 0;
  int64_t accumulator = 0, accumulatorBytes = 0;
  int64_t total = 0;
};
ClassifierScratch classifierScratch(const Step &step);

//===----------------------------------------------------------------------===//
// Memory plan
//===----------------------------------------------------------------------===//

struct Buffer {
  mpc_arena arena = MPC_ARENA_ACTIVATIONS;
  int64_t offset = 0;
  int64_t bytes = 0;
};

class MemoryPlan {
public:
  /// Places every value the steps materialise. `gradients`, when given, are
  /// the values holding each parameter's gradient, placed in the gradient
  /// arena where they can be computed in place. Inputs and outputs get the
  /// same pinned offsets in every plan of a model (train and eval), so the
  /// model's descriptor holds one offset per tensor.
  /// `gemmWorkspaceBytes` (cuda target) reserves cuBLASLt's workspace in
  /// the activation arena, right after the pinned tensors, so that both
  /// plans of a model put it at one offset.
  /// `cudnnConvolutions` (cuda target): convolutions are cuDNN calls
  /// (runsOnCudnn), which need no scratch of their own.
  /// `masterCopies`, one entry a parameter (shardedMasterCopies): the f32
  /// master weights are sharded, and the parameters it marks have a whole
  /// f32 copy in the parameter arena; empty otherwise.
  /// `halfGradients`: gradients computed half stay so (gradientTypes).
  /// `batchNormsWhereRead`: batch norms may be applied where they are read
  /// (appliedWhereRead); with `gatherPoolGradients` too, pooling gradients
  /// gathered there (gatheredWhereRead: kernels that run as blocks, where
  /// the cpu target's routing is a scatter a plane, cheaper than any
  /// gather, and its one thread a block would gather twice).
  MemoryPlan(ModelOp model, const std::vector<Step> &steps,
             ArrayRef<Value> gradients, int64_t gemmWorkspaceBytes = 0,
             bool cudnnConvolutions = false, ArrayRef<bool> masterCopies = {},
             bool halfGradients = true, bool batchNormsWhereRead = true,
             bool gatherPoolGradients = true);

  /// The buffer of a value. A value the plan has no place for, read by
  /// emitted code, is a bug in code generation, not in the model: it is
  /// reported as an internal error at the value's location (with a note at
  /// `reader`, the op whose code reads it, when given), failed() turns
  /// true, and a placeholder is returned so that emission can end cleanly.
  const Buffer &lookup(Value value, Operation *reader = nullptr) const;
  bool isMaterialised(Value value) const { return buffers.count(value); }
  /// Whether lookup or scratch was asked for something the plan lacks.
  bool failed() const { return missingEntry; }
  /// Every materialised value and its buffer.
  const llvm::DenseMap<Value, Buffer> &getBuffers() const { return buffers; }
  /// Scratch memory requested by a step (see scratchBytes); a step that
  /// asked for none is an internal error, as in lookup.
  Buffer scratch(const Step &step) const;

  /// The value whose buffer `value` was written over (inPlaceCandidate);
  /// null where it has its own.
  Value writtenOver(Value value) const {
    return writtenOverValues.lookup(value);
  }

  /// True for the half copies the fused optimizer writes (see halfMirror).
  bool isHalfMirror(Value value) const {
    return halfMirrorValues.contains(value);
  }

  /// The batch norm in training whose result is `value`, where no kernel
  /// stores that result: its one reader, in a loop kernel or a batch
  /// norm's epilogue of another step, normalises x itself from the
  /// statistics the norm saved (mean and rstd, which its gradient reads),
  /// with the norm's arithmetic and rounding, so the values are the same;
  /// the norm's own step only finds the statistics. The shortcut's batch
  /// norm of a ResNet's downsampling block is so applied in the sum after
  /// the block's last norm: its output is neither written nor read (2
  /// bytes an element each at O2). Null otherwise.
  BatchNormOp appliedWhereRead(Value value) const {
    auto norm = value.getDefiningOp<BatchNormOp>();
    return norm && value == norm.getResult() &&
                   appliedBatchNorms.contains(norm)
               ? norm
               : BatchNormOp();
  }

  /// The max pooling's input gradient that is `value`, where no routing
  /// kernel computes it: its one reader, a batch norm's gradient in another
  /// step (a ResNet's stem: batch norm, ReLU, max pool), gathers each
  /// element from the window gradients and argmaxes as the routing kernel
  /// would (the same windows in the same order from 0, rounded to the
  /// result's type), so the values are the same; the pooling gradient's
  /// step launches nothing. A gradient a block a channel gathers dy once
  /// and stores nothing; one sliced over a channel's elements (ResNet-50's
  /// stem, 32x64x112x112) gathers in its first kernel and stores dy there
  /// for the second (isMaterialised says which), where the routing kernel
  /// stored it and both read it. Only where kernels run as blocks (see the
  /// constructor's gatherPoolGradients). Null otherwise.
  MaxPool2dIndicesGradOp gatheredWhereRead(Value value) const {
    auto pool = value.getDefiningOp<MaxPool2dIndicesGradOp>();
    return pool && gatheredPoolGradients.contains(pool)
               ? pool
               : MaxPool2dIndicesGradOp();
  }

  /// A parameter's gradient kept half (gradientTypes): the cast that would
  /// widen it into the gradient arena, which no kernel runs.
  bool isElidedGradientCast(Operation *op) const {
    return elidedGradientCasts.contains(op);
  }
  /// Per parameter, the element type of its gradient in the gradient
  /// arena, at the parameter's offset: the parameter's own, or
  /// halfGradientType where the gradient is the widening cast of a half
  /// value that nothing else reads (a convolution's weight gradient, which
  /// cuDNN writes half). That value is then stored there, the cast left
  /// out, and the optimizer's kernels widen as they read: 10 bytes an
  /// element fewer than the cast (2 read, 4 written) and the f32 read
  /// twice, and the same values. Only where those kernels alone read the
  /// gradients (no accumulation, data parallelism or sharding).
  SmallVector<Type> gradientTypes;
  /// The one half type gradients are kept in; null where none is.
  Type halfGradientType;

  int64_t arenaBytes[MPC_NUM_ARENAS] = {0, 0, 0, 0};
  /// The half copies of the f32 parameters, laid out as the parameters at
  /// half the byte offsets, in halfMirrorType; unset without any.
  std::optional<Buffer> halfMirror;
  Type halfMirrorType;
  /// Optimizer state: slots (each one element a parameter element, in
  /// slotTypes[s]) from slotsOffset, then the mpc_train_control block at
  /// controlOffset. 0 without mpc.optimizer. Sharded (shard_optimizer): the
  /// control block at 0, then each slot's shard of a rank,
  /// ctx->shard_capacity elements; arenaBytes[MPC_ARENA_OPTIMIZER] is then
  /// the size for one rank alone.
  int64_t optimizerSlots = 0;
  int64_t slotsOffset = 0;
  SmallVector<Type> slotTypes;
  /// Where slot s starts after slotsOffset: the slots before it, each
  /// rounded up to 4 bytes (an f32 slot after an odd number of bf16
  /// elements stays aligned), as the runtime's mpcrt::slot_begin lays them.
  SmallVector<int64_t> slotOffsets;
  /// Sharded: bytes of one element of the slots before slot s, which
  /// starts at slotsOffset + ctx->shard_capacity times that (a capacity is
  /// a multiple of 16 elements, so no rounding).
  SmallVector<int64_t> slotElementBytesBefore;
  int64_t controlOffset = 0;
  bool shardedSlots = false;
  /// ZeRO-1's master-weight shard (--shard-optimizer with f32 master
  /// weights and half copies): a rank keeps the f32 masters of
  /// its shard alone, ctx->shard_capacity of them at slotsOffset +
  /// masterShardElementBytes * ctx->shard_capacity + masterShardWholeBytes
  /// in the optimizer arena, after the slots' shards (and the accumulator,
  /// whole). The parameter arena holds the half copies and, for the
  /// parameters a step reads in f32, a whole f32 copy each, in parameter
  /// order from offset 0 (paramCopyOffsets: -1 for the others); the
  /// parameters' own buffers (paramBuffers) are then offsets in the flat
  /// buffer the gradients and the shards share.
  bool shardedMasters = false;
  SmallVector<int64_t> paramCopyOffsets;
  int64_t masterShardElementBytes = 0;
  int64_t masterShardWholeBytes = 0;
  /// Sharded (--shard-optimizer): a step that updates reduce-scatters the
  /// gradients (mpc_rt_reduce_scatter_gradients), and each rank sums the
  /// statistics of its shard's chunks, which the ranks then add up.
  bool scatteredGradients = false;
  /// cuBLASLt's workspace, live for the whole step (GEMMs run throughout);
  /// gemmWorkspaceAlignment-aligned, 0 bytes without one. cuDNN's
  /// convolutions share it (they run on the same stream).
  Buffer gemmWorkspace;
  /// Convolutions are cuDNN calls where runsOnCudnn says so (cuda target).
  bool cudnnConvolutions = false;
  /// Kernels may run in thread-block clusters
  /// (CodegenOptions::threadBlockClusters).
  bool threadBlockClusters = false;
  /// What the activation arena would need without reuse: every materialised
  /// value and scratch buffer side by side.
  int64_t activationBytesWithoutReuse = 0;
  /// The pinned offsets of the model's inputs and outputs (loss first).
  SmallVector<Buffer> inputBuffers, outputBuffers, paramBuffers, stateBuffers;

private:
  /// Keeps half the gradients gradientTypes describes, where it may.
  void keepHalfGradients(ModelOp model, const std::vector<Step> &steps,
                         ArrayRef<Value> gradients,
                         const llvm::DenseMap<Value, int> &gradientUses,
                         llvm::function_ref<bool(Operation *)> isAlias);

  llvm::DenseMap<Value, Buffer> buffers;
  llvm::DenseSet<Operation *> elidedGradientCasts;
  llvm::DenseSet<Operation *> appliedBatchNorms;
  llvm::DenseSet<Operation *> gatheredPoolGradients;
  /// Of gatheredPoolGradients, those whose reader stores what it gathers.
  llvm::DenseSet<Operation *> storedGathers;
  llvm::DenseMap<const Operation *, Buffer> scratchBuffers;
  llvm::DenseSet<Value> halfMirrorValues;
  llvm::DenseMap<Value, Value> writtenOverValues;
  /// Set by lookup and scratch on a miss (see failed()).
  mutable bool missingEntry = false;
};

/// --shard-optimizer with f32 master weights and half copies: for each parameter, whether a step of `train` or `eval` reads
/// it in f32 (anything but its one half copy), and so needs a whole f32
/// copy beside the ranks' shards of the masters (MemoryPlan). Empty where
/// the master weights are not sharded.
SmallVector<bool> shardedMasterCopies(ModelOp train, ModelOp eval);

/// Gives each linear_classifier step its rows a chunk: `chunks` chunks of
/// as many rows (a multiple of 8, so that each chunk's rows start aligned
/// for the GEMMs) where given, otherwise chosen from the memory plan (see
/// Codegen.cpp). The other arguments are MemoryPlan's.
void chooseClassifierChunks(ModelOp model, std::vector<Step> &steps,
                            ArrayRef<Value> gradients,
                            int64_t gemmWorkspaceBytes, bool cudnnConvolutions,
                            int64_t chunks);

/// Where a size has no 64-bit value: far above maxAddressableBytes, and two
/// of them still add without overflow.
constexpr int64_t saturatedBytes = int64_t(1) << 61;
/// The product of `factors` (extents, then bytes an element), saturated at
/// saturatedBytes: scratch sizes are products of extents of several
/// tensors, which no verifier bounds together.
int64_t saturatingProduct(std::initializer_list<int64_t> factors);

/// Scratch bytes a step needs while it runs (row statistics, im2col
/// columns); 0 for most.
int64_t scratchBytes(const Step &step, bool cudnnConvolutions = false);
/// A result the step's kernel can write over one of its operands, as
/// (result, operand): a classifier's logit gradient over the logits. The
/// memory plan gives them one buffer when the operand is read by nothing
/// after the step; the kernel is written so that either is correct.
std::optional<std::pair<Value, Value>> inPlaceCandidate(const Step &step);

/// Blocks of layer_norm_grad's first kernel, each summing its rows' share
/// of dgamma and dbeta (its partials are the step's scratch): 256, about
/// two per SM of an H100, or fewer so that each takes at least 32 rows
/// (the partials then take no more than the per-row statistics would).
int64_t layerNormGradBlocks(LayerNormGradOp op);
/// Blocks of rms_norm_grad's first kernel, chosen as layerNormGradBlocks.
int64_t rmsNormGradBlocks(RmsNormGradOp op);
/// The blocks of quantize's amax kernel, each finding one chunk's.
int64_t quantizeBlocks(QuantizeOp op);
/// The 32-row tiles of a transposing quantize's input viewed as [rows,
/// cols] (cols its last dim): the partials of a bias sum in its group.
int64_t quantizeBiasTileRows(QuantizeOp op);
/// The blocks of mse_loss's first kernel, each summing one chunk.
int64_t mseLossBlocks(MseLossOp op);

/// The C type of max_pool2d_grad's per-window argmax (an index into the
/// input plane, kept in scratch): int where the plane allows it.
std::string maxPoolIndexType(MaxPool2dGradOp op);

/// A pooling window's geometry over NCHW planes.
struct PoolShape {
  int64_t planes, h, w, oh, ow;
  ArrayRef<int64_t> kernel, stride, padding;
};
/// How a pooling kernel reads its input's element at offset `{0}` of the
/// plane `src` points to (a formatv format): as stored, or through what a
/// batch norm's pool computes from it. `setup` runs once per plane a
/// thread visits, after `plane` and `src` are set.
struct PoolInput {
  std::string setup;
  std::string load = "mpc_load(src + {0})";
  std::string at(StringRef offset) const;
};
/// The cpu target's body of a pooling scan kernel over `x` (element type
/// `elementType`), for a grid of `grid` blocks: a block takes whole output
/// rows (plane, oy), and each output visits its window's taps in the GPU
/// form's order (ky, then kx; padding skipped), but with the row's outputs
/// innermost, so bounds are found once per tap, not per output, and the
/// outputs' dependency chains overlap. `state` declares arrays indexed by
/// ox (the row's OW outputs); `tap` uses `ox`, `v` (the tap's value) and
/// `index` (its offset in the plane); `finish` stores the row, output r *
/// OW + ox. Null where the row is too wide for the stack.
std::optional<std::string> poolRowsOnCpu(const PoolShape &shape,
                                         StringRef elementType, int64_t grid,
                                         StringRef state, StringRef tap,
                                         StringRef finish,
                                         const PoolInput &input = {});
/// A max pooling kernel `name(parameters)` over `x` (element type
/// `elementType`) that finds each window's argmax as the forward's
/// comparison does (the first maximum; the last NaN, which wins), as its
/// offset in the plane or, with `inWindow`, its position in the window (ky
/// * KW + kx); -1 for a window without input. Then `storeOutput` runs per
/// output `i` with `best` and `bestValue` (the maximum), and on the cpu
/// target `storeRow` per output row `r` with `best[ox]` and `bestValue[ox]`
/// (poolRowsOnCpu's form, where the row fits it).
std::string argmaxPoolKernel(StringRef name, StringRef parameters,
                             const PoolShape &shape, StringRef elementType,
                             int64_t grid, bool inWindow,
                             StringRef storeOutput, StringRef storeRow,
                             const PoolInput &input = {});

//===----------------------------------------------------------------------===//
// Emission
//===----------------------------------------------------------------------===//

/// The C type that stores elements of `type` in kernels.
std::string cType(Type elementType);

/// Collects the kernels and host statements of one step function.
class StepEmitter {
public:
  /// Kernels are named after `modelName`, so that libraries of several
  /// models link into one program.
  StepEmitter(const MemoryPlan &plan, std::string modelName,
              std::string functionName, std::vector<std::string> &kernelSources,
              bool training);

  /// A kernel-argument expression for a value's buffer, typed by its
  /// element type: `(float *)(arena3 + 1024)`.
  std::string pointer(Value value) const;
  /// The same as a pointer to const.
  std::string constPointer(Value value) const;
  /// A typed pointer into the step's scratch buffer, `byteOffset` in. Where
  /// the kernel's extent there is given (`bytes`), it must lie within the
  /// buffer scratchBytes sized: a layout that disagrees is a compiler bug,
  /// reported at compile time rather than found overwriting a neighbour.
  std::string scratchPointer(const Step &step, StringRef cTypeName,
                             int64_t byteOffset = 0, int64_t bytes = 0) const;

  /// `(mpc_train_control *)(arena2 + <offset>)`: the training control
  /// block (runtime/device/mpc_training.h).
  std::string controlPointer() const;
  /// `(const mpc_step_values *)(...)`: the values the runtime writes into
  /// the control block before each step (step counter, rates). Kernels
  /// take this pointer rather than the values, so a captured CUDA graph
  /// reads the current ones.
  std::string stepValuesPointer() const;
  /// A fresh kernel name that says what it computes: <model>_k<N>_<hint>.
  std::string kernelName(StringRef hint);
  /// Adds a `__global__` function's full source, preceded by a comment
  /// naming the op it was generated for (see setOrigin), which NVRTC
  /// diagnostics of the cuda target point back to.
  void addKernel(std::string source);
  /// The op whose kernels are being emitted (null between steps).
  void setOrigin(Operation *op) { origin = op; }
  /// Launches `kernel` over `grid` blocks of `block` threads. `cost` is
  /// what one launch reads, writes and computes (see KernelCost); it is
  /// recorded against the ops being emitted (setSource).
  /// `kind` and `halfInputs` as for recordCall: a kernel whose products run
  /// on the tensor cores says so.
  /// On the cpu target the blocks may run on several threads at once
  /// (MPC_LAUNCH_PARALLEL), which is why blocks never depend on each other.
  void launch(StringRef kernel, int64_t grid, int block,
              ArrayRef<std::string> args, const KernelCost &cost,
              KernelKind kind = KernelKind::Kernel, bool halfInputs = false);
  /// launch, for a kernel that runs in clusters of `cluster` consecutive
  /// blocks (`grid` a multiple of it; the plan's threadBlockClusters): its
  /// declaration gains MPC_CLUSTER_DIMS(cluster), and the launch is
  /// MPC_LAUNCH_CLUSTER.
  void launchCluster(StringRef kernel, int64_t grid, int block, int cluster,
                     ArrayRef<std::string> args, const KernelCost &cost);
  /// The blocks of a cluster of each kernel launched in clusters.
  const std::map<std::string, int> &getClusterSizes() const {
    return clusterSizes;
  }
  /// Records the cost of a runtime call the step makes (a GEMM), which
  /// `--report` lists beside the kernels.
  void recordCall(StringRef function, KernelKind kind, bool halfInputs,
                  const KernelCost &cost, bool fp8Inputs = false);
  /// The ops the next launches are emitted for (emitStep sets them); or,
  /// with no ops, what the work is (`origin`, e.g. "optimizer: sgd").
  void setSource(ArrayRef<Operation *> ops, StringRef origin = "");
  /// Every launch and runtime call of the step so far, in program order.
  const std::vector<KernelRecord> &getKernelRecords() const { return records; }
  /// The largest block each kernel is launched with (its __launch_bounds__).
  const std::map<std::string, int> &getLaunchBlocks() const {
    return launchBlocks;
  }
  /// Asks ptxas to fit `kernel` in `registers` registers a thread (the
  /// second argument of __launch_bounds__: the blocks an SM holds at that
  /// budget), spilling rather than losing occupancy: for kernels that hold
  /// data in registers. 32 is a full SM.
  void limitRegisters(StringRef kernel, int registers) {
    registerBudgets[kernel.str()] = registers;
  }
  const std::map<std::string, int> &getRegisterBudgets() const {
    return registerBudgets;
  }
  /// The index of a convolution in the model's table (mpc_conv_desc
  /// initialisers, shared by the model's steps: see setConvolutionTable),
  /// adding it where no equal one is there yet.
  int convolutionIndex(const std::string &descriptor);
  void setConvolutionTable(std::vector<std::string> *table) {
    convolutionTable = table;
  }
  /// Adds a host statement (a runtime call, for example). Calls that return
  /// an mpc_status should be wrapped with checkedCall.
  void hostStatement(std::string statement);
  /// `MPC_CHECK(call);` — returns the status from the step on failure.
  void checkedCall(std::string call);

  bool isTraining() const { return training; }
  const MemoryPlan &getPlan() const { return plan; }
  std::string functionSource() const;

private:
  const MemoryPlan &plan;
  std::string modelName;
  std::string functionName;
  std::map<std::string, int> launchBlocks;
  std::map<std::string, int> registerBudgets;
  std::map<std::string, int> clusterSizes;
  std::vector<std::string> &kernelSources;
  std::vector<std::string> *convolutionTable = nullptr;
  std::vector<std::string> body;
  bool training;
  std::vector<KernelRecord> records;
  SmallVector<Operation *, 2> sourceOps;
  std::string sourceOrigin;
  Operation *origin = nullptr;
};

/// Grid size for an elementwise loop over `n` elements (MPC_FOR_EACH).
int64_t elementwiseGrid(int64_t n);


/// Elements a block per round of MPC_FOR_EACH_TILED for loops over image
/// rows (im2col, col2im, max pooling's gradient): one a thread, where MPC_TILE's 4096 would leave a
/// batch's few thousand rows to one or two blocks.
constexpr int64_t imageRowTile = 256;
/// Grid size for MPC_FOR_EACH_TILED over `n` elements in tiles of `tile`.
int64_t tiledGrid(int64_t n, int64_t tile);

/// Block size of row kernels (one block per row, threads stride over it and
/// combine with mpc_block_reduce_*); a multiple of 32.
constexpr int rowBlockSize = 256;
/// Blocks that reduce each output of a reduce_sum, reduce_mean or
/// reduce_max of `reduced` elements an output: one, or, for long
/// reductions with few outputs (a loss summed over a whole tensor), slices
/// of about reductionSlice elements whose partial results (the step's
/// scratch) a second kernel combines in order. One block a whole output
/// kept a 6.3 M-element sum on one SM for 9.4 ms on an H200.
int64_t reductionSplits(int64_t outputs, int64_t reduced);
constexpr int64_t reductionSlice = 16384;
/// Slices of each channel of a batch norm over `input` ([N, C] or
/// [N, C, H, W]) in training, and of its gradient: reductionSplits of C
/// outputs of N * H * W elements. One block summed a channel: ResNet-50's
/// stem's 64 channels of 401,408 elements kept 64 SMs busy, and its
/// statistics ran at 450-570 GB/s on an H100.
int64_t batchNormSplits(RankedTensorType input);
/// The most blocks of a thread-block cluster a kernel asks for: what every
/// GPU with clusters runs (larger ones need an opt-in and may not fit).
constexpr int64_t maxClusterBlocks = 8;
/// Elements of a row each thread of a row block keeps in registers at
/// most (layer_norm and its gradient): 16 floats, rows up to 4096 wide.
constexpr int64_t maxRowRegisters = 16;

/// Rows a block of a warp-a-row kernel (MPC_FOR_WARP_ROW): a warp each.
constexpr int64_t warpRowsPerBlock = rowBlockSize / 32;
/// Elements of a row each lane of a warp-a-row kernel keeps in registers at
/// most: rows up to 768 wide take a warp, wider ones a block. At 1,024 (32
/// a lane) ptxas spilled 196 bytes a thread in layer_norm at its 64
/// registers, and the gradient needed 168 (sm_90); a block a row holds 4.
constexpr int64_t maxWarpRowRegisters = 24;

/// Registers a thread of a warp-a-row kernel may use (limitRegisters): left
/// alone, ptxas gave GPT-2 small's layer norm 96 to 122 (the next loops'
/// loads of gamma and beta hoisted above the reductions), a quarter of an
/// SM; at 64 it spills nothing and half an SM's warps keep 24 loads each
/// in flight. At 48 it spilled.
constexpr int warpRowRegisterBudget = 64;

/// The index of element `k` of lane MPC_ROW_LANE in row `r` of `width`, for
/// the unrolled loops of a warp-a-row kernel: the lane's first element plus
/// a constant, which the compiler folds into each access's offset (written
/// as r * width + j, it kept 24 64-bit offsets live from the first loop to
/// the last: 170 registers).
std::string warpRowUnrolledIndex(int64_t width);

/// Block size of the batch norms' statistics kernels, a block a channel
/// over N * H * W elements: the most a block may have, since a network's
/// first layers have few channels of many pixels (ResNet-50's stem: 64
/// blocks of 401,408 elements, which 256 threads each took 1.3 to 1.9 ms
/// to sum on an H100). The cpu target runs a block on one thread either way.
constexpr int channelBlockSize = 1024;
/// Block size of a batch norm kernel that sums its channel of `count`
/// elements in one block: channelBlockSize, or fewer threads where the
/// channel is short (ResNet-50's last stages: 1,568 and 6,272 elements),
/// so that a thread has at least 16 of them to load before the block's
/// reductions, whose barriers and shuffles otherwise bound the kernel.
int batchNormBlockSize(int64_t count);
/// Elements of its channel each thread of a one-block-a-channel batch norm
/// keeps in registers at most (the input forward, the incoming gradient
/// backward), so that it loads them once rather than once a pass: 16, a
/// channel of up to 16,384 elements at 1,024 threads. With 25 (ResNet-50's
/// 28x28 stages: 25,088 elements) ptxas spilled 20 to 80 bytes a thread at
/// the 64 registers 1,024 threads may have, however the offsets were
/// computed.
constexpr int64_t maxChannelRegisters = 16;
/// Registers a thread of those kernels may use (limitRegisters): all that
/// 1,024 threads may have.
constexpr int channelRegisterBudget = 64;

//===----------------------------------------------------------------------===//
// Kernel-source helpers shared by the per-family emitters
//===----------------------------------------------------------------------===//

/// The C type that stores the elements of a tensor value.
std::string elementCType(Value value);

/// `text` as a C string literal, quotes included (what the model's tables
/// name ops and locations with).
std::string cStringLiteral(StringRef text);

/// Row-major strides of `shape`, in elements.
SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape);

/// Kernel code declaring `long long <prefix>D = (i / stride) % extent;`, the
/// coordinates of linear index `i` in `shape`, for every dim D.
std::string coordinateCode(ArrayRef<int64_t> shape, StringRef prefix = "c");

/// Kernel code adding to `name` the offset, in a row-major tensor of
/// `shape`, of the element whose coordinates along `dims` are the digits of
/// `linear` (last of `dims` fastest).
std::string offsetCode(StringRef name, StringRef linear,
                       ArrayRef<int64_t> shape, ArrayRef<int64_t> dims);

/// A float literal that C++ and NVRTC read back exactly (e.g. an eps).
std::string floatLiteral(double value);

/// Kernel code for the divisor of avg_pool2d's window (oy, ox) where
/// ceil_mode made the last windows run past the padding: PyTorch counts only
/// what lies within input and padding. None where every window divides by
/// kernel height times width (padding included, count_include_pad).
std::optional<std::string> clippedAvgPoolDivisor(ArrayRef<int64_t> kernel,
                                                 ArrayRef<int64_t> stride,
                                                 ArrayRef<int64_t> padding,
                                                 int64_t h, int64_t w,
                                                 int64_t oh, int64_t ow);

//===----------------------------------------------------------------------===//
// GEMM and convolution helpers (EmitGemm.cpp), shared with EmitBackward.cpp
//===----------------------------------------------------------------------===//

/// The mpc_dtype enumerator of a float value's elements (`MPC_F32`, ...).
const char *gemmDtype(Value value);

/// Operands of one mpc_rt_gemm call, spelled as C++ expressions: row-major
/// C = op(A) · op(B) (+ C when `accumulate`), batched with strides. With a
/// `bias` (n values of cType) the call is mpc_rt_gemm_bias instead:
/// C = op(A) · op(B) + bias[j], the bias fused into the GEMM's epilogue.
struct GemmCall {
  std::string aType, bType, cType;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  std::string a, b, c;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t strideA = 0, strideB = 0, strideC = 0, batch = 1;
  bool accumulate = false;
  std::string bias; ///< Empty: no bias (accumulate may not be set with one).
  /// With a bias: where GELU(C) goes, C keeping the GELU's input
  /// (mpc_rt_gemm_bias_gelu). Empty: no GELU.
  std::string geluOut;
  /// Where the bias gradient goes, m f32 values: the sum over k of each
  /// row of op(A) (mpc_rt_gemm_bgrad; one matrix, no bias, no
  /// accumulation). Empty: none.
  std::string biasGrad;
  std::string biasGradType; ///< its mpc_dtype: f32, or the half type of C
  /// The tanh GELU's input (c's type and layout) at which the epilogue
  /// takes GELU's derivative, C = product * gelu'(x) (mpc_rt_gemm_dgelu;
  /// one matrix, no bias, no accumulation). Empty: none.
  std::string dgeluInput;
  int64_t epilogueFlops = 0; ///< per element of C, for the cost
};

/// Emits `MPC_CHECK(mpc_rt_gemm(...));` (mpc_rt_gemm_bias with a bias) for
/// `call`.
void emitGemmCall(StepEmitter &emitter, const GemmCall &call);

/// out[r, j, p] = bias[j] for every row r, column j and inner position p
/// (inner elements per column): a GEMM then adds its product onto the bias
/// (accumulate), where its epilogue cannot add it.
void emitBiasFill(StepEmitter &emitter, Value bias, Value out, int64_t rows,
                  int64_t columns, int64_t inner = 1);

//===----------------------------------------------------------------------===//
// Convolutions (EmitConv.cpp)
//===----------------------------------------------------------------------===//

/// Scratch bytes of a conv2d, conv2d_grad_input or conv2d_grad_weight step
/// (column matrices and regrouped operands; none for a depthwise one).
int64_t convolutionScratchBytes(Operation *op, bool cudnnConvolutions);
/// Whether a convolution op (conv2d or its gradients) is one cuDNN call
/// where the target has cuDNN: when its three tensors share one element
/// type (cuDNN's engines take one data type, computing in f32).
bool runsOnCudnn(Operation *op, bool cudnnConvolutions);

/// Emits one step. Fails with a diagnostic at the op for ops that have no
/// kernel yet.
LogicalResult emitStep(const Step &step, StepEmitter &emitter);

/// Per-family emitters, in EmitElementwise.cpp, EmitGemm.cpp, EmitRow.cpp,
/// EmitData.cpp and EmitBackward.cpp (backward-only ops). Each
/// returns failure() without a diagnostic when the op is not its family's.
LogicalResult emitFusedElementwise(const Step &step, StepEmitter &emitter);
/// Whether `step` is a cast between f32, f16 and bf16 of its own, whose
/// kernel emitCastBatch can share with other such steps.
bool isBatchableCast(const Step &step, const MemoryPlan &plan);
/// Consecutive batchable casts (the widening of each weight's gradient to
/// its f32 master's, at the end of a backward pass) as one launch: a block
/// a tile of one cast's elements. The casts must not read or write one
/// another's buffers (castsAreIndependent).
bool castsAreIndependent(ArrayRef<const Step *> casts, const MemoryPlan &plan);
void emitCastBatch(ArrayRef<const Step *> casts, StepEmitter &emitter);
/// The blocks emitCastBatch gives a cast of `elements`: its tiles.
int64_t castBatchTiles(int64_t elements);

/// Loop ops fused into another kernel (a `row` group's prologue or
/// epilogue): a `__device__` function that computes one element of a value
/// at its linear index, loading what it reads from outside the ops through
/// extra kernel parameters.
struct ElementFunction {
  std::string name;
  std::string source; ///< the function's definition, before the kernel
  /// Extra parameters of the kernel (declarations and their names), and
  /// the launch arguments that fill them.
  SmallVector<std::string> parameters, parameterNames, arguments;
  KernelCost cost; ///< the loads and the arithmetic
  /// The call computing the element at `index`, with `seed` (the value the
  /// caller computed, for an epilogue).
  std::string call(StringRef index, StringRef seed = "") const;
};

/// Builds the ElementFunction computing `result` from `ops` (elementwise
/// ops and views). With a `seed`, the function takes that value's element
/// as an argument (an epilogue applied to what the kernel computed); the
/// seed is read at the element's own index only. Parameter names start
/// with `parameterPrefix`.
FailureOr<ElementFunction> buildElementFunction(ArrayRef<Operation *> ops,
                                                Value result, Value seed,
                                                StepEmitter &emitter,
                                                StringRef name,
                                                StringRef parameterPrefix);
/// A row kernel's access to one operand or its result: through a pointer,
/// or, in a `row` group, through the ElementFunction of the loop ops fused
/// before (a prologue computing the operand) or after it (an epilogue
/// applied to the result before it is stored).
struct RowAccess {
  std::string pointer; ///< parameter name
  Value written; ///< for an output: the value stored (the epilogue's last)
  /// For an input computed by a prologue and read after the kernel too: the
  /// parameter through which the kernel stores it.
  std::optional<std::string> stored;
  std::optional<ElementFunction> fused;
  SmallVector<std::string> parameters, arguments;

  /// The operand's element at `index`.
  std::string load(StringRef index) const {
    return fused ? fused->call(index)
                 : ("mpc_load(" + pointer + " + " + index + ")").str();
  }
  /// For an output whose amax the kernel finds (storedAmaxQuantize): the
  /// variable each store raises.
  std::optional<std::string> amax;

  /// Stores `value` as the result's element at `index`.
  std::string store(StringRef index, StringRef value) const {
    std::string element = fused ? fused->call(index, value) : value.str();
    if (amax)
      return ("mpc_store_amax(" + pointer + " + " + index + ", " + element +
              ", " + *amax + ");")
          .str();
    return ("mpc_store(" + pointer + " + " + index + ", " + element + ");")
        .str();
  }
  std::string functions() const { return fused ? fused->source : ""; }
};

/// How a row kernel reads `operand`: the prologue of `step` that computes
/// it (the loop ops before `rowOp` in a `row` group), or the operand's
/// buffer through parameter `pointer`. Where the operand is read after the
/// group too, the kernel that stores it gets the parameter `stored`; with
/// `storesOperand` false (another kernel of the group stores it), none.
FailureOr<RowAccess> rowInput(StepEmitter &emitter, const Step &step,
                              Operation *rowOp, Value operand,
                              StringRef pointer, StringRef kernel,
                              bool storesOperand = true);
/// How a row kernel stores `result`: through the epilogue of `step` (the
/// loop ops after `rowOp`) that ends in the value the group writes, or into
/// the result's buffer through parameter `pointer`.
FailureOr<RowAccess> rowOutput(StepEmitter &emitter, const Step &step,
                               Operation *rowOp, Value result,
                               StringRef pointer, StringRef kernel);

/// A max pooling kernel `name` that stores each window's maximum and its
/// position in the window (the argmax max_pool2d_indices_grad routes
/// through), over `x` read through `input`: the pool's own input as
/// stored, or a batch norm's input that `input` normalises, with the
/// kernel's other `parameters` and their `arguments`, the loop ops of
/// `prologue` (the norm's epilogue) and `cost` besides the pool's own.
void emitMaxPoolWithIndices(StepEmitter &emitter, MaxPool2dWithIndicesOp op,
                            StringRef name, Value x,
                            const PoolInput &input = {},
                            ArrayRef<std::string> parameters = {},
                            ArrayRef<std::string> arguments = {},
                            const ElementFunction *prologue = nullptr,
                            KernelCost cost = {});
FailureOr<bool> emitGemmLike(Operation *op, const Step &step,
                             StepEmitter &emitter);
FailureOr<bool> emitRowOp(Operation *op, const Step &step,
                          StepEmitter &emitter);
/// A linear_classifier step over its row chunks (EmitRow.cpp): the targets'
/// count, then for each chunk the logits' GEMM, the classifier kernel
/// (losses, gradient over the logits), dX's rows and dW's share (added to
/// the chunks' before, in f32 where dW is widened), then the mean.
LogicalResult emitLinearClassifier(StepEmitter &emitter, const Step &step);
FailureOr<bool> emitDataMovement(Operation *op, const Step &step,
                                 StepEmitter &emitter);
FailureOr<bool> emitBackwardOp(Operation *op, const Step &step,
                               StepEmitter &emitter);
/// conv2d and its gradients (EmitConv.cpp).
FailureOr<bool> emitConvolution(Operation *op, const Step &step,
                                StepEmitter &emitter);
/// mpc.quantize and mpc.scaled_matmul (EmitFp8.cpp).
FailureOr<bool> emitFp8Op(Operation *op, const Step &step,
                          StepEmitter &emitter);
/// The code of a kernel that casts its output to FP8 under delayed scaling
/// itself (rowCastQuantize), with `table` the scaling table among its
/// parameters (EmitFp8.cpp): the scale the table gives, and the thread's
/// amax and saturation count (named `amax`, `saturated`), zeroed...
std::string delayedScaleCode(QuantizeOp op, StringRef amax,
                             StringRef saturated);
/// ...each value's cast: `value` rounded to the quantization's input type
/// (and stored at `stored`[`index`] unless that is empty), scaled, clipped
/// and counted, and stored at `output` + `index`...
std::string delayedCastStore(QuantizeOp op, StringRef output, StringRef stored,
                             StringRef index, StringRef value, StringRef amax,
                             StringRef saturated);
/// ...and, reached by every thread of the block, the block's amax and count
/// raised into the table.
std::string delayedTableUpdate(QuantizeOp op, StringRef amax,
                               StringRef saturated);
/// Delayed FP8 scaling's update of its table, once a step after the
/// optimizer's prepare kernel has decided whether the step applies; with
/// `dataParallel`, the step's amaxes are first the largest over the ranks.
/// Nothing where the step has no delayed quantization.
void emitFp8ScalingUpdate(ModelOp train, StepEmitter &emitter,
                          bool dataParallel);
/// A sum of partials' columns that emitColumnSums writes: its value, its
/// columns' offset in a row of partials, and its name in the kernel.
struct ColumnSum {
  Value value;
  int64_t offset;
  const char *name;
};
/// A kernel that writes each output[j] as the sum over `blocks` rows of
/// `partials` (row b at b * stride) of column offset + j, in one order on
/// every target (EmitBackward.cpp: the norm gradients' parameters).
void emitColumnSums(StepEmitter &emitter, const std::string &name,
                    const std::string &partials, int64_t blocks, int64_t stride,
                    int64_t width, ArrayRef<ColumnSum> outputs);

/// --debug-nonfinite under delayed scaling: after the delayed `op`, one
/// block counts the finite elements of its input beyond the format's
/// largest at the scale the table gave (those the cast clipped) and, when
/// the step's first, records them in ctx->nonfinite with the sites of the
/// FP8 GEMM that reads them (its operand `operand`: 0 lhs, 1 rhs) and of
/// the quantization (EmitFp8.cpp); `description` names them in a comment.
void emitFp8SaturationCheck(StepEmitter &emitter, QuantizeOp op,
                            int64_t gemmSite, int64_t quantizeSite, int operand,
                            StringRef description);
/// mpc.attention and mpc.attention_grad (EmitAttention.cpp).
FailureOr<bool> emitAttention(Operation *op, const Step &step,
                              StepEmitter &emitter);

//===----------------------------------------------------------------------===//
// --debug-nonfinite (EmitDebug.cpp)
//===----------------------------------------------------------------------===//

/// The checked op outputs of a model (its descriptor's debug_sites) and what
/// the step being emitted needs to classify them.
struct NonfiniteSites {
  struct Site {
    std::string op, location;
    bool backward = false;
  };
  std::vector<Site> sites;
  /// The forward ops of the training step (findForwardOps); null while the
  /// eval step, all forward, is emitted.
  const llvm::DenseSet<Operation *> *forwardOps = nullptr;
  /// Values that hold infinities by design (see EmitDebug.cpp), cached.
  llvm::DenseMap<Value, bool> infiniteByDesign;

  /// Adds `op` (located where it is, in the backward pass where it is not
  /// a forward op) as a site; its index.
  int64_t add(Operation *op);
};

/// After `step` was emitted: one check kernel per float value it
/// materialises, which records the value in ctx->nonfinite when it is the
/// step's first to hold inf/NaN.
void emitNonfiniteChecks(const Step &step, StepEmitter &emitter,
                         NonfiniteSites &sites);

/// Kernel-source declarations the checks need (the record's layout), and
/// host-source asserts that it matches runtime/mpc_model.h.
std::string nonfiniteKernelPrelude();
std::string nonfiniteHostChecks();

//===----------------------------------------------------------------------===//
// Whole model
//===----------------------------------------------------------------------===//

/// An mpc_loss_scaler_config initialiser for `scaling`, the one the
/// descriptor holds and the optimizer's kernel runs with; `noMaxScale`
/// spells the uncapped max_scale (+inf) in the code it goes into.
std::string lossScalerConfigLiteral(LossScalingAttr scaling,
                                    StringRef noMaxScale);
/// The kernel of mpc.loss_scale (EmitOptimizer.cpp).
LogicalResult emitLossScale(LossScaleOp op, StepEmitter &emitter);
/// The optimizer step that ends the training step, from the model's
/// mpc.optimizer and mpc.loss_scaling (EmitOptimizer.cpp).
LogicalResult emitOptimizerStep(ModelOp train, StepEmitter &emitter);
/// The body of sync_half_copies: the half copies from the f32 parameters;
/// nothing when the plan has none.
void emitSyncHalfCopies(ModelOp train, StepEmitter &emitter);

/// Buckets of at most `capBytes` (one parameter larger than that is a
/// bucket of its own), in the order they become ready: parameters join the
/// open bucket while they are adjacent to it in the gradient buffer.
std::vector<GradientBucket> planGradientBuckets(ModelOp train,
                                                const std::vector<Step> &steps,
                                                const MemoryPlan &plan,
                                                ArrayRef<Value> gradients,
                                                int64_t capBytes);

/// The arena sizes of a model's train and eval plans.
MemorySummary summarizeMemory(const MemoryPlan &trainPlan,
                              const MemoryPlan &evalPlan);

} // namespace mlir::mpc

#endif // MPC_COMPILER_CODEGEN_EMITTER_H
