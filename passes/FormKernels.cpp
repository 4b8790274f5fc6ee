//===- FormKernels.cpp - group the training step into kernels -----*- C++
//-*-===//
//
// This file implements mpc-form-kernels: it decides which ops code
// generation emits as one kernel and records each decision in the IR as an
// mpc.fusion (see Passes.td for the rules). Code generation calls
// formKernels and emits one kernel per group; it knows no fusion rule.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

#define DEBUG_TYPE "mpc-form-kernels"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCFORMKERNELSPASS
#include "passes/Passes.h.inc"

namespace {

/// One kernel in the making: its ops, and the op it is placed at (the last
/// in program order).
struct Group {
  FusionKind kind = FusionKind::Loop;
  llvm::SetVector<Operation *> ops;
  Operation *root = nullptr;
  bool merged = false; ///< taken into a sibling group
};

int64_t elementCount(Value value) {
  return cast<RankedTensorType>(value.getType()).getNumElements();
}

ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// A tanh GELU of `linear`'s output that cuBLASLt's GELU_AUX_BIAS epilogue
/// applies: after a bias of the output's type; its auxiliary output (the
/// GELU's input, which the backward pass reads) needs a leading dimension
/// divisible by 8.
bool isGeluEpilogue(LinearOp linear, Operation *next) {
  auto gelu = dyn_cast<GeluOp>(next);
  Value bias = linear.getBias();
  return gelu && bias && gelu.getInput() == linear.getResult() &&
         gelu.getApproximate() == GeluApproximation::Tanh &&
         gelu.getType() == linear.getResult().getType() &&
         cast<RankedTensorType>(bias.getType()).getElementType() ==
             linear.getResult().getType().getElementType() &&
         linear.getWeight().getType().getDimSize(0) % 8 == 0;
}

/// The only reader of a matmul's (or an unbiased linear's) half product, of
/// a reduce_sum's half sum, or of an embedding gradient's half table, when
/// it widens the value to f32: the GEMM or the reduction can write f32 from
/// its f32 accumulator itself.
CastOp widenedResult(Operation *op) {
  if (!isa<MatmulOp, BatchMatmulOp, LinearOp, ReduceSumOp, EmbeddingGradOp>(op))
    return nullptr;
  if (auto linear = dyn_cast<LinearOp>(op); linear && linear.getBias())
    return nullptr;
  Value product = op->getResult(0);
  if (!product.hasOneUse())
    return nullptr;
  auto widen = dyn_cast<CastOp>(*product.getUsers().begin());
  if (!widen || !widen.getType().getElementType().isF32() ||
      widen.getInput().getType().getElementType().isF32())
    return nullptr;
  return widen;
}

/// The bias gradient that a weight-gradient GEMM's epilogue can write:
/// for dW = matmul(dY, X) transpose_lhs of 2-d half operands, the
/// reduce_sum of dY over dim 0 (db). Either both are widened to f32 by
/// their only readers (O2: the epilogue writes f32 from its accumulators),
/// or both are kept in their half type (bf16 parameters without master
/// weights, O3: it writes them rounded once). cuBLASLt's BGRADB epilogue
/// sums dY as the GEMM reads it (mpc_rt_gemm_bgrad): one pass and one
/// launch fewer. The widening casts are null in the second form; the sum
/// is null where there is no such bias gradient.
std::pair<ReduceSumOp, CastOp> biasGradient(Operation *op) {
  auto matmul = dyn_cast<MatmulOp>(op);
  if (!matmul || !matmul.getTransposeLhs() || matmul.getTransposeRhs() ||
      matmul.getLhs().getType().getRank() != 2)
    return {};
  Type product = matmul.getType().getElementType();
  bool widened = widenedResult(op) != nullptr;
  if (!widened && !(product.isBF16() || product.isF16()))
    return {};
  for (Operation *user : matmul.getLhs().getUsers()) {
    auto sum = dyn_cast<ReduceSumOp>(user);
    if (!sum || sum.getKeepdim() || sum.getDims() != ArrayRef<int64_t>{0})
      continue;
    if (CastOp widen = widenedResult(sum); widened && widen)
      return {sum, widen};
    if (!widened && sum.getType().getElementType() == product)
      return {sum, nullptr};
  }
  return {};
}

/// The bias gradient of an FP8 weight gradient that the quantization of
/// its dY can sum as its cast pass reads dY: the reduce_sum over dim 0 of `dY`
/// (2-d) or of its one reshape to [rows, cols] (cols its last dim), after
/// the quantization, with the widening cast that is its only reader, if
/// any. The quantization writes dY's transposed copy for the weight
/// gradient, so it reads dY in tiles of both dims; each tile's column sums
/// are the sum's partials. Nulls where there is none.
struct QuantizeBiasSum {
  ReshapeOp reshape;
  ReduceSumOp sum;
  CastOp widen;
};
QuantizeBiasSum
quantizeBiasSum(QuantizeOp quantize,
                const llvm::DenseMap<Operation *, int64_t> &at) {
  if (!quantize.getTransposed())
    return {};
  Value input = quantize.getInput();
  ArrayRef<int64_t> shape = shapeOf(input);
  int64_t cols = shape.back();
  auto isColumnSum = [&](Operation *user, Value summed) {
    auto sum = dyn_cast<ReduceSumOp>(user);
    return sum && !sum.getKeepdim() && sum.getInput() == summed &&
           sum.getDims() == ArrayRef<int64_t>{0} &&
           shapeOf(summed).size() == 2 && shapeOf(summed)[1] == cols &&
           at.lookup(user) > at.lookup(quantize);
  };
  for (Operation *user : input.getUsers()) {
    QuantizeBiasSum found;
    if (isColumnSum(user, input)) {
      found.sum = cast<ReduceSumOp>(user);
    } else if (auto reshape = dyn_cast<ReshapeOp>(user);
               reshape && reshape.getResult().hasOneUse() &&
               isColumnSum(*reshape.getResult().user_begin(),
                           reshape.getResult())) {
      found.reshape = reshape;
      found.sum = cast<ReduceSumOp>(*reshape.getResult().user_begin());
    } else {
      continue;
    }
    found.widen = widenedResult(found.sum);
    return found;
  }
  return {};
}

/// The tanh GELU gradient that a GEMM's epilogue can apply: the only reader
/// of a 2-d matmul's product (through a reshape, if any) is
/// gelu_grad(product, x), whose derivative cuBLASLt's DGELU epilogue takes
/// at x, its auxiliary input; that needs the product's width (x's leading
/// dimension) divisible by 8. Returns the reshape (or null) and the
/// gelu_grad, or nulls.
std::pair<ReshapeOp, GeluGradOp> geluGradient(Operation *op) {
  auto matmul = dyn_cast<MatmulOp>(op);
  if (!matmul || matmul.getType().getRank() != 2 ||
      matmul.getType().getDimSize(1) % 8 != 0 ||
      !matmul.getResult().hasOneUse())
    return {};
  Value product = matmul.getResult();
  auto reshape = dyn_cast<ReshapeOp>(*product.user_begin());
  if (reshape) {
    if (!reshape.getResult().hasOneUse())
      return {};
    product = reshape.getResult();
  }
  auto grad = dyn_cast<GeluGradOp>(*product.user_begin());
  if (!grad || grad.getGrad() != product || grad.getInput() == product ||
      grad.getApproximate() != GeluApproximation::Tanh)
    return {};
  return {reshape, grad};
}

/// The ops around a classifier that can run with it over row chunks: the
/// bias-free linear that computes the logits (and the reshapes between,
/// read by nothing else), and the two GEMMs of the logits' gradient, dX =
/// dlogits · W and dW = dlogitsᵀ · X (through the reshapes of dlogits,
/// read by nothing else; X through reshapes of the linear's input), with
/// dW's widening cast where it is dW's only reader. The logits and their
/// gradient must have one type: a chunk's gradient is written over its
/// logits. Empty where the pattern does not hold.
struct LinearClassifier {
  LinearOp linear;
  SmallVector<Operation *> logitViews, gradientViews;
  MatmulOp inputGradient, weightGradient;
  CastOp widen; ///< of weightGradient, or null
};

std::optional<LinearClassifier> linearClassifier(CrossEntropyOp loss,
                                                 CrossEntropyGradOp grad) {
  LinearClassifier found;
  auto isClassifier = [&](Operation *user) {
    return user == loss.getOperation() || user == grad.getOperation();
  };
  // Up from the logits to the linear: every value on the way is read by
  // the next reshape up the chain or by the classifier only.
  Value value = grad.getLogits();
  Operation *reader = nullptr;
  while (true) {
    if (!llvm::all_of(value.getUsers(), [&](Operation *user) {
          return user == reader || isClassifier(user);
        }))
      return std::nullopt;
    auto reshape = value.getDefiningOp<ReshapeOp>();
    if (!reshape)
      break;
    found.logitViews.push_back(reshape);
    reader = reshape;
    value = reshape.getInput();
  }
  found.linear = value.getDefiningOp<LinearOp>();
  if (!found.linear || found.linear.getBias() ||
      grad.getType() != grad.getLogits().getType())
    return std::nullopt;
  // Down from the gradient: reshapes, then exactly the two GEMMs.
  SmallVector<Value> gradients{grad.getResult()};
  for (size_t i = 0; i < gradients.size(); ++i)
    for (Operation *user : gradients[i].getUsers()) {
      if (auto reshape = dyn_cast<ReshapeOp>(user)) {
        found.gradientViews.push_back(reshape);
        gradients.push_back(reshape.getResult());
        continue;
      }
      auto matmul = dyn_cast<MatmulOp>(user);
      if (!matmul || matmul.getLhs() != gradients[i] ||
          matmul.getRhs() == gradients[i] || matmul.getType().getRank() != 2 ||
          matmul.getTransposeRhs())
        return std::nullopt;
      MatmulOp &slot =
          matmul.getTransposeLhs() ? found.weightGradient : found.inputGradient;
      if (slot)
        return std::nullopt;
      slot = matmul;
    }
  if (!found.inputGradient || !found.weightGradient ||
      found.inputGradient.getRhs() != found.linear.getWeight() ||
      throughReshapes(found.weightGradient.getRhs()) !=
          throughReshapes(found.linear.getInput()))
    return std::nullopt;
  found.widen = widenedResult(found.weightGradient);
  return found;
}

class KernelFormation {
public:
  KernelFormation(ModelOp model, const MpcFormKernelsPassOptions &options)
      : model(model), options(options) {
    for (auto [index, op] :
         llvm::enumerate(model.getBody().front().without_terminator()))
      position[&op] = index;
  }

