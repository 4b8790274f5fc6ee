//===- MpcOps.h - mpc dialect ops ---------------------------------*- C++ -*-===//
//
// This file declares the ops of the mpc dialect.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_MPCOPS_H
#define MPC_DIALECT_MPCOPS_H

#include "dialect/MpcDialect.h"
#include "dialect/MpcInterfaces.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::mpc {
/// Whether a tensor type has elements (no extent 0); other types do.
bool hasElements(Type type);
/// Every tensor operand and result of `op` has elements, and a byte count
/// that fits in 64 bits.
LogicalResult verifyHasElements(Operation *op);

/// The extents of an mpc.attention (or its gradient), whatever the layout:
/// batch, heads, query and key lengths, query/key and value head dims.
struct AttentionShape {
  int64_t batch, heads, queries, keys, headDim, valueDim;
  /// Pairs (query, key) whose score is computed: the lower triangle with
  /// `causal`, every pair otherwise, per batch and head.
  int64_t visiblePairs(bool causal) const {
    return causal ? queries * (queries + 1) / 2 : queries * keys;
  }
};
} // namespace mlir::mpc

namespace mlir::OpTrait::mpc {
/// Every tensor operand and result has elements (Mpc_HasElements in ODS).
template <typename ConcreteType>
class HasElements : public TraitBase<ConcreteType, HasElements> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return ::mlir::mpc::verifyHasElements(op);
  }
};
} // namespace mlir::OpTrait::mpc

#define GET_OP_CLASSES
#include "dialect/MpcOps.h.inc"

namespace mlir::mpc {
/// The debug label of CastOp's value-preserving canonicalization patterns
/// (round trips through an exact widening, casts of splat constants). A
/// canonicalizer built with it in `disabledPatterns` leaves casts alone.
inline constexpr llvm::StringLiteral kFoldCastsLabel = "mpc-fold-casts";

/// Whether an op computes each output element from the same element of its
/// (broadcast) operands, so that it can join a `loop` kernel group.
bool isElementwise(Operation *op);
/// Ops that only re-index their operand (reshape, transpose, slice,
/// slice_grad): in a `loop` kernel group, index arithmetic.
bool isView(Operation *op);
/// `value` through the reshapes that make it: the tensor they re-view.
Value throughReshapes(Value value);
/// What a `loop` kernel group may hold: elementwise ops and views.
inline bool isLoopFusible(Operation *op) {
  return isElementwise(op) || isView(op);
}
/// The ops of a training step that compute the loss or an extra output
/// (those the loss and outputs depend on); every other op computes only
/// gradients, the backward pass. Ops the forward pass and the backward pass
/// share after CSE count as forward.
llvm::DenseSet<Operation *> findForwardOps(ModelOp model);
/// A cast of an f32 parameter to a 16-bit float: the half model, which the
/// fused optimizer writes.
bool isParamHalfCast(CastOp cast);
/// Row ops whose kernel can compute its input from loop ops (softmax,
/// log_softmax, layer_norm) or apply loop ops to its (first) result (their
/// gradients): the centre of a `row` kernel group.
bool isRowFusible(Operation *op);
/// The ops whose result a GEMM's epilogue can compute in a `gemm` group.
bool isGemmLike(Operation *op);

/// Whether `name` can name a model's input, parameter or state:
/// [A-Za-z_][A-Za-z0-9_.-]* (extra outputs, keywords in mpc.output, take no
/// '-').
bool isTensorName(StringRef name);

/// The largest rank of a model's inputs, parameters, state and outputs: the
/// runtime describes each in a fixed array (MPC_MAX_RANK in mpc_runtime.h,
/// which EmitModel.cpp checks against this).
constexpr int64_t kMaxInterfaceRank = 8;

/// A pool's output extent along one spatial dim of `size`, for a window
/// that fits the padded input: `(size + 2 * padding - kernel) / stride + 1`,
/// rounded up under `ceilMode` unless the last window would then start in
/// the trailing padding (PyTorch's rule).
int64_t pooledExtent(int64_t size, int64_t kernel, int64_t stride,
                     int64_t padding, bool ceilMode);
/// mpc.attention or its gradient: the centre of an `attention` group.
bool isAttentionLike(Operation *op);

/// A tensor read in place: element (i_0, ..., i_n) of a value is element
/// `offset + sum_k i_k * strides[k]` of `base`'s row-major storage.
struct StridedView {
  Value base;
  int64_t offset = 0;
  SmallVector<int64_t, 4> strides;
};
/// How `value` reads the storage of the first value up its chain of views
/// that `follow` rejects (or that is not a slice without strides, reshape
/// or transpose): failure where a reshape merges dims that are not
/// contiguous there.
FailureOr<StridedView>
getStridedView(Value value, llvm::function_ref<bool(Operation *)> follow);
/// The strides of a tensor of shape `out` that reshapes one of shape `in`
/// laid out with `inStrides`; failure where the reshape merges dims that
/// are not contiguous.
FailureOr<SmallVector<int64_t, 4>> reshapedStrides(ArrayRef<int64_t> in,
                                                   ArrayRef<int64_t> inStrides,
                                                   ArrayRef<int64_t> out);
/// Where an attention gradient's result is written when its kernel
/// scatters it into the tensor its reshapes and slice_grads make (the QKV
/// projection's gradient): that tensor, and the result's place in it.
FailureOr<StridedView>
getScatteredView(Value result, llvm::function_ref<bool(Operation *)> follow);
/// mpc-autodiff marks the constant 1 it seeds the backward pass with, for
/// mpc-insert-loss-scaling to replace with the loss scale.
inline constexpr llvm::StringLiteral kGradientSeedAttr = "mpc.gradient_seed";
/// mpc.model attributes set by mpc-insert-loss-scaling (LossScalingAttr) and
/// mpc-fuse-optimizer (OptimizerAttr), read by code generation.
inline constexpr llvm::StringLiteral kLossScalingAttr = "mpc.loss_scaling";
inline constexpr llvm::StringLiteral kOptimizerAttr = "mpc.optimizer";
} // namespace mlir::mpc

#endif // MPC_DIALECT_MPCOPS_H
