//===- Codegen.h - a training step to kernels and host code -----*- C++ -*-===//
//
// This file declares code generation as the driver and the report use it:
// a lowered model (its training step and its forward pass) becomes CUDA
// C++ kernels, host code and a header (generateModel), with the kernels'
// costs (KernelCost.h), the gradient buckets of a data-parallel step and
// the arenas' sizes (planMemory). The pieces it is made of are in
// Emitter.h.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_CODEGEN_CODEGEN_H
#define MPC_COMPILER_CODEGEN_CODEGEN_H

#include "compiler/codegen/KernelCost.h"
#include "dialect/MpcOps.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::mpc {

/// Data parallel: the default largest gradient bucket, as DDP's
/// bucket_cap_mb.
constexpr int64_t defaultBucketMiB = 25;

/// The most bytes the memory plans of a model may place, all arenas
/// together: 2^47 (128 TiB), the user address space of x86-64 and more
/// than any GPU holds. Below it every size and offset that planning and
/// code generation compute fits in 64 bits.
constexpr int64_t maxAddressableBytes = int64_t(1) << 47;

/// Refuses, at its location, a training step whose tensors need more than
/// maxAddressableBytes: one tensor or scratch buffer that alone does, or
/// else the model as a whole (every tensor and scratch buffer side by side,
/// the parameters' gradients, half copies and optimizer slots beside
/// them), computed with overflow checks. Run before planning memory.
LogicalResult checkAddressable(ModelOp train);

/// Data parallel: a contiguous range of the gradient buffer, summed over the
/// ranks (mpc_rt_reduce_gradients) as soon as the backward pass has written
/// the last gradient in it. DDP's buckets, planned at compile time from the
/// order in which backward finishes the gradients.
struct GradientBucket {
  int64_t offset = 0; ///< in the gradient arena
  int64_t bytes = 0;  ///< f32 values, padding between parameters included
  SmallVector<std::string, 4> params;
  /// The step after which its last gradient is final; steps.size(): after
  /// the copies that end the body.
  size_t readyStep = 0;
  /// Kernel records of the training step emitted before its reduction.
  size_t afterKernels = 0;
};

struct GeneratedModel {
  std::string kernelSource; ///< every kernel, CUDA C++
  std::string hostSource;   ///< step functions + descriptor, C++
  std::string header;       ///< <model>.h for applications
  /// The launches and runtime calls of one training step, in order (the
  /// optimizer update included); they point into the `train` model.
  std::vector<KernelRecord> trainKernels;
  /// Data parallel: the gradient buckets, in the order they are reduced.
  std::vector<GradientBucket> gradientBuckets;
  /// Each classifier run over row chunks (a linear_classifier step).
  struct ClassifierChunks {
    Operation *loss = nullptr; ///< its cross_entropy
    int64_t rows = 0, chunkRows = 0;
    int64_t logitBytes = 0; ///< of all the rows' logits
    /// What each chunk after the first adds to the step's traffic: the
    /// weight read again by two GEMMs, dW read and written again.
    int64_t bytesPerExtraChunk = 0;
    int64_t chunks() const { return (rows + chunkRows - 1) / chunkRows; }
  };
  std::vector<ClassifierChunks> classifierChunks;
};

/// Code generation choices beyond the model's IR (the optimizer and loss
/// scaling are attributes of the model).
struct CodegenOptions {
  /// Check every op output for inf/NaN (see emitNonfiniteChecks).
  bool debugNonfinite = false;
  /// Group ops into kernels (mpc-form-kernels); off: one kernel per op.
  bool fuse = true;
  /// The cuda target: the host code launches the kernels from the image
  /// NVRTC builds (CudaTarget.h) instead of running them on the host.
  bool cuda = false;
  /// The cuda target calls cuDNN for convolutions (runsOnCudnn); without,
  /// they are im2col and GEMMs as on the cpu target (--no-cudnn).
  bool cudnnConvolutions = false;
  /// The host build of the kernels runs blocks of blockDim threads under the
  /// block emulator (runtime/device/mpc_emulator.h): always on the cuda
  /// target (for host stand-ins of the driver), on the cpu target with
  /// --emulate-blocks.
  bool emulateBlocks = false;
  /// cuBLASLt's workspace, planned in the activation arena (cuda target:
  /// gemmWorkspaceBytes(arch); 0 on the cpu target, whose GEMM needs none).
  int64_t gemmWorkspaceBytes = 0;
  /// The cuda target's architecture (--arch; 0 elsewhere): kernels with a
  /// register budget (StepEmitter::limitRegisters) name in their
  /// __launch_bounds__ how many blocks that is there.
  int smVersion = 0;
  /// Data parallel: the largest gradient bucket (--bucket-mb); a gradient
  /// larger than it is a bucket of its own.
  int64_t bucketBytes = defaultBucketMiB << 20;
  /// The row chunks a linear_classifier step runs in (0: chosen from the
  /// memory plan; see chooseClassifierChunks).
  int64_t classifierChunks = 0;
  /// The optimizer reads gradients half where they are computed half
  /// (MemoryPlan::gradientTypes); off: a cast widens each (a test's
  /// reference).
  bool halfGradients = true;
  /// A batch norm may be applied where it is read
  /// (MemoryPlan::appliedWhereRead), and a pooling gradient a norm's
  /// gradient reads gathered there (MemoryPlan::gatheredWhereRead); off:
  /// both are stored (a test's reference).
  bool batchNormsWhereRead = true;
  /// Kernels may run in thread-block clusters (MPC_CLUSTER_DIMS): the cuda
  /// target on sm_90 and newer, and emulated blocks on the cpu target,
  /// which stand for those GPUs' kernels. A batch norm's channel sliced
  /// over several blocks is then one cluster, whose blocks exchange their
  /// partial sums and keep their slices in registers (one kernel, x read
  /// once) where older GPUs take three kernels and read x twice.
  bool threadBlockClusters = false;
};