  /// Forms the groups and wraps each of two or more ops in an mpc.fusion.
  int64_t run();

private:
  bool fusible(Operation *op) const {
    if (auto cast = dyn_cast<CastOp>(op); cast && isParamHalfCast(cast))
      return false;
    return options.views ? isLoopFusible(op) : isElementwise(op);
  }
  /// Whether every reader of `value` outside `group` comes after its root
  /// (the terminator counts as after everything).
  bool readAfter(Value value, const Group &group) const {
    for (Operation *user : value.getUsers()) {
      if (group.ops.contains(user))
        continue;
      auto it = position.find(user);
      if (it != position.end() && it->second <= position.lookup(group.root))
        return false;
    }
    return true;
  }
  /// Whether every reader of `producer`'s result is in `group` and the
  /// group evaluates it once per element: an elementwise producer with
  /// fewer elements than the `elements` the group computes would be
  /// recomputed for every element it is broadcast to (a splat constant or
  /// the causal mask costs nothing to recompute).
  bool readOnceHere(Operation *producer, const Group &group,
                    int64_t elements) const {
    Value result = producer->getResult(0);
    return llvm::all_of(
               result.getUsers(),
               [&](Operation *user) { return group.ops.contains(user); }) &&
           (isView(producer) || isa<ConstantOp, CausalMaskOp>(producer) ||
            elementCount(result) == elements);
  }
  /// Moves the reshapes of `value` that come before `root` (and theirs)
  /// right after it, where all their readers come after `root`.
  void deferViews(Value value, Operation *root) {
    int64_t at = position.lookup(root);
    SmallVector<Operation *> views;
    std::function<bool(Value)> movable = [&](Value viewed) {
      for (Operation *user : viewed.getUsers()) {
        auto it = position.find(user);
        if (it == position.end() || it->second > at)
          continue;
        if (!isa<ReshapeOp>(user) || groupOf.count(user) ||
            !movable(user->getResult(0)))
          return false;
        views.push_back(user);
      }
      return true;
    };
    for (Operation *user : value.getUsers()) {
      auto it = position.find(user);
      if (it == position.end() || it->second > at)
        continue;
      views.clear();
      if (!isa<ReshapeOp>(user) || !movable(user->getResult(0)))
        continue;
      views.push_back(user);
      // Outermost (the reshape of `value`) first, then its readers.
      Operation *after = root;
      for (Operation *view : llvm::reverse(views)) {
        view->moveAfter(after);
        after = view;
      }
    }
    position.clear();
    for (auto [index, op] :
         llvm::enumerate(model.getBody().front().without_terminator()))
      position[&op] = index;
  }
  void formAttentionGroups();
  void formClassifierGroups();
  void formEpilogueGroups();
  void formRowGroups();
  /// Puts a current-scaling quantization of what a layer norm's (or its
  /// input gradient's) kernel stores into that kernel's row group, and one
  /// of an attention's output (or its gradient's scattered dq, dk and dv)
  /// into its attention group.
  void joinStoredAmaxQuantizes();
  /// Puts the bias gradient that `quantize` can sum (quantizeBiasSum) into
  /// its row group, taking it from the reduction group it may be in.
  void takeBiasSum(QuantizeOp quantize, Group &group);
  void growLoopGroup(Group &group);
  void mergeSiblings();
  /// The values of `group` read outside it: what the kernel stores.
  SmallVector<Value> outputs(const Group &group) const;
  void wrap(const Group &group);

