//===- EmitAttention.cpp - FlashAttention kernels for mpc.attention -------===//
//
// mpc.attention becomes one kernel, mpc.attention_grad two (dK and dV, then
// dQ); their bodies are templates in runtime/device/mpc_attention.h, which
// says what they compute. Here: the tile sizes, the strides of each
// layout, the launches and their costs.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::mpc;

namespace {

/// Threads per attention block of the f32 kernels: four warps, each taking
/// elements of every product in turn. The tensor-core kernels (f16, bf16)
/// have a warp per 16 rows of their tile instead (attentionBlock).
constexpr int attentionBlockSize = 128;
/// The static shared memory a block may use without opting in to more.
constexpr int64_t sharedMemoryLimit = 48 * 1024;
/// The largest head dim the tiles are sized for.
constexpr int64_t maxHeadDim = 128;
/// Registers a thread of the dK/dV kernel may use where its warps hold
/// their rows of K and V (limitRegisters).
constexpr int keyValueRegisters = 168;

int64_t roundUp16(int64_t n) { return (n + 15) / 16 * 16; }

/// The shared memory of each kernel in mpc_attention.h (its MPC_SHARED_TILE and
/// MPC_SHARED arrays), for tiles of bq queries and bk keys, head dims
/// padded to d and dv, operands of `bytes` bytes. Every tile's rows are
/// padded by 16 bytes (MPC_LD).
struct SharedBytes {
  int64_t bq, bk, d, dv, bytes;
  /// A tile of `rows` rows of `width` elements of `size` bytes.
  static int64_t tile(int64_t rows, int64_t width, int64_t size) {
    return rows * (width * size + 16);
  }
  int64_t operands(int64_t rows, int64_t width) const {
    return tile(rows, width, bytes);
  }
  static int64_t floats(int64_t rows, int64_t width) {
    return tile(rows, width, 4);
  }
  int64_t forward() const {
    return operands(bq, d) + operands(bk, d) + operands(bk, dv) +
           operands(bq, bk) + floats(bq, bk) + floats(bq, dv) + 4 * 3 * bq;
  }
  int64_t backwardKeyValue() const {
    return operands(bk, d) + operands(bk, dv) + operands(bq, d) +
           operands(bq, dv) + 2 * operands(bq, bk) + 2 * floats(bq, bk) +
           floats(bk, d) + floats(bk, dv) + 4 * 2 * bq;
  }
  int64_t backwardQuery() const {
    return operands(bq, d) + operands(bq, dv) + operands(bk, d) +
           operands(bk, dv) + 2 * operands(bq, bk) + 2 * floats(bq, bk) +
           floats(bq, d) + 4 * 2 * bq;
  }
  /// The tensor-core kernels (the *_mma bodies), whose S, P, dP and dS
  /// tiles are registers and whose streamed tiles are double-buffered:
  /// keys and values in the forward and dQ kernels, queries, dO and their
  /// row statistics in the dK/dV kernel.
  int64_t forwardMma() const {
    return operands(bq, std::max(d, dv)) + 2 * operands(bk, d) +
           2 * operands(bk, dv);
  }
  int64_t backwardQueryMma() const {
    return operands(bq, d) + operands(bq, dv) + 2 * operands(bk, d) +
           2 * operands(bk, dv) + 4 * 2 * bq;
  }
  int64_t backwardKeyValueMma() const {
    return operands(bk, d) + operands(bk, dv) + 2 * operands(bq, d) +
           2 * operands(bq, dv) + 4 * 2 * 2 * bq;
  }
  int64_t forwardBytes(bool mma) const {
    return mma ? forwardMma() : forward();
  }
  int64_t queryBytes(bool mma) const {
    return mma ? backwardQueryMma() : backwardQuery();
  }
  int64_t keyValueBytes(bool mma) const {
    return mma ? backwardKeyValueMma() : backwardKeyValue();
  }
};

/// What the three kernels of one attention share: its shape, strides and
/// tiles.
struct AttentionPlan {
  AttentionShape shape;
  bool causal;
  double scale;
  std::string type; ///< the operands' C type
  bool half;
  int64_t d, dv; ///< head dims padded to 16
  /// Each kernel's tiles: queries by keys.
  struct Tiles {
    int64_t queries = 0, keys = 0;
  } forward, query, keyValue;
  /// Batch, head and sequence strides of q, k, v (possibly views of a
  /// larger tensor), of the output (and its gradient) and of the gradients.
  SmallVector<int64_t, 3> qStrides, kStrides, vStrides, oStrides, dqStrides,
      dkStrides, dvStrides;
  /// Pointer expressions for q, k and v: their views' first elements.
  std::string q, k, v;
  /// The same for the gradients (attention_grad): their own buffers, or
  /// their places in the tensor the group scatters them into.
  std::string dqPointer, dkPointer, dvPointer;
  std::string mask; ///< a pointer expression, or a null pointer