/// Alignment of cuBLASLt's workspace (and of its operands): 256 bytes.
constexpr int64_t gemmWorkspaceAlignment = 256;

/// The cuBLASLt workspace to plan for GPUs of `smVersion`, as the cuBLAS
/// documentation recommends it (cublasSetWorkspace): 32 MiB on Hopper
/// (sm_90), 4 MiB on other architectures.
int64_t gemmWorkspaceBytes(int smVersion);

/// The elements of each chunk that the gradient statistics sum apart (a
/// multiple of 16, at most MPC_GRAD_STATS_BLOCKS chunks in `n`), fixed by
/// `n` alone: a --shard-optimizer shard is whole chunks (the descriptor's
/// shard_unit), so that every rank count sums the same partials.
int64_t gradStatsChunk(int64_t n);

/// What a model's library allocates, per arena, from its train and eval
/// plans: the figures of the descriptor and of `mpc compile --report`.
struct MemorySummary {
  /// The parameter arena: parameters, state and the half copies of the
  /// parameters (shared by the train and eval plans).
  int64_t params = 0;
  int64_t parameterBytes = 0; ///< of which the parameters as stored
  /// The f32 master weights are sharded over the ranks (MemoryPlan::
  /// shardedMasters): optimizer state (optimizerState counts them whole),
  /// and parameterBytes is the f32 copies of those read in f32.
  bool shardedMasters = false;
  int64_t stateBytes = 0;     ///< of which the state (running statistics)
  int64_t gradients = 0;
  int64_t optimizerState = 0;
  /// The activation arena: the larger of the train and eval peaks.
  int64_t activations = 0;
  int64_t trainActivations = 0; ///< train step peak, reusing by liveness
  int64_t trainActivationsWithoutReuse = 0;
  int64_t evalActivations = 0;
  /// Of the activations, cuBLASLt's workspace (in both plans; 0 on cpu).
  int64_t gemmWorkspace = 0;
  /// The values the train step keeps in the activation arena, largest
  /// first: what `--report=json` lists, so that a test can tell, for
  /// example, that no attention scores are stored.
  struct Tensor {
    std::string op, location;
    SmallVector<int64_t, 4> shape;
    int64_t bytes = 0;
  };
  std::vector<Tensor> trainActivationTensors;
};

/// Plans `train` (the training step) and `eval` (the forward pass) as
/// generateModel does (without fusion for --debug-nonfinite: `fuse` false;
/// `blocks` where the kernels run in blocks of threads, on the cuda target
/// or under --emulate-blocks, which form them a little differently: see
/// formSteps; `batchNormsWhereRead` as CodegenOptions' field) and returns
/// their arena sizes.
MemorySummary planMemory(ModelOp train, ModelOp eval, bool fuse = true,
                         int64_t gemmWorkspaceBytes = 0,
                         bool cudnnConvolutions = false,
                         int64_t classifierChunks = 0, bool blocks = false,
                         bool batchNormsWhereRead = true);

/// Generates the sources of a model (cpu or cuda target) from a model whose
/// `train` copy holds the training step (forward, backward and gradients on
/// mpc.output) and whose `eval` copy holds the forward pass.
FailureOr<GeneratedModel> generateModel(ModelOp train, ModelOp eval,
                                        const CodegenOptions &options);

} // namespace mlir::mpc

#endif // MPC_COMPILER_CODEGEN_CODEGEN_H