  ModelOp model;
  const MpcFormKernelsPassOptions &options;
  llvm::DenseMap<Operation *, int64_t> position;
  llvm::DenseMap<Operation *, size_t> groupOf;
  std::vector<Group> groups;
};

/// The views that make `operand` of an attention, innermost last, when
/// every value along the chain is read only by views of it or attentions,
/// and the attention can read the stored tensor at its end through strides
/// with a contiguous head dim; empty otherwise.
SmallVector<Operation *> attentionOperandViews(Value operand) {
  SmallVector<Operation *> chain;
  auto isChainView = [](Operation *op) {
    auto slice = dyn_cast<SliceOp>(op);
    return isa<ReshapeOp, TransposeOp>(op) || (slice && !slice.getStrides());
  };
  Value value = operand;
  while (Operation *op = value.getDefiningOp()) {
    if (!isChainView(op) ||
        !llvm::all_of(value.getUsers(), [&](Operation *user) {
          return isAttentionLike(user) || llvm::is_contained(chain, user);
        }))
      break;
    chain.push_back(op);
    value = op->getOperand(0);
  }
  if (chain.empty())
    return {};
  FailureOr<StridedView> view = getStridedView(
      operand, [&](Operation *op) { return llvm::is_contained(chain, op); });
  if (failed(view) || view->strides.back() != 1)
    return {};
  return chain;
}

/// The reshapes, slice_grads and adds that scatter an attention gradient's
/// dq, dk and dv into one tensor (the QKV projection's gradient), when the
/// three slices are disjoint and cover it and nothing else reads the
/// values in between; empty otherwise. The last op is the sum.
SmallVector<Operation *> attentionGradScatter(AttentionGradOp grad) {
  SmallVector<Operation *> ops;
  SmallVector<SliceGradOp, 3> scatters;
  for (Value result : grad.getResults()) {
    Value value = result;
    while (value.hasOneUse()) {
      Operation *user = *value.user_begin();
      if (auto reshape = dyn_cast<ReshapeOp>(user)) {
        ops.push_back(reshape);
        value = reshape.getResult();
        continue;
      }
      if (auto scatter = dyn_cast<SliceGradOp>(user);
          scatter &&
          llvm::all_of(scatter.getStrides(), [](int64_t s) { return s == 1; }))
        scatters.push_back(scatter);
      break;
    }
  }
  if (scatters.size() != 3)
    return {};
  // The adds that sum exactly the three.
  llvm::SetVector<Operation *> adds;
  Value sum;
  for (SliceGradOp scatter : scatters) {
    Value value = scatter.getResult();
    while (value.hasOneUse())
      if (auto add = dyn_cast<AddOp>(*value.user_begin())) {
        adds.insert(add);
        value = add.getResult();
      } else {
        break;
      }
    if (sum && value != sum)
      return {};
    sum = value;
  }
  if (adds.size() != 2 || !llvm::all_of(adds, [&](Operation *add) {
        return llvm::all_of(add->getOperands(), [&](Value operand) {
          Operation *producer = operand.getDefiningOp();
          return adds.contains(producer) ||
                 llvm::is_contained(scatters, producer);
        });
      }))
    return {};
  // Disjoint boxes whose elements add up to the sum's: they cover it.
  auto box = [](SliceGradOp scatter) {
    return std::make_pair(scatter.getStarts(),
                          scatter.getGrad().getType().getShape());
  };
  int64_t covered = 0;
  for (auto [i, a] : llvm::enumerate(scatters)) {
    covered += a.getGrad().getType().getNumElements();
    for (SliceGradOp b : ArrayRef<SliceGradOp>(scatters).drop_front(i + 1)) {
      auto [startA, sizeA] = box(a);
      auto [startB, sizeB] = box(b);
      bool overlap = true;
      for (size_t d = 0; d < startA.size(); ++d)
        overlap &= startA[d] < startB[d] + sizeB[d] &&
                   startB[d] < startA[d] + sizeA[d];
      if (overlap)
        return {};
    }
  }
  if (covered != cast<RankedTensorType>(sum.getType()).getNumElements())
    return {};
  for (SliceGradOp scatter : scatters)
    ops.push_back(scatter);
  llvm::append_range(ops, adds);
  // Each result must land in the sum with a contiguous head dim.
  for (Value result : grad.getResults()) {
    FailureOr<StridedView> view = getScatteredView(
        result, [&](Operation *op) { return llvm::is_contained(ops, op); });
    if (failed(view) || view->base != sum || view->strides.back() != 1)
      return {};
  }
  ops.push_back(sum.getDefiningOp());
  return ops;
}

void KernelFormation::formAttentionGroups() {
  SmallVector<Operation *> attentions;
  for (Operation &op : model.getBody().front().without_terminator())
    if (isAttentionLike(&op))
      attentions.push_back(&op);
  // Chains shared by a forward attention and its gradient appear twice.
  llvm::SetVector<Operation *> replaced;
  for (Operation *attention : attentions) {
    Group group;
    group.kind = FusionKind::Attention;
    group.root = attention;
    // query, key and value: the forward op's first operands, after the
    // gradient's output gradient.
    unsigned first = isa<AttentionGradOp>(attention) ? 1 : 0;
    for (unsigned index = first; index < first + 3; ++index) {
      SmallVector<Operation *> chain =
          attentionOperandViews(attention->getOperand(index));
      if (chain.empty())
        continue;
      // A copy of the chain for this attention, just before it: views cost
      // nothing to repeat, and each group owns its ops.
      OpBuilder builder(attention);
      IRMapping mapping;
      Value value;
      for (Operation *op : llvm::reverse(chain)) {
        Operation *copy = builder.clone(*op, mapping);
        group.ops.insert(copy);
        value = copy->getResult(0);
      }
      attention->setOperand(index, value);
      replaced.insert(chain.begin(), chain.end());
    }
    group.ops.insert(attention);
    // A gradient writes dq, dk and dv where the QKV projection's gradient
    // sums them; the group runs where that sum was.
    if (auto grad = dyn_cast<AttentionGradOp>(attention)) {
      SmallVector<Operation *> scatter = attentionGradScatter(grad);
      group.ops.insert(scatter.begin(), scatter.end());
      if (!scatter.empty())
        group.root = scatter.back();
    }
    if (group.ops.size() == 1)
      continue;
    for (Operation *op : group.ops)
      groupOf[op] = groups.size();
    groups.push_back(std::move(group));
  }
  // The original chains, now unread (outermost view first).
  for (Operation *op : replaced)
    if (op->use_empty())
      op->erase();
  position.clear();
  for (auto [index, op] :
       llvm::enumerate(model.getBody().front().without_terminator()))
    position[&op] = index;
}

void KernelFormation::formClassifierGroups() {
  for (Operation &op : model.getBody().front().without_terminator()) {
    auto grad = dyn_cast<CrossEntropyGradOp>(op);
    if (!grad || groupOf.count(grad))
      continue;
    CrossEntropyOp forward;
    for (Operation *user : grad.getLogits().getUsers())
      if (auto loss = dyn_cast<CrossEntropyOp>(user);
          loss && loss.getTargets() == grad.getTargets() &&
          loss.getIgnoreIndex() == grad.getIgnoreIndex() &&
          !groupOf.count(loss))
        forward = loss;
    // The kernel reads the loss's gradient before it computes the loss: a
    // gradient seeded with the loss itself cannot wait for it.
    if (!forward || grad.getGrad() == forward.getResult())
      continue;
    Group group;
    group.kind = FusionKind::Classifier;
    group.ops.insert(forward);
    group.ops.insert(grad);
    // Both run where the gradient was: the loss must not be read before.
    group.root = grad;
    if (options.classifierGemms)
      if (std::optional<LinearClassifier> gemms =
              linearClassifier(forward, grad)) {
        // With the GEMMs around it, where the later GEMM was.
        Group wide = group;
        wide.kind = FusionKind::LinearClassifier;
        wide.ops.insert(gemms->linear);
        wide.ops.insert(gemms->logitViews.begin(), gemms->logitViews.end());
        wide.ops.insert(gemms->gradientViews.begin(),
                        gemms->gradientViews.end());
        wide.ops.insert(gemms->inputGradient);
        wide.ops.insert(gemms->weightGradient);
        if (gemms->widen)
          wide.ops.insert(gemms->widen);
        wide.root = position.lookup(gemms->inputGradient) >
                            position.lookup(gemms->weightGradient)
                        ? gemms->inputGradient
                        : gemms->weightGradient;
        Value weightGradient = gemms->widen ? gemms->widen.getResult()
                                            : gemms->weightGradient.getResult();
        // dX's reshapes (for the layer before) may come before the later
        // GEMM: they are views, and move after it.
        deferViews(gemms->inputGradient.getResult(), wide.root);
        if (readAfter(forward.getResult(), wide) &&
            readAfter(gemms->inputGradient.getResult(), wide) &&
            readAfter(weightGradient, wide)) {
          for (Operation *op : wide.ops)
            groupOf[op] = groups.size();
          groups.push_back(std::move(wide));
          continue;
        }
      }
    if (!readAfter(forward.getResult(), group))
      continue;
    groupOf[forward] = groupOf[grad] = groups.size();
    groups.push_back(std::move(group));
  }
}

void KernelFormation::formEpilogueGroups() {
  for (Operation &op : model.getBody().front().without_terminator()) {
    if (groupOf.count(&op))
      continue;
    if (auto [sum, widen] = biasGradient(&op); sum && !groupOf.count(sum)) {
      Group group;
      group.kind = FusionKind::Gemm;
      // The group ends where the later of its two results is written.
      Operation *productEnd = &op, *sumEnd = sum;
      if (widen) {
        productEnd = widenedResult(&op);
        sumEnd = widen;
      }
      for (Operation *member : {&op, productEnd, sum.getOperation(), sumEnd}) {
        group.ops.insert(member);
        groupOf[member] = groups.size();
      }
      group.root = position.lookup(sumEnd) > position.lookup(productEnd)
                       ? sumEnd
                       : productEnd;
      groups.push_back(std::move(group));
      continue;
    }
    if (auto [reshape, grad] = geluGradient(&op); grad) {
      Group group;
      group.kind = FusionKind::Gemm;
      group.ops.insert(&op);
      if (reshape)
        group.ops.insert(reshape);
      group.ops.insert(grad);
      group.root = grad;
      for (Operation *member : group.ops)
        groupOf[member] = groups.size();
      groups.push_back(std::move(group));
      continue;
    }
    Operation *epilogue = nullptr;
    if (auto linear = dyn_cast<LinearOp>(op);
        linear && op.getNextNode() && isGeluEpilogue(linear, op.getNextNode()))
      epilogue = op.getNextNode();
    else if (CastOp widen = widenedResult(&op))
      epilogue = widen;
    if (!epilogue)
      continue;
    Group group;
    group.kind = isa<ReduceSumOp, EmbeddingGradOp>(op) ? FusionKind::Reduce
                                                       : FusionKind::Gemm;
    group.ops.insert(&op);
    group.ops.insert(epilogue);
    group.root = epilogue;
    groupOf[&op] = groupOf[epilogue] = groups.size();
    groups.push_back(std::move(group));
  }
}

void KernelFormation::formRowGroups() {
  for (Operation &op : model.getBody().front().without_terminator()) {
    if (!isRowFusible(&op) || groupOf.count(&op))
      continue;
    if (isa<BatchNormGradOp>(op) && !options.batchNormGradientPrologues)
      continue;
    Group group;
    group.kind = FusionKind::Row;
    group.ops.insert(&op);
    group.root = &op;
    if (auto quantize = dyn_cast<QuantizeOp>(op))
      takeBiasSum(quantize, group);
    auto joins = [&](Operation *candidate) {
      return candidate && fusible(candidate) && !groupOf.count(candidate) &&
             !isa<DropoutOp>(candidate) &&
             candidate->getBlock() == op.getBlock();
    };
    if (isa<SoftmaxOp, LogSoftmaxOp, LayerNormOp, QuantizeOp, BatchNormGradOp>(
            op)) {
      // The prologue: what computes the input (a batch norm gradient's
      // incoming gradient), read only here, one evaluation per element of
      // the input. A layer norm's, a quantization's and a batch norm
      // gradient's kernel also stores its input when it is read after the
      // group (the residual sum before a layer norm; a GELU's gradient that
      // a bias gradient sums too; a residual block's gradient, which its
      // shortcut reads).
      int64_t elements = elementCount(op.getOperand(0));
      SmallVector<Value> worklist{op.getOperand(0)};
      while (!worklist.empty()) {
        Value value = worklist.pop_back_val();
        Operation *producer = value.getDefiningOp();
        if (!joins(producer) || group.ops.contains(producer))
          continue;
        bool stored = isa<LayerNormOp, QuantizeOp, BatchNormGradOp>(op) &&
                      value == op.getOperand(0) && isElementwise(producer) &&
                      readAfter(value, group);
        if (!readOnceHere(producer, group, elements) && !stored)
          continue;
        group.ops.insert(producer);
        llvm::append_range(worklist, producer->getOperands());
      }
    } else {
      // The epilogue: the chain of elementwise ops of the result's shape,
      // each the only reader of the one before.
      Value current = op.getResult(0);
      while (current.hasOneUse()) {
        Operation *user = *current.getUsers().begin();
        if (!joins(user) || !isElementwise(user) ||
            shapeOf(user->getResult(0)) != shapeOf(current))
          break;
        group.ops.insert(user);
        group.root = user;
        current = user->getResult(0);
      }
      // A max pooling that alone reads the chain's result (a ResNet's stem:
      // batch norm, ReLU, max pool) joins it: its loads normalise, so what
      // it pools is never stored.
      if (auto pool = current.hasOneUse()
                          ? dyn_cast<MaxPool2dWithIndicesOp>(
                                *current.getUsers().begin())
                          : MaxPool2dWithIndicesOp();
          pool && isa<BatchNormOp>(op) && !groupOf.count(pool) &&
          pool->getBlock() == op.getBlock()) {
        group.ops.insert(pool);
        group.root = pool;
      }
      // The op moves to the end of the chain: its other results (a layer
      // norm's parameter gradients) must not be read before.
      if (!llvm::all_of(llvm::drop_begin(op.getResults()),
                        [&](Value result) { return readAfter(result, group); }))
        continue;
    }
    if (group.ops.size() < 2)
      continue;
    for (Operation *member : group.ops)
      groupOf[member] = groups.size();
    groups.push_back(std::move(group));
  }
}

void KernelFormation::joinStoredAmaxQuantizes() {
  for (Operation &op : model.getBody().front().without_terminator()) {
    if (!isa<LayerNormOp, LayerNormGradOp, AttentionOp, AttentionGradOp>(op))
      continue;
    auto owner = groupOf.find(&op);
    Group group;
    if (owner == groupOf.end()) {
      if (isAttentionLike(&op) || !options.rows)
        continue;
      group.kind = FusionKind::Row;
      group.ops.insert(&op);
      group.root = &op;
    } else {
      group = groups[owner->second];
    }
    FusionKind kind =
        isAttentionLike(&op) ? FusionKind::Attention : FusionKind::Row;
    if (group.kind != kind || group.merged)
      continue;
    // An attention gradient's kernels store one tensor only where the
    // group scatters dq, dk and dv into it.
    if (isa<AttentionGradOp>(group.root))
      continue;
    // What the kernels store: the norm's result, or its input gradient
    // through the epilogue; the attention's output, or the sum its
    // gradient is scattered into. Under delayed scaling a layer norm's
    // kernel casts its output itself (the scale is known before the step),
    // where the FP8 result is read: the transposed copy is made from it.
    QuantizeOp quantize;
    for (Operation *user : group.root->getResult(0).getUsers())
      if (auto candidate = dyn_cast<QuantizeOp>(user);
          candidate && !candidate.getUnscaled() &&
          (!candidate.getScaling() || (isa<LayerNormOp>(group.root) &&
                                       !candidate.getResult().use_empty())))
        quantize = candidate;
    if (!quantize)
      continue;
    // The quantization's own group holds at most its bias sum.
    Group *own = nullptr;
    if (auto it = groupOf.find(quantize); it != groupOf.end()) {
      own = &groups[it->second];
      if (own->kind != FusionKind::Row || own->merged ||
          own->root != quantize.getOperation() || quantize.getScaling())
        continue;
      group.ops.insert(own->ops.begin(), own->ops.end());
    } else {
      group.ops.insert(quantize);
    }
    // The group runs where the quantization was: nothing before it may
    // read what the kernels store.
    group.root = quantize;
    if (!llvm::all_of(outputs(group),
                      [&](Value value) { return readAfter(value, group); }))
      continue;
    size_t index = owner == groupOf.end() ? groups.size() : owner->second;
    if (own)
      own->merged = true;
    if (owner == groupOf.end())
      groups.push_back(group);
    else
      groups[index] = group;
    for (Operation *member : group.ops)
      groupOf[member] = index;
  }
}

void KernelFormation::takeBiasSum(QuantizeOp quantize, Group &group) {
  QuantizeBiasSum bias = quantizeBiasSum(quantize, position);
  if (!bias.sum)
    return;
  SmallVector<Operation *> members;
  if (bias.reshape)
    members.push_back(bias.reshape);
  members.push_back(bias.sum);
  if (bias.widen)
    members.push_back(bias.widen);
  // Each member ungrouped, or in the reduce group of the sum and its
  // widening, which this group then replaces.
  Group *reduce = nullptr;
  for (Operation *member : members) {
    auto owner = groupOf.find(member);
    if (owner == groupOf.end())
      continue;
    Group &other = groups[owner->second];
    if (other.kind != FusionKind::Reduce || other.merged ||
        (reduce && reduce != &other))
      return;
    reduce = &other;
  }
  if (reduce) {
    if (!llvm::all_of(reduce->ops, [&](Operation *op) {
          return llvm::is_contained(members, op);
        }))
      return;
    reduce->merged = true;
  }
  for (Operation *member : members)
    group.ops.insert(member);
}

void KernelFormation::growLoopGroup(Group &group) {
  // Producers are considered from the root backwards; a producer that
  // joins brings its own operands into consideration.
  ArrayRef<int64_t> shape = shapeOf(group.root->getResult(0));
  int64_t elements = elementCount(group.root->getResult(0));
  SmallVector<Operation *> worklist{group.root};
  while (!worklist.empty()) {
    Operation *consumer = worklist.pop_back_val();
    for (Value operand : consumer->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || producer->getBlock() != group.root->getBlock() ||
          group.ops.contains(producer) || groupOf.count(producer) ||
          !fusible(producer))
        continue;
      Value result = producer->getResult(0);
      bool extraOutput = shapeOf(result) == shape &&
                         !isa<ReshapeOp>(producer) && readAfter(result, group);
      if (!readOnceHere(producer, group, elements) && !extraOutput)
        continue;
      group.ops.insert(producer);
      groupOf[producer] = &group - groups.data();
      worklist.push_back(producer);
    }
  }
}