  /// Threads a block of a kernel whose warps own `rows` rows of its tile,
  /// `rowsPerWarp` each.
  int64_t attentionBlock(int64_t rows, int64_t rowsPerWarp = 16) const {
    return half ? std::max<int64_t>(32, rows / rowsPerWarp * 32)
                : attentionBlockSize;
  }
  /// The forward kernel's warps own 32 rows of query tiles of 128
  /// (mpc_attention_forward_rows).
  int64_t forwardRowsPerWarp() const {
    return forward.queries >= 128 ? 32 : 16;
  }
  int64_t heads() const { return shape.batch * shape.heads; }
  static int64_t tilesOf(int64_t n, int64_t tile) {
    return (n + tile - 1) / tile;
  }

  /// The (query, key) pairs of the tiles a kernel computes: a causal
  /// attention skips the tiles above the diagonal and computes the
  /// diagonal ones whole.
  int64_t computedPairs(Tiles tiles) const {
    int64_t bq = tiles.queries, bk = tiles.keys, pairs = 0;
    for (int64_t q0 = 0; q0 < shape.queries; q0 += bq) {
      int64_t rows = std::min(bq, shape.queries - q0);
      int64_t keyEnd = causal ? std::min(q0 + bq, shape.keys) : shape.keys;
      for (int64_t k0 = 0; k0 < keyEnd; k0 += bk)
        pairs += rows * std::min(bk, shape.keys - k0);
    }
    return pairs * heads();
  }
  /// The same for the dK/dV kernel, which walks query tiles per key tile.
  int64_t computedPairsByKeys() const {
    int64_t bq = keyValue.queries, bk = keyValue.keys, pairs = 0;
    for (int64_t k0 = 0; k0 < shape.keys; k0 += bk) {
      int64_t columns = std::min(bk, shape.keys - k0);
      for (int64_t q0 = causal ? k0 / bq * bq : 0; q0 < shape.queries; q0 += bq)
        pairs += columns * std::min(bq, shape.queries - q0);
    }
    return pairs * heads();
  }

