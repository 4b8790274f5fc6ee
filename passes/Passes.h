//===- Passes.h - mpc passes --------------------------------------*- C++ -*-===//
//
// This file declares every mpc pass and its registration.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_PASSES_PASSES_H
#define MPC_PASSES_PASSES_H

#include "dialect/MpcDialect.h"
#include "dialect/MpcOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace mlir::mpc {

/// Mixed-precision levels, named as Apex's opt levels.
enum class AmpLevel { O0, O1, O2, O3 };
/// The reduced-precision float type.
enum class HalfType { F16, BF16 };
/// `--optimizer-state`: the storage type of the optimizer's moments.
enum class OptimizerState { F32, BF16 };
/// `--fp8`: which GEMMs of the training step run on FP8 operands.
enum class Fp8Gemms { None, All, Auto };

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// Wraps the kernels of `model`'s body in mpc.fusion ops (mpc-form-kernels,
/// see Passes.td); returns the number of groups formed.
int64_t formKernels(ModelOp model,
                    const MpcFormKernelsPassOptions &options = {});

/// Why mpc-assign-fp8 leaves `gemm` (a linear or matmul of the training
/// step) in its half type, or nothing where it runs in FP8. `forward` is
/// findForwardOps of its model: what tells activations from gradients.
/// The sizes of a linear, matmul or scaled_matmul: op(lhs) [m, k] times
/// op(rhs) [k, n] (a linear's input flattened to m rows).
struct GemmDims {
  int64_t m, n, k;
};
GemmDims gemmDims(Operation *gemm);

/// A GEMM `gemms=auto` left in half carries the cost model's reason in
/// this attribute.
inline constexpr llvm::StringLiteral kFp8ReasonAttr = "mpc.fp8";
/// The state mpc-assign-fp8's delayed scaling adds to the model: the table
/// of scales and amax histories (see mpc.quantize).
inline constexpr llvm::StringLiteral kFp8ScalingState = "fp8.scaling";
std::optional<std::string>
whyNotFp8(Operation *gemm, const llvm::DenseSet<Operation *> &forward);

/// Switches of the pipelines beyond the precision level.
struct PipelineOptions {
  /// mpc-check-numerics reports errors and fails (`--Werror-numerics`).
  bool werrorNumerics = false;
  /// Run mpc-fold-casts and let canonicalize fold casts. Off only to check
  /// that folding changes no result (`mpc compile --no-fold-casts`).
  bool foldCasts = true;
  /// Run mpc-recognize-attention first. Off (`mpc compile --no-fuse`), the
  /// written-out attention stays: the unfused reference.
  bool recognizeAttention = true;
  /// For the numerics lint: a static loss scale (0: none) and Adam's eps
  /// (0: not Adam), checked against the model's half type.
  double staticLossScale = 0;
  double optimizerEps = 0;
  /// `--master-weights` (mpc-assign-precision's option of that name).
  MasterWeights masterWeights = MasterWeights::F32;
  /// The training pipeline's loss scaling and optimizer.
  MpcInsertLossScalingPassOptions lossScaling;
  MpcFuseOptimizerPassOptions optimizer;
  /// mpc-assign-fp8's options; gemms none: the pass does not run.
  MpcAssignFp8PassOptions fp8;
  /// mpc-recompute's ops; empty: the pass does not run.
  MpcRecomputePassOptions recompute;
};

/// The passes that shape the forward pass: precision assignment, the
/// numerics lint, cast folding and clean-up. Evaluation runs their result.
void buildForwardPipeline(OpPassManager &pm, AmpLevel level, HalfType half,
                          const PipelineOptions &options = {});
/// The passes that derive the training step from the forward pass.
void buildTrainingPipeline(OpPassManager &pm,
                           const PipelineOptions &options = {});
/// Registers `mpc-train-pipeline`.
void registerMpcPipelines();

} // namespace mlir::mpc

#endif // MPC_PASSES_PASSES_H