SmallVector<Value> KernelFormation::outputs(const Group &group) const {
  SmallVector<Value> values;
  for (Operation *op : group.ops)
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), [&](Operation *user) {
            return !group.ops.contains(user);
          }))
        values.push_back(result);
  return values;
}

void KernelFormation::mergeSiblings() {
  // Loop groups in the order of their roots; each may take an earlier one
  // of its shape that reads a value it reads, when nothing between the two
  // roots (itself included) reads the earlier group's outputs.
  SmallVector<size_t> loops;
  for (auto [index, group] : llvm::enumerate(groups))
    if (group.kind == FusionKind::Loop)
      loops.push_back(index);
  llvm::sort(loops, [&](size_t a, size_t b) {
    return position.lookup(groups[a].root) < position.lookup(groups[b].root);
  });
  auto inputs = [&](const Group &group) {
    llvm::SetVector<Value> values;
    for (Operation *op : group.ops)
      for (Value operand : op->getOperands())
        if (!operand.getDefiningOp() ||
            !group.ops.contains(operand.getDefiningOp()))
          values.insert(operand);
    return values;
  };
  for (auto [i, later] : llvm::enumerate(loops)) {
    Group &into = groups[later];
    for (size_t j = i; j-- > 0;) {
      Group &from = groups[loops[j]];
      if (from.merged || outputs(from).empty() || outputs(into).empty() ||
          shapeOf(outputs(from).front()) != shapeOf(outputs(into).front()))
        continue;
      llvm::SetVector<Value> shared = inputs(from);
      if (!llvm::any_of(inputs(into),
                        [&](Value value) { return shared.contains(value); }))
        continue;
      if (!llvm::all_of(outputs(from),
                        [&](Value value) { return readAfter(value, into); }))
        continue;
      for (Operation *op : from.ops) {
        into.ops.insert(op);
        groupOf[op] = later;
      }
      from.merged = true;
    }
  }
}