  /// The mpc_attention_shape initialiser.
  std::string shapeLiteral() const {
    auto strides = [](ArrayRef<int64_t> s) {
      return llvm::formatv("{0}LL, {1}LL, {2}LL", s[0], s[1], s[2]).str();
    };
    return llvm::formatv("{{{0}, {1}, {2}, {3}, {4}, {{{5}}, {{{6}}, {{{7}}, "
                         "{{{8}}, {{{9}}, {{{10}}, {{{11}}, (float){12}, {13}}",
                         shape.heads, shape.queries, shape.keys, shape.headDim,
                         shape.valueDim, strides(qStrides), strides(kStrides),
                         strides(vStrides), strides(oStrides),
                         strides(dqStrides), strides(dkStrides),
                         strides(dvStrides), floatLiteral(scale),
                         causal ? "true" : "false")
        .str();
  }
  /// The template arguments of a kernel body with tiles `tiles`.
  std::string templateArguments(Tiles tiles) const {
    return llvm::formatv("{0}, {1}, {2}, {3}, {4}", type, d, dv, tiles.queries,
                         tiles.keys);
  }
};

/// Batch, head and sequence strides, from the strides of the four dims of
/// a [B, H, T, D] or [B, T, H, D] tensor.
SmallVector<int64_t, 3> layoutStrides(ArrayRef<int64_t> strides,
                                      AttentionLayout layout) {
  if (layout == AttentionLayout::BHTD)
    return {strides[0], strides[1], strides[2]};
  return {strides[0], strides[2], strides[1]};
}
SmallVector<int64_t, 3> layoutStrides(RankedTensorType type,
                                      AttentionLayout layout) {
  return layoutStrides(rowMajorStrides(type.getShape()), layout);
}

/// `pointer` advanced by `offset` elements.
std::string offsetPointer(std::string pointer, int64_t offset) {
  if (!offset)
    return pointer;
  return "(" + pointer + " + " + std::to_string(offset) + "LL)";
}

/// How the kernels read an operand of `step`'s attention: in place through
/// the views the group holds (mpc-form-kernels' `attention` groups), or
/// its own buffer. Sets the pointer expression and the strides.
LogicalResult readOperand(Operation *op, const Step &step, Value operand,
                          AttentionLayout layout, StepEmitter &emitter,
                          std::string &pointer,
                          SmallVector<int64_t, 3> &strides) {
  FailureOr<StridedView> view = getStridedView(operand, [&](Operation *view) {
    return llvm::is_contained(step.ops, view);
  });
  if (failed(view) || view->strides.back() != 1)
    return op->emitError() << "the attention kernels cannot read this operand "
                              "in place: its head dim is not contiguous";
  pointer = offsetPointer(emitter.constPointer(view->base), view->offset);
  strides = layoutStrides(view->strides, layout);
  return success();
}

/// Each kernel's tiles for `shape` (f16 or bf16 operands where `half`),
/// into `plan` (whose head dims are set): the largest that fit the static
/// shared memory, no larger than the sequences. False where none fits.
bool chooseTiles(const AttentionShape &shape, bool half, AttentionPlan &plan) {
  int64_t bytes = half ? 2 : 4;
  auto clamp = [&](std::pair<int64_t, int64_t> tiles) {
    return SharedBytes{std::min(tiles.first, roundUp16(shape.queries)),
                       std::min(tiles.second, roundUp16(shape.keys)), plan.d,
                       plan.dv, bytes};
  };
  auto choose = [&](ArrayRef<std::pair<int64_t, int64_t>> candidates,
                    int64_t (SharedBytes::*footprint)(bool) const,
                    AttentionPlan::Tiles &tiles) {
    for (std::pair<int64_t, int64_t> candidate : candidates) {
      SharedBytes shared = clamp(candidate);
      if ((shared.*footprint)(half) <= sharedMemoryLimit) {
        tiles = {shared.bq, shared.bk};
        return true;
      }
    }
    return false;
  };
  if (half) {
    // The tensor-core kernels: tiles of multiples of 16 rows, a warp per
    // 16. The backward kernels' tiles are those their streamed operands
    // fit double-buffered beside. Forward tiles of 128 x 32, whose warps
    // own 32 rows (mpc_attention_forward_rows), took 0.226 ms on an H200
    // where 64 x 64 took 0.166 (GPT-2 small's shape): 128 x 64 needs more
    // than the static 48 KB.
    return choose({{64, 64}, {64, 32}, {32, 32}, {32, 16}, {16, 16}},
                  &SharedBytes::forwardBytes, plan.forward) &&
           choose({{64, 64}, {64, 32}, {32, 32}, {32, 16}, {16, 16}},
                  &SharedBytes::queryBytes, plan.query) &&
           choose({{64, 64}, {32, 64}, {32, 32}, {16, 32}, {16, 16}},
                  &SharedBytes::keyValueBytes, plan.keyValue);
  }
  // The f32 kernels: the forward and dQ kernels share their tiles, and the
  // dK/dV kernel halves its query tile until its two more key-sized f32
  // tiles fit.
  for (std::pair<int64_t, int64_t> candidate :
       {std::pair<int64_t, int64_t>{64, 64},
        {64, 32},
        {32, 32},
        {32, 16},
        {16, 16},
        {16, 8},
        {8, 8}}) {
    SharedBytes shared = clamp(candidate);
    if (shared.forward() > sharedMemoryLimit ||
        shared.backwardQuery() > sharedMemoryLimit)
      continue;
    SharedBytes keyValue = shared;
    while (keyValue.backwardKeyValue() > sharedMemoryLimit &&
           keyValue.bq / 2 >= 8 && keyValue.bq % 2 == 0)
      keyValue.bq /= 2;
    if (keyValue.backwardKeyValue() <= sharedMemoryLimit) {
      plan.forward = plan.query = {shared.bq, shared.bk};
      plan.keyValue = {keyValue.bq, keyValue.bk};
      return true;
    }
  }
  return false;
}

FailureOr<AttentionPlan> planAttention(Operation *op, const Step &step,
                                       AttentionShape shape, Value q, Value k,
                                       Value v, Value mask,
                                       RankedTensorType output, bool causal,
                                       double scale, AttentionLayout layout,
                                       StepEmitter &emitter) {
  if (shape.headDim > maxHeadDim || shape.valueDim > maxHeadDim)
    return op->emitError() << "the attention kernels support head dims up to "
                           << maxHeadDim << ", got " << shape.headDim << " and "
                           << shape.valueDim;
  AttentionPlan plan;
  plan.shape = shape;
  plan.causal = causal;
  plan.scale = scale;
  plan.type = elementCType(q);
  plan.half = !cast<RankedTensorType>(q.getType()).getElementType().isF32();
  plan.d = roundUp16(shape.headDim);
  plan.dv = roundUp16(shape.valueDim);
  bool fits = chooseTiles(shape, plan.half, plan);
  if (!fits)
    return op->emitError() << "the attention kernels' tiles do not fit "
                           << sharedMemoryLimit
                           << " bytes of shared memory for head dims "
                           << shape.headDim << " and " << shape.valueDim;
  if (failed(
          readOperand(op, step, q, layout, emitter, plan.q, plan.qStrides)) ||
      failed(
          readOperand(op, step, k, layout, emitter, plan.k, plan.kStrides)) ||
      failed(readOperand(op, step, v, layout, emitter, plan.v, plan.vStrides)))
    return failure();
  plan.oStrides = layoutStrides(output, layout);
  plan.dqStrides = layoutStrides(cast<RankedTensorType>(q.getType()), layout);
  plan.dkStrides = layoutStrides(cast<RankedTensorType>(k.getType()), layout);
  plan.dvStrides = layoutStrides(cast<RankedTensorType>(v.getType()), layout);
  if (auto grad = dyn_cast<AttentionGradOp>(op)) {
    auto place = [&](Value result, std::string &pointer,
                     SmallVector<int64_t, 3> &strides) -> LogicalResult {
      if (emitter.getPlan().isMaterialised(result)) {
        pointer = emitter.pointer(result);
        return success();
      }
      FailureOr<StridedView> view =
          getScatteredView(result, [&](Operation *user) {
            return llvm::is_contained(step.ops, user);
          });
      if (failed(view) || view->strides.back() != 1)
        return op->emitError() << "the attention kernels cannot write this "
                                  "gradient in place";
      pointer = offsetPointer(emitter.pointer(view->base), view->offset);
      strides = layoutStrides(view->strides, layout);
      return success();
    };
    if (failed(place(grad.getQueryGrad(), plan.dqPointer, plan.dqStrides)) ||
        failed(place(grad.getKeyGrad(), plan.dkPointer, plan.dkStrides)) ||
        failed(place(grad.getValueGrad(), plan.dvPointer, plan.dvStrides)))
      return failure();
  }
  plan.mask = mask ? emitter.constPointer(mask)
                   : std::string("(const unsigned char *)0");
  return plan;
}

/// Elementwise FLOPs per computed pair besides the products: scale, max,
/// exp and sum forward; exp, the difference and two products backward.
constexpr int64_t softmaxFlopsPerPair = 5;

/// Where the kernels of `step` find the amax of what they store for the
/// quantization after them (storedAmaxQuantize): the parameter, the
/// argument of the kernel body, and the partials' pointer (empty where
/// they do not).
struct AmaxPartials {
  std::string parameter, argument, pointer;
};
AmaxPartials amaxPartials(const Step &step, StepEmitter &emitter,
                          int64_t firstBlock, int64_t blocks) {
  QuantizeOp quantize = storedAmaxQuantize(step);
  if (!quantize)
    return {};
  return {", float *__restrict__ amax_partials", ", amax_partials",
          emitter.scratchPointer(step, "float",
                                 quantizeScratch(step, quantize).amaxOffset +
                                     firstBlock * 4,
                                 blocks * 4)};
}

void emitForward(AttentionOp op, const Step &step, const AttentionPlan &plan,
                 StepEmitter &emitter) {
  std::string name = emitter.kernelName("attention");
  int64_t grid =
      plan.heads() * plan.tilesOf(plan.shape.queries, plan.forward.queries);
  AmaxPartials amax = amaxPartials(step, emitter, 0, grid);
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ q, const {1} *__restrict__ "
      "k, const {1} *__restrict__ v, const unsigned char *__restrict__ mask, "
      "{1} *__restrict__ o, float *__restrict__ lse{4}) {{\n"
      "  const mpc_attention_shape a = {2};\n"
      "  mpc_attention_forward<{3}>(a, q, k, v, mask, o, lse{5});\n"
      "}\n",
      name, plan.type, plan.shapeLiteral(),
      plan.templateArguments(plan.forward), amax.parameter, amax.argument));
  int64_t pairs = plan.computedPairs(plan.forward);
  KernelCost cost =
      KernelCost()
          .reads(op.getQuery())
          .reads(op.getKey())
          .reads(op.getValue())
          .writes(op.getResult())
          .writes(op.getLse())
          .flopsPer(pairs, 2 * plan.shape.headDim + 2 * plan.shape.valueDim +
                               softmaxFlopsPerPair);
  if (op.getMask())
    cost.reads(op.getMask());
  SmallVector<std::string> arguments{plan.q,
                                     plan.k,
                                     plan.v,
                                     plan.mask,
                                     emitter.pointer(op.getResult()),
                                     emitter.pointer(op.getLse())};
  if (!amax.pointer.empty()) {
    arguments.push_back(amax.pointer);
    cost.writesBytes(grid * 4).flopsPer(plan.shape.batch * plan.shape.heads *
                                            plan.shape.queries *
                                            plan.shape.valueDim,
                                        1);
  }
  emitter.launch(
      name, grid,
      plan.attentionBlock(plan.forward.queries, plan.forwardRowsPerWarp()),
      arguments, cost, KernelKind::TensorCoreKernel, plan.half);
}