void KernelFormation::wrap(const Group &group) {
  SmallVector<Operation *> ops(group.ops.begin(), group.ops.end());
  llvm::sort(ops, [&](Operation *a, Operation *b) {
    return position.lookup(a) < position.lookup(b);
  });
  SmallVector<Value> results = outputs(group);
  if (results.empty()) // unread: the root's result is still computed
    results.push_back(group.root->getResult(0));
  // Yielded in program order, the kernel's stores in that order.
  llvm::sort(results, [&](Value a, Value b) {
    return position.lookup(a.getDefiningOp()) <
           position.lookup(b.getDefiningOp());
  });
  // A GEMM or reduction with its epilogue runs where the GEMM was: the
  // epilogue reads nothing else, and the GEMM's operands (activations of
  // the forward pass, often) are not kept alive until a late reader of the
  // epilogue's result. Other groups run where their last op was.
  bool atFirst =
      group.kind == FusionKind::Gemm || group.kind == FusionKind::Reduce;
  OpBuilder builder(atFirst ? ops.front() : group.root);
  SmallVector<Type> types =
      llvm::map_to_vector(results, [](Value value) { return value.getType(); });
  auto fusion =
      FusionOp::create(builder, group.root->getLoc(), types,
                       FusionKindAttr::get(builder.getContext(), group.kind));
  Block *body = builder.createBlock(&fusion.getBody());
  for (Operation *op : ops)
    op->moveBefore(body, body->end());
  builder.setInsertionPointToEnd(body);
  YieldOp::create(builder, group.root->getLoc(), results);
  for (auto [value, result] : llvm::zip(results, fusion.getResults()))
    value.replaceUsesWithIf(result, [&](OpOperand &use) {
      return !fusion->isProperAncestor(use.getOwner());
    });
}

int64_t KernelFormation::run() {
  if (options.attentionViews)
    formAttentionGroups();
  if (options.classifier)
    formClassifierGroups();
  if (options.gemmEpilogues)
    formEpilogueGroups();
  if (options.rows)
    formRowGroups();
  joinStoredAmaxQuantizes();
  // Roots from the last op backwards: a group grows towards its inputs.
  SmallVector<Operation *> body;
  for (Operation &op : model.getBody().front().without_terminator())
    body.push_back(&op);
  for (Operation *op : llvm::reverse(body)) {
    if (groupOf.count(op) || !fusible(op) || isa<ReshapeOp>(op) ||
        op->getNumResults() != 1)
      continue;
    groupOf[op] = groups.size();
    Group group;
    group.ops.insert(op);
    group.root = op;
    groups.push_back(std::move(group));
    growLoopGroup(groups.back());
  }
  if (options.siblings)
    mergeSiblings();
  int64_t formed = 0;
  for (const Group &group : groups)
    if (!group.merged && group.ops.size() > 1) {
      wrap(group);
      ++formed;
    }
  return formed;
}

struct MpcFormKernelsPass : impl::MpcFormKernelsPassBase<MpcFormKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    MpcFormKernelsPassOptions options{
        views,           gemmEpilogues,
        siblings,        rows,
        attentionViews,  classifier,
        classifierGemms, batchNormGradientPrologues};
    getOperation().walk([&](ModelOp model) {
      numGroups += formKernels(model, options);
      model.walk(
          [&](FusionOp fusion) { numFusedOps += fusion.getGroupOps().size(); });
    });
  }
};

} // namespace

int64_t formKernels(ModelOp model, const MpcFormKernelsPassOptions &options) {
  return KernelFormation(model, options).run();
}

} // namespace mlir::mpc