void emitBackward(AttentionGradOp op, const Step &step,
                  const AttentionPlan &plan, StepEmitter &emitter) {
  std::string parameters =
      llvm::formatv("const {0} *__restrict__ dout, const {0} *__restrict__ q, "
                    "const {0} *__restrict__ k, const {0} *__restrict__ v, "
                    "const {0} *__restrict__ o, const float *__restrict__ lse, "
                    "const unsigned char *__restrict__ mask",
                    plan.type);
  SmallVector<std::string> inputs{emitter.constPointer(op.getGrad()),
                                  plan.q,
                                  plan.k,
                                  plan.v,
                                  emitter.constPointer(op.getOutput()),
                                  emitter.constPointer(op.getLse()),
                                  plan.mask};
  auto readsInputs = [&](KernelCost cost) {
    Value read[] = {op.getGrad(),  op.getQuery(),  op.getKey(),
                    op.getValue(), op.getOutput(), op.getLse()};
    for (Value value : read)
      cost.reads(value);
    if (op.getMask())
      cost.reads(op.getMask());
    return cost;
  };
  int64_t d = plan.shape.headDim, dv = plan.shape.valueDim;

  // D_i = sum_j dO_ij O_ij per query: the dQ kernel computes it once per
  // query and leaves it in the step's scratch for the dK/dV kernel, which
  // runs after it.
  std::string delta = emitter.scratchPointer(step, "float", 0);

  // Where the kernels find the amax of the scattered dq, dk and dv for the
  // quantization after them: the dQ kernel's blocks' partials, then the
  // dK/dV kernel's.
  int64_t queryGrid =
      plan.heads() * plan.tilesOf(plan.shape.queries, plan.query.queries);
  int64_t keyValueGrid =
      plan.heads() * plan.tilesOf(plan.shape.keys, plan.keyValue.keys);
  AmaxPartials queryAmax = amaxPartials(step, emitter, 0, queryGrid);
  AmaxPartials keyValueAmax =
      amaxPartials(step, emitter, queryGrid, keyValueGrid);
  // One comparison an element stored.
  auto findsAmax = [&](KernelCost &cost, int64_t grid, int64_t elements) {
    cost.writesBytes(grid * 4).flopsPer(elements, 1);
  };
  int64_t elements = plan.shape.batch * plan.shape.heads;

  std::string query = emitter.kernelName("attention_grad_q");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}({1}, {2} *__restrict__ dq, float *__restrict__ "
      "delta{5}) {{\n"
      "  const mpc_attention_shape a = {3};\n"
      "  mpc_attention_backward_q<{4}>(a, dout, q, k, v, o, lse, mask, dq, "
      "delta{6});\n"
      "}\n",
      query, parameters, plan.type, plan.shapeLiteral(),
      plan.templateArguments(plan.query), queryAmax.parameter,
      queryAmax.argument));
  // S, dP and dQ.
  KernelCost queryCost = readsInputs(KernelCost())
                             .writes(op.getQueryGrad())
                             .flopsPer(plan.computedPairs(plan.query),
                                       4 * d + 2 * dv + softmaxFlopsPerPair);
  SmallVector<std::string> arguments(inputs);
  arguments.push_back(plan.dqPointer);
  arguments.push_back(delta);
  if (!queryAmax.pointer.empty()) {
    arguments.push_back(queryAmax.pointer);
    findsAmax(queryCost, queryGrid, elements * plan.shape.queries * d);
  }
  emitter.launch(query, queryGrid, plan.attentionBlock(plan.query.queries),
                 arguments, queryCost, KernelKind::TensorCoreKernel, plan.half);

  std::string keyValue = emitter.kernelName("attention_grad_kv");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}({1}, const float *__restrict__ delta, {2} "
      "*__restrict__ dk, {2} *__restrict__ dv{5}) {{\n"
      "  const mpc_attention_shape a = {3};\n"
      "  mpc_attention_backward_kv<{4}>(a, dout, q, k, v, o, lse, delta, mask, "
      "dk, dv{6});\n"
      "}\n",
      keyValue, parameters, plan.type, plan.shapeLiteral(),
      plan.templateArguments(plan.keyValue), keyValueAmax.parameter,
      keyValueAmax.argument));
  // S and dP, then dV and dK.
  KernelCost keyValueCost = readsInputs(KernelCost())
                                .writes(op.getKeyGrad())
                                .writes(op.getValueGrad())
                                .flopsPer(plan.computedPairsByKeys(),
                                          4 * d + 4 * dv + softmaxFlopsPerPair);
  arguments.assign(inputs.begin(), inputs.end());
  arguments.push_back(delta);
  arguments.push_back(plan.dkPointer);
  arguments.push_back(plan.dvPointer);
  if (!keyValueAmax.pointer.empty()) {
    arguments.push_back(keyValueAmax.pointer);
    findsAmax(keyValueCost, keyValueGrid,
              elements * plan.shape.keys * (d + dv));
  }
  emitter.launch(keyValue, keyValueGrid,
                 plan.attentionBlock(plan.keyValue.keys), arguments,
                 keyValueCost, KernelKind::TensorCoreKernel, plan.half);
  // Where its warps hold their K and V rows (head dims up to 64:
  // mpc_attention_backward_kv_mma's holdRows), 168 registers keep 3 blocks
  // of 4 warps an SM; left to itself ptxas took 170 on sm_80, 2 blocks.
  if (plan.half && plan.d <= 64 && plan.dv <= 64)
    emitter.limitRegisters(keyValue, keyValueRegisters);
}

} // namespace

int64_t mlir::mpc::attentionBlocks(Operation *attention) {
  AttentionShape shape;
  Value query;
  if (auto forward = dyn_cast<AttentionOp>(attention)) {
    shape = forward.getShape();
    query = forward.getQuery();
  } else {
    auto grad = cast<AttentionGradOp>(attention);
    shape = grad.getShape();
    query = grad.getQuery();
  }
  AttentionPlan plan;
  plan.shape = shape;
  plan.d = roundUp16(shape.headDim);
  plan.dv = roundUp16(shape.valueDim);
  if (!chooseTiles(
          shape,
          !cast<RankedTensorType>(query.getType()).getElementType().isF32(),
          plan))
    return 0;
  if (isa<AttentionOp>(attention))
    return plan.heads() * plan.tilesOf(shape.queries, plan.forward.queries);
  return plan.heads() * (plan.tilesOf(shape.queries, plan.query.queries) +
                         plan.tilesOf(shape.keys, plan.keyValue.keys));
}

FailureOr<bool> mlir::mpc::emitAttention(Operation *op, const Step &step,
                                         StepEmitter &emitter) {
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    FailureOr<AttentionPlan> plan = planAttention(
        op, step, attention.getShape(), attention.getQuery(),
        attention.getKey(), attention.getValue(), attention.getMask(),
        attention.getResult().getType(), attention.getCausal(),
        attention.getScale().convertToDouble(), attention.getLayout(), emitter);
    if (failed(plan))
      return failure();
    emitForward(attention, step, *plan, emitter);
    return true;
  }
  if (auto grad = dyn_cast<AttentionGradOp>(op)) {
    FailureOr<AttentionPlan> plan = planAttention(
        op, step, grad.getShape(), grad.getQuery(), grad.getKey(),
        grad.getValue(), grad.getMask(), grad.getOutput().getType(),
        grad.getCausal(), grad.getScale().convertToDouble(), grad.getLayout(),
        emitter);
    if (failed(plan))
      return failure();
    emitBackward(grad, step, *plan, emitter);
    return true;
  }
  return false;
}
