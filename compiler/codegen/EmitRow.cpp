//===- EmitRow.cpp - row kernels: softmax, cross-entropy, norms ---*- C++ -*-===//
//
// This file implements emitRowOp for ops that reduce along one dim and then
// use the result along the same dim. One block handles one row; its threads
// stride over the row and combine through mpc_block_reduce_*, so the kernels
// are correct for any block size (one thread on the cpu target).
//
// A tensor reduced along `dim` is viewed as [outer, D, inner]: row r is
// (r / inner, r % inner) and its element j is at
// (r / inner) * D * inner + j * inner + r % inner.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <limits>

using namespace mlir;
using namespace mlir::mpc;

int64_t mlir::mpc::reductionSplits(int64_t outputs, int64_t reduced) {
  // About 1024 blocks in all fill a GPU several times over.
  constexpr int64_t targetBlocks = 1024;
  if (reduced < 2 * reductionSlice || outputs * 2 > targetBlocks)
    return 1;
  return std::min((reduced + reductionSlice - 1) / reductionSlice,
                  targetBlocks / outputs);
}

int mlir::mpc::batchNormBlockSize(int64_t count) {
  int block = 128;
  while (block < channelBlockSize && block * 16 < count)
    block *= 2;
  return block;
}

int64_t mlir::mpc::batchNormSplits(RankedTensorType input) {
  int64_t channels = input.getDimSize(1);
  return reductionSplits(channels, input.getNumElements() / channels);
}

namespace {

struct RowView {
  int64_t outer = 1, extent = 1, inner = 1;
  int64_t rows() const { return outer * inner; }
};

RowView viewAlong(RankedTensorType type, int64_t dim) {
  RowView view;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (d < dim)
      view.outer *= type.getDimSize(d);
    else if (d == dim)
      view.extent = type.getDimSize(d);
    else
      view.inner *= type.getDimSize(d);
  }
  return view;
}

/// The preamble every row kernel shares: `base` and `stride` locate row
/// blockIdx.x's elements.
std::string rowPreamble(const RowView &view) {
  return llvm::formatv("  long long r = blockIdx.x;\n"
                       "  long long base = (r / {0}LL) * {1}LL + r % {0}LL;\n"
                       "  const long long stride = {0}LL;\n",
                       view.inner, view.extent * view.inner)
      .str();
}

/// softmax / log_softmax: max, sum of exponentials, then the outputs.
LogicalResult emitSoftmax(StepEmitter &emitter, const Step &step, Operation *op,
                          Value input, Value output, int64_t dim,
                          bool logarithm) {
  RowView view = viewAlong(cast<RankedTensorType>(input.getType()), dim);
  std::string name = emitter.kernelName(logarithm ? "log_softmax" : "softmax");
  FailureOr<RowAccess> x = rowInput(emitter, step, op, input, "x", name);
  if (failed(x))
    return failure();
  // Only a layer norm's kernel stores its fused input (mpc-form-kernels
  // gives a softmax no prologue that is read elsewhere).
  if (x->stored)
    return op->emitError() << "a softmax kernel cannot store its input";
  std::string element = x->load("base + j * stride");
  std::string store =
      logarithm
          ? "mpc_store(y + base + j * stride, " + element + " - m - logf(s));"
          : "mpc_store(y + base + j * stride, expf(" + element + " - m) / s);";
  SmallVector<std::string> parameters(x->parameters);
  parameters.push_back(elementCType(output) + " *__restrict__ y");
  SmallVector<std::string> arguments(x->arguments);
  arguments.push_back(emitter.pointer(output));
  emitter.addKernel(
      llvm::formatv("{6}__global__ void {0}({1}) {{\n{2}"
                    "  float m = -INFINITY;\n"
                    "  MPC_FOR_THREAD(j, {3}LL) m = mpc_max(m, {4});\n"
                    "  m = mpc_block_reduce_max(m);\n"
                    "  mpc_sum s = 0.0f;\n"
                    "  MPC_FOR_THREAD(j, {3}LL) s += expf({4} - m);\n"
                    "  s = mpc_block_reduce_sum(s);\n"
                    "  MPC_FOR_THREAD(j, {3}LL) {5}\n"
                    "}\n",
                    name, llvm::join(parameters, ", "), rowPreamble(view),
                    view.extent, element, store, x->functions()));
  KernelCost cost =
      KernelCost().writes(output).flopsPer(view.rows() * view.extent, 6);
  if (x->fused)
    cost += x->fused->cost;
  else
    cost.reads(input);
  // max, then sum of exp(x - m), then the outputs: 6 FLOPs an element.
  emitter.launch(name, view.rows(), rowBlockSize, arguments, cost);
  return success();
}

/// softmax_grad: dx = y * (dy - sum(dy * y));
/// log_softmax_grad: dx = dy - exp(y) * sum(dy).
LogicalResult emitSoftmaxGrad(StepEmitter &emitter, const Step &step,
                              Operation *op, Value grad, Value output,
                              Value result, int64_t dim, bool logarithm) {
  RowView view = viewAlong(cast<RankedTensorType>(grad.getType()), dim);
  std::string name =
      emitter.kernelName(logarithm ? "log_softmax_grad" : "softmax_grad");
  FailureOr<RowAccess> dx = rowOutput(emitter, step, op, result, "dx", name);
  if (failed(dx))
    return failure();
  std::string term = logarithm ? "mpc_load(dy + base + j * stride)"
                               : "mpc_load(dy + base + j * stride) * "
                                 "mpc_load(y + base + j * stride)";
  std::string value =
      logarithm ? "mpc_load(dy + base + j * stride) - expf(mpc_load(y + base "
                  "+ j * stride)) * s"
                : "mpc_load(y + base + j * stride) * (mpc_load(dy + base + j "
                  "* stride) - s)";
  SmallVector<std::string> parameters{
      "const " + elementCType(grad) + " *__restrict__ dy",
      "const " + elementCType(output) + " *__restrict__ y"};
  llvm::append_range(parameters, dx->parameters);
  SmallVector<std::string> arguments{emitter.constPointer(grad),
                                     emitter.constPointer(output)};
  llvm::append_range(arguments, dx->arguments);
  emitter.addKernel(llvm::formatv(
      "{5}__global__ void {0}({1}) {{\n{2}"
      "  mpc_sum s = 0.0f;\n"
      "  MPC_FOR_THREAD(j, {3}LL) s += {4};\n"
      "  s = mpc_block_reduce_sum(s);\n"
      "  MPC_FOR_THREAD(j, {3}LL) {6}\n"
      "}\n",
      name, llvm::join(parameters, ", "), rowPreamble(view), view.extent, term,
      dx->functions(), dx->store("base + j * stride", value)));
  // The row sum, then dx: 4 FLOPs an element.
  KernelCost cost = KernelCost().reads(grad).reads(output).flopsPer(
      view.rows() * view.extent, 4);
  if (dx->fused)
    cost += dx->fused->cost;
  cost.writes(dx->written);
  emitter.launch(name, view.rows(), rowBlockSize, arguments, cost);
  return success();
}

/// The target check shared by the cross-entropy kernels: ignored rows skip,
/// out-of-range targets raise the step's index error.
std::string targetCheck(std::optional<int64_t> ignore, int64_t classes,
                        StringRef onSkip) {
  std::string check = "  long long t = targets[r];\n";
  if (ignore)
    check += llvm::formatv("  if (t == {0}LL) {{ {1} return; }\n", *ignore,
                           onSkip)
                 .str();
  check += llvm::formatv("  if (t < 0 || t >= {0}LL) {{\n"
                         "    if (threadIdx.x == 0) mpc_raise_flag(index_error);\n"
                         "    {1} return;\n  }\n",
                         classes, onSkip)
               .str();
  return check;
}

/// The row's maximum `m` and sum of exp(x - m) `s`, in the order every
/// cross-entropy kernel uses (so that fused and unfused agree bit for bit).
constexpr const char *rowSoftmaxStatistics =
    "  float m, s;\n"
    "  mpc_softmax_row_statistics(x, {0}LL, m, s);\n";

/// Writes each row's gradient (p - onehot(t)) * dloss / count.
constexpr const char *rowGradientStore =
    "  float scale = dloss[0] / count[0];\n"
    "  mpc_softmax_row_gradient(x, dx, {0}LL, t, m, s, scale);\n";

/// One block counts the targets that are not ignored into `count`.
void emitTargetCount(StepEmitter &emitter, Value targets,
                     std::optional<int64_t> ignore, int64_t rows,
                     const std::string &count) {
  std::string name = emitter.kernelName("cross_entropy_count");
  std::string ignoreTest =
      ignore ? llvm::formatv("targets[r] != {0}LL", *ignore).str()
             : std::string("true");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ targets, float "
      "*__restrict__ count) {{\n"
      "  float c = 0.0f;\n"
      "  MPC_FOR_THREAD(r, {2}LL) c += ({3}) ? 1.0f : 0.0f;\n"
      "  c = mpc_block_reduce_sum(c);\n"
      "  if (threadIdx.x == 0) count[0] = c;\n"
      "}\n",
      name, elementCType(targets), rows, ignoreTest));
  emitter.launch(name, 1, rowBlockSize, {emitter.constPointer(targets), count},
                 KernelCost().reads(targets).writesBytes(4).flopsPer(rows, 1));
}

/// One block averages the per-row losses over the rows whose target is not
/// ignored (NaN when all are, as PyTorch).
void emitLossMean(StepEmitter &emitter, CrossEntropyOp op, int64_t rows,
                  const std::string &rowLoss, const std::string &rowValid) {
  std::string name = emitter.kernelName("cross_entropy_mean");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const float *__restrict__ row_loss, const float "
      "*__restrict__ row_valid, float *__restrict__ loss) {{\n"
      "  mpc_sum total = 0.0f, count = 0.0f;\n"
      "  MPC_FOR_THREAD(r, {1}LL) {{ total += row_loss[r]; count += "
      "row_valid[r]; }\n"
      "  total = mpc_block_reduce_sum(total);\n"
      "  count = mpc_block_reduce_sum(count);\n"
      "  if (threadIdx.x == 0) loss[0] = total / count;\n"
      "}\n",
      name, rows));
  emitter.launch(name, 1, rowBlockSize,
                 {rowLoss, rowValid, emitter.pointer(op.getResult())},
                 KernelCost()
                     .readsBytes(2 * rows * 4)
                     .writes(op.getResult())
                     .flopsPer(rows, 2)
                     .flopsPer(1, 1));
}

constexpr const char *skipRowLoss =
    "if (threadIdx.x == 0) { row_loss[r] = 0.0f; row_valid[r] = 0.0f; }";

/// Mean cross-entropy: per-row losses into scratch, then the mean.
void emitCrossEntropy(StepEmitter &emitter, const Step &step,
                      CrossEntropyOp op) {
  auto logits = op.getLogits().getType();
  int64_t classes = logits.getShape().back();
  int64_t rows = logits.getNumElements() / classes;
  std::string rowName = emitter.kernelName("cross_entropy_rows");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ logits, const {2} "
      "*__restrict__ targets, float *__restrict__ row_loss, float "
      "*__restrict__ row_valid, int *index_error) {{\n"
      "  long long r = blockIdx.x;\n"
      "  const {1} *x = logits + r * {3}LL;\n{4}{5}"
      "  if (threadIdx.x == 0) {{\n"
      "    row_loss[r] = logf(s) + m - mpc_load(x + t);\n"
      "    row_valid[r] = 1.0f;\n"
      "  }\n"
      "}\n",
      rowName, elementCType(op.getLogits()), elementCType(op.getTargets()),
      classes, targetCheck(op.getIgnoreIndex(), classes, skipRowLoss),
      llvm::formatv(rowSoftmaxStatistics, classes)));
  std::string rowLoss = emitter.scratchPointer(step, "float", 0, rows * 4);
  std::string rowValid =
      emitter.scratchPointer(step, "float", rows * 4, rows * 4);
  emitter.launch(rowName, rows, rowBlockSize,
                 {emitter.constPointer(op.getLogits()),
                  emitter.constPointer(op.getTargets()), rowLoss, rowValid,
                  "ctx->index_error"},
                 // sum of exp(x - m): 3 FLOPs an element, then 3 a row.
                 KernelCost()
                     .reads(op.getLogits())
                     .reads(op.getTargets())
                     .writesBytes(2 * rows * 4)
                     .flopsPer(rows * classes, 3)
                     .flopsPer(rows, 3));
  emitLossMean(emitter, op, rows, rowLoss, rowValid);
}

/// d logits = (softmax(logits) - onehot(target)) * d loss / count.
void emitCrossEntropyGrad(StepEmitter &emitter, const Step &step,
                          CrossEntropyGradOp op) {
  auto logits = op.getLogits().getType();
  int64_t classes = logits.getShape().back();
  int64_t rows = logits.getNumElements() / classes;
  std::string count = emitter.scratchPointer(step, "float");
  emitTargetCount(emitter, op.getTargets(), op.getIgnoreIndex(), rows, count);

  std::string name = emitter.kernelName("cross_entropy_grad");
  std::string zeroRow = "MPC_FOR_THREAD(j, " + std::to_string(classes) +
                        "LL) mpc_store(dx + j, 0.0f);";
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const float *__restrict__ dloss, const {1} "
      "*__restrict__ logits, const {2} *__restrict__ targets, const float "
      "*__restrict__ count, {3} *__restrict__ dlogits, int *index_error) "
      "{{\n"
      "  long long r = blockIdx.x;\n"
      "  const {1} *x = logits + r * {4}LL;\n"
      "  {3} *dx = dlogits + r * {4}LL;\n{5}{6}{7}"
      "}\n",
      name, elementCType(op.getLogits()), elementCType(op.getTargets()),
      elementCType(op.getResult()), classes,
      targetCheck(op.getIgnoreIndex(), classes, zeroRow),
      llvm::formatv(rowSoftmaxStatistics, classes),
      llvm::formatv(rowGradientStore, classes)));
  emitter.launch(name, rows, rowBlockSize,
                 {emitter.constPointer(op.getGrad()),
                  emitter.constPointer(op.getLogits()),
                  emitter.constPointer(op.getTargets()), count,
                  emitter.pointer(op.getResult()), "ctx->index_error"},
                 // sum of exp(x - m), then p and (p - onehot) * scale: 8 FLOPs
                 // an element.
                 KernelCost()
                     .reads(op.getGrad())
                     .reads(op.getLogits())
                     .reads(op.getTargets())
                     .readsBytes(4)
                     .writes(op.getResult())
                     .flopsPer(rows * classes, 8)
                     .flopsPer(rows, 1));
}

/// The kernel of a `classifier` group (llm.c's fused classifier): one pass
/// per row that stores the row's loss and writes its gradient. The gradient
/// may be the logits' own buffer (the memory plan decides; a chunked
/// classifier always does): each thread reads an element before it writes
/// it, and the row's target logit is read by every thread before a barrier
/// that precedes the first write, so the pointers are not __restrict__.
/// Row r of the launch is row r of every pointer it is given.
std::string addClassifierKernel(StepEmitter &emitter, CrossEntropyOp loss,
                                CrossEntropyGradOp grad) {
  int64_t classes = loss.getLogits().getType().getShape().back();
  std::string name = emitter.kernelName("classifier");
  std::string skip = std::string(skipRowLoss) + " MPC_FOR_THREAD(j, " +
                     std::to_string(classes) + "LL) mpc_store(dx + j, 0.0f);";
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const float *__restrict__ dloss, const {1} "
      "*logits, const {2} *__restrict__ targets, const float *__restrict__ "
      "count, float *__restrict__ row_loss, float *__restrict__ row_valid, "
      "{3} *dlogits, int *index_error) {{\n"
      "  long long r = blockIdx.x;\n"
      "  const {1} *x = logits + r * {4}LL;\n"
      "  {3} *dx = dlogits + r * {4}LL;\n{5}{6}"
      "  float target_logit = mpc_load(x + t);\n"
      "  __syncthreads(); // every read of x[t] before any write of dx\n"
      "  if (threadIdx.x == 0) {{\n"
      "    row_loss[r] = logf(s) + m - target_logit;\n"
      "    row_valid[r] = 1.0f;\n"
      "  }\n{7}"
      "}\n",
      name, elementCType(loss.getLogits()), elementCType(loss.getTargets()),
      elementCType(grad.getResult()), classes,
      targetCheck(loss.getIgnoreIndex(), classes, skip),
      llvm::formatv(rowSoftmaxStatistics, classes),
      llvm::formatv(rowGradientStore, classes)));
  return name;
}

/// Launches the classifier kernel over `rows` rows of logits.
void launchClassifier(StepEmitter &emitter, StringRef name, CrossEntropyOp loss,
                      CrossEntropyGradOp grad, int64_t rows,
                      ArrayRef<std::string> arguments) {
  int64_t classes = loss.getLogits().getType().getShape().back();
  emitter.launch(
      name, rows, rowBlockSize, arguments,
      // The gradient kernel's 8 FLOPs an element, and the loss's
      // 3 a row; the logits are read once from memory at best
      // (two passes over a row: the second hits the cache where
      // the rows in flight fit it).
      KernelCost()
          .reads(grad.getGrad())
          .readsBytes(rows * classes * elementBytes(loss.getLogits()))
          .readsBytes(rows * elementBytes(loss.getTargets()))
          .readsBytes(4)
          .writesBytes(2 * rows * 4)
          .writesBytes(rows * classes * elementBytes(grad.getResult()))
          .flopsPer(rows * classes, 8)
          .flopsPer(rows, 3));
}

/// A `classifier` group: the targets' count, then the classifier kernel,
/// then the mean. The losses and gradients equal the unfused kernels' bit
/// for bit.
void emitClassifier(StepEmitter &emitter, const Step &step,
                    CrossEntropyOp loss) {
  auto grad = cast<CrossEntropyGradOp>(step.ops.back());
  auto logits = loss.getLogits().getType();
  int64_t classes = logits.getShape().back();
  int64_t rows = logits.getNumElements() / classes;
  std::string rowLoss = emitter.scratchPointer(step, "float", 0, rows * 4);
  std::string rowValid =
      emitter.scratchPointer(step, "float", rows * 4, rows * 4);
  std::string count = emitter.scratchPointer(step, "float", 2 * rows * 4, 4);
  emitTargetCount(emitter, loss.getTargets(), loss.getIgnoreIndex(), rows,
                  count);
  std::string name = addClassifierKernel(emitter, loss, grad);
  launchClassifier(emitter, name, loss, grad, rows,
                   {emitter.constPointer(grad.getGrad()),
                    emitter.constPointer(loss.getLogits()),
                    emitter.constPointer(loss.getTargets()), count, rowLoss,
                    rowValid, emitter.pointer(grad.getResult()),
                    "ctx->index_error"});
  emitLossMean(emitter, loss, rows, rowLoss, rowValid);
}

/// `pointer` advanced by `elements` elements (of the type it points to).
std::string advanced(const std::string &pointer, int64_t elements) {
  if (elements == 0)
    return pointer;
  return "(" + pointer + " + " + std::to_string(elements) + "LL)";
}

} // namespace

LogicalResult mlir::mpc::emitLinearClassifier(StepEmitter &emitter,
                                              const Step &step) {
  LinearClassifierOps ops = linearClassifierOps(step);
  int64_t chunkRows = classifierChunkRows(step);
  ClassifierScratch scratch = classifierScratch(step);
  std::string rowLoss = emitter.scratchPointer(step, "float", scratch.rowLoss);
  std::string rowValid =
      emitter.scratchPointer(step, "float", scratch.rowValid);
  std::string count = emitter.scratchPointer(step, "float", scratch.count);
  std::string chunk = emitter.scratchPointer(
      step, elementCType(ops.grad.getResult()), scratch.chunk);
  // A half dW is summed in f32 over the chunks, then rounded once.
  int64_t dwElements =
      cast<RankedTensorType>(ops.weightGradientResult.getType())
          .getNumElements();
  std::string accumulator;
  if (scratch.accumulatorBytes > 0)
    accumulator = emitter.scratchPointer(step, "float", scratch.accumulator);
  emitTargetCount(emitter, ops.loss.getTargets(), ops.loss.getIgnoreIndex(),
                  ops.rows, count);
  std::string kernel = addClassifierKernel(emitter, ops.loss, ops.grad);
  const char *logitDtype = gemmDtype(ops.grad.getResult());
  Value input = ops.linear.getInput(), weight = ops.linear.getWeight();
  Value weightInput = ops.weightGradient.getRhs();
  Value inputGradient = ops.inputGradient.getResult();
  for (int64_t first = 0; first < ops.rows; first += chunkRows) {
    int64_t rows = std::min(chunkRows, ops.rows - first);
    // The chunk's logits: its rows of X times Wᵀ.
    GemmCall logits;
    logits.aType = gemmDtype(input);
    logits.bType = gemmDtype(weight);
    logits.cType = logitDtype;
    logits.transB = true;
    logits.m = rows;
    logits.n = ops.classes;
    logits.k = ops.width;
    logits.a = advanced(emitter.constPointer(input), first * ops.width);
    logits.b = emitter.constPointer(weight);
    logits.c = chunk;
    logits.lda = logits.ldb = ops.width;
    logits.ldc = ops.classes;
    emitGemmCall(emitter, logits);
    launchClassifier(
        emitter, kernel, ops.loss, ops.grad, rows,
        {emitter.constPointer(ops.grad.getGrad()), "(const " + chunk.substr(1),
         advanced(emitter.constPointer(ops.loss.getTargets()), first), count,
         advanced(rowLoss, first), advanced(rowValid, first), chunk,
         "ctx->index_error"});
    // Its rows of dX = dlogits · W.
    GemmCall dx;
    dx.aType = logitDtype;
    dx.bType = gemmDtype(weight);
    dx.cType = gemmDtype(inputGradient);
    dx.m = rows;
    dx.n = ops.width;
    dx.k = ops.classes;
    dx.a = "(const " + chunk.substr(1);
    dx.b = emitter.constPointer(weight);
    dx.c = advanced(emitter.pointer(inputGradient), first * ops.width);
    dx.lda = ops.classes;
    dx.ldb = dx.ldc = ops.width;
    emitGemmCall(emitter, dx);
    // dW += dlogitsᵀ · X over the chunk's rows (written by the first).
    GemmCall dw;
    dw.aType = logitDtype;
    dw.bType = gemmDtype(weightInput);
    dw.cType =
        accumulator.empty() ? gemmDtype(ops.weightGradientResult) : "MPC_F32";
    dw.transA = true;
    dw.m = ops.classes;
    dw.n = ops.width;
    dw.k = rows;
    dw.a = "(const " + chunk.substr(1);
    dw.b = advanced(emitter.constPointer(weightInput), first * ops.width);
    dw.c = accumulator.empty() ? emitter.pointer(ops.weightGradientResult)
                               : accumulator;
    dw.lda = ops.classes;
    dw.ldb = dw.ldc = ops.width;
    dw.accumulate = first > 0;
    emitGemmCall(emitter, dw);
  }
  if (!accumulator.empty()) {
    std::string name = emitter.kernelName("classifier_weight_gradient");
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const float *__restrict__ sum, {1} "
        "*__restrict__ dw) {{\n"
        "  MPC_FOR_EACH(i, {2}LL) mpc_store(dw + i, sum[i]);\n"
        "}\n",
        name, elementCType(ops.weightGradientResult), dwElements));
    emitter.launch(name, elementwiseGrid(dwElements), 256,
                   {"(const " + accumulator.substr(1),
                    emitter.pointer(ops.weightGradientResult)},
                   KernelCost()
                       .readsBytes(dwElements * 4)
                       .writes(ops.weightGradientResult));
  }
  emitLossMean(emitter, ops.loss, ops.rows, rowLoss, rowValid);
  return success();
}

namespace {

/// Mean squared error in two deterministic stages: each of `mseLossBlocks`
/// blocks sums the squared differences of one contiguous chunk into
/// scratch, then one block adds the partial sums in block order and divides
/// by the element count.
void emitMseLoss(StepEmitter &emitter, const Step &step, MseLossOp op) {
  int64_t n = op.getInput().getType().getNumElements();
  int64_t blocks = mseLossBlocks(op);
  int64_t chunk = (n + blocks - 1) / blocks;
  std::string partials = emitter.scratchPointer(step, "float");
  std::string name = emitter.kernelName("mse_loss_partials");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ input, const {1} "
      "*__restrict__ target, float *__restrict__ partials) {{\n"
      "  long long begin = (long long)blockIdx.x * {2}LL;\n"
      "  long long count = {3}LL - begin < {2}LL ? {3}LL - begin : {2}LL;\n"
      "  mpc_sum s = 0.0f;\n"
      "  MPC_FOR_THREAD(j, count) {{\n"
      "    float d = mpc_load(input + begin + j) - "
      "mpc_load(target + begin + j);\n"
      "    s += d * d;\n"
      "  }\n"
      "  s = mpc_block_reduce_sum(s);\n"
      "  if (threadIdx.x == 0) partials[blockIdx.x] = s;\n"
      "}\n",
      name, elementCType(op.getInput()), chunk, n));
  emitter.launch(name, blocks, rowBlockSize,
                 {emitter.constPointer(op.getInput()),
                  emitter.constPointer(op.getTarget()), partials},
                 // a difference, a square and an add an element
                 KernelCost()
                     .reads(op.getInput())
                     .reads(op.getTarget())
                     .writesBytes(blocks * 4)
                     .flopsPer(n, 3));
  std::string meanName = emitter.kernelName("mse_loss_mean");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const float *__restrict__ partials, float "
      "*__restrict__ loss) {{\n"
      "  mpc_sum total = 0.0f;\n"
      "  MPC_FOR_THREAD(b, {1}LL) total += partials[b];\n"
      "  total = mpc_block_reduce_sum(total);\n"
      "  if (threadIdx.x == 0) loss[0] = total / {2};\n"
      "}\n",
      meanName, blocks, floatLiteral(static_cast<double>(n))));
  emitter.launch(meanName, 1, rowBlockSize,
                 {partials, emitter.pointer(op.getResult())},
                 KernelCost()
                     .readsBytes(blocks * 4)
                     .writes(op.getResult())
                     .flopsPer(blocks, 1)
                     .flopsPer(1, 1));
}

/// Reductions of at most this many elements an output run on one thread
/// each (a block would leave most of its threads idle).
constexpr int64_t threadReductionLimit = 32;

/// reduce_sum / reduce_mean / reduce_max: one block per output element, its
/// threads striding over the reduced elements; for short reductions (the
/// bias of a broadcast add: a few images), one thread per output; for long
/// ones with few outputs, reductionSplits blocks an output, each over a
/// slice, then one thread an output combining the slices' results in
/// order (deterministic).
void emitReduce(StepEmitter &emitter, const Step &step, Operation *op,
                Value input, Value output, ArrayRef<int64_t> dims,
                StringRef kind) {
  auto type = cast<RankedTensorType>(input.getType());
  SmallVector<int64_t> kept;
  int64_t reduced = 1;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (llvm::is_contained(dims, d))
      reduced *= type.getDimSize(d);
    else
      kept.push_back(d);
  }
  SmallVector<int64_t> sortedDims(dims);
  llvm::sort(sortedDims);
  int64_t outputs = type.getNumElements() / reduced;
  bool isMax = kind == "max";
  std::string finish = kind == "mean"
                           ? llvm::formatv("acc / {0}.0f", reduced).str()
                           : std::string("acc");
  int64_t splits = reductionSplits(outputs, reduced);
  if (splits > 1) {
    int64_t slice = (reduced + splits - 1) / splits;
    // Reduced dims that are the trailing ones are contiguous: the reduced
    // index is the offset (a loss summed over a whole tensor).
    bool trailing = true;
    for (auto [i, d] : llvm::enumerate(sortedDims))
      trailing &= d == type.getRank() - (int64_t)sortedDims.size() + (int64_t)i;
    std::string partialName =
        emitter.kernelName(("reduce_" + kind + "_slices").str());
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const {1} *__restrict__ in, float *__restrict__ "
        "partial) {{\n"
        "  long long begin = blockIdx.x % {2}LL * {3}LL;\n"
        "  long long count = {4}LL - begin < {3}LL ? {4}LL - begin : {3}LL;\n"
        "  long long base = 0;\n{5}"
        "  {6} acc = {7};\n"
        "  MPC_FOR_THREAD(u, count) {{\n"
        "    long long t = begin + u, offset = base;\n{8}"
        "    float v = mpc_load(in + offset);\n"
        "    {9}\n"
        "  }\n"
        "  acc = {10}(acc);\n"
        "  if (threadIdx.x == 0) partial[blockIdx.x] = acc;\n"
        "}\n",
        partialName, elementCType(input), splits, slice, reduced,
        // The block's output: blockIdx.x / splits.
        offsetCode("base", llvm::formatv("blockIdx.x / {0}LL", splits).str(),
                   type.getShape(), kept),
        isMax ? "float" : "mpc_sum", isMax ? "-INFINITY" : "0.0f",
        trailing ? std::string("    offset += t;\n")
                 : offsetCode("offset", "t", type.getShape(), sortedDims),
        isMax ? "acc = mpc_max(acc, v);" : "acc += v;",
        isMax ? "mpc_block_reduce_max" : "mpc_block_reduce_sum"));
    std::string partial = emitter.scratchPointer(step, "float");
    emitter.launch(partialName, outputs * splits, rowBlockSize,
                   {emitter.constPointer(input), partial},
                   KernelCost().reads(input).flopsPer(
                       isMax ? 0 : type.getNumElements(), 1));
    std::string name = emitter.kernelName(("reduce_" + kind).str());
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const float *__restrict__ partial, {1} "
        "*__restrict__ out) {{\n"
        "  MPC_FOR_EACH(o, {2}LL) {{\n"
        "    {3} acc = {4};\n"
        "    for (long long s = 0; s < {5}LL; ++s) {{\n"
        "      float v = partial[o * {5}LL + s];\n"
        "      {6}\n"
        "    }\n"
        "    mpc_store(out + o, {7});\n"
        "  }\n"
        "}\n",
        name, elementCType(output), outputs, isMax ? "float" : "mpc_sum",
        isMax ? "-INFINITY" : "0.0f", splits,
        isMax ? "acc = mpc_max(acc, v);" : "acc += v;", finish));
    emitter.launch(name, elementwiseGrid(outputs), rowBlockSize,
                   {partial, emitter.pointer(output)},
                   KernelCost().writes(output).flopsPer(
                       outputs * splits + (kind == "mean" ? outputs : 0), 1));
    return;
  }
  std::string name = emitter.kernelName(("reduce_" + kind).str());
  // Output `o` on one thread (its elements in order), or on a block (the
  // threads' strided partial sums combined). A thread takes one output a
  // tile of a block's threads, its loads unrolled so that they are in
  // flight together: in MPC_FOR_EACH's tiles of 4096 each thread summed 16
  // outputs one after another, 32 rounds of DRAM latency for GPT-2 small's
  // position-embedding gradient (8 elements an output) on 192 blocks, 3.1x
  // its bound in the model.
  bool perThread = reduced <= threadReductionLimit;
  std::string kernel =
      std::string("__global__ void {0}(const {1} *__restrict__ in, {2} "
                  "*__restrict__ out) {{\n") +
      (perThread ? "  MPC_FOR_EACH_TILED(o, {11}LL, {12}LL) {{\n"
                 : "  long long o = blockIdx.x;\n  {{\n") +
      "  long long base = 0;\n{3}"
      "  {10} acc = {4};\n" +
      (perThread ? "  MPC_UNROLL for (long long t = 0; t < {5}LL; ++t) {{\n"
                 : "  MPC_FOR_THREAD(t, {5}LL) {{\n") +
      "    long long offset = base;\n{6}"
      "    float v = mpc_load(in + offset);\n"
      "    {7}\n"
      "  }\n" +
      (perThread ? "  mpc_store(out + o, {9});\n"
                 : "  acc = {8}(acc);\n"
                   "  if (threadIdx.x == 0) mpc_store(out + o, {9});\n") +
      "  }\n"
      "}\n";
  emitter.addKernel(llvm::formatv(
      kernel.c_str(), name, elementCType(input), elementCType(output),
      offsetCode("base", "o", type.getShape(), kept),
      isMax ? "-INFINITY" : "0.0f", reduced,
      offsetCode("offset", "t", type.getShape(), sortedDims),
      // NaN wins a maximum, as torch.amax.
      isMax ? "acc = mpc_max(acc, v);" : "acc += v;",
      isMax ? "mpc_block_reduce_max" : "mpc_block_reduce_sum", finish,
      isMax ? "float" : "mpc_sum", outputs, rowBlockSize));
  emitter.launch(name, perThread ? tiledGrid(outputs, rowBlockSize) : outputs,
                 rowBlockSize,
                 {emitter.constPointer(input), emitter.pointer(output)},
                 // One add an element for sums and means (a divide per output
                 // for means); a maximum only compares.
                 KernelCost()
                     .reads(input)
                     .writes(output)
                     .flopsPer(kind == "max" ? 0 : type.getNumElements(), 1)
                     .flopsPer(kind == "mean" ? outputs : 0, 1));
}

/// How a row kernel's threads share out its rows: a warp a row for rows
/// that fit a warp's registers, else a block a row. Strings of the
/// kernel's source.
struct RowShape {
  /// Opens the row `r` (a loop over the block's rows, or one row) and
  /// closes it.
  std::string open, close;
  /// Leaves the row early.
  std::string exit;
  /// The loop over the row's elements `j` (MPC_FOR_LANE or MPC_FOR_THREAD).
  std::string forElements;
  /// Where `registers` is not 0: the condition under which the sharers of
  /// a row hold it all (the launch's threads; never on the cpu target's one
  /// thread), and the unrolled loop over their elements `j`, `k` counting
  /// them.
  std::string holds, forHeld;
  /// Combines the sharers' sums.
  std::string reduce;
  /// The index of element `j` of row `r` in the unrolled loops (`k` the
  /// step; a warp's: warpRowUnrolledIndex).
  std::string unrolledIndex;
  /// Elements each sharer holds in registers (0 where none).
  int64_t registers;
  int64_t grid;
  /// Registers a thread may use where it holds its elements
  /// (limitRegisters).
  int registerBudget;
};

/// Registers a thread of a layer norm a block a row may use while it holds
/// `elements` of the row: ptxas (sm_90) used 42 for 7 (1,600 wide), 56
/// for 12 and 65 for 16 (4,096 wide: 4 bytes spilled at 64).
static int blockRowRegisterBudget(int64_t elements) {
  return elements <= 12 ? 64 : 80;
}

static RowShape rowShape(int64_t rows, int64_t width) {
  int64_t warpRegisters = (width + 31) / 32;
  if (warpRegisters <= maxWarpRowRegisters)
    return {llvm::formatv("  MPC_FOR_WARP_ROW(r, {0}LL, {1}) {{\n", rows,
                          warpRowsPerBlock)
                .str(),
            "  }\n",
            "continue;",
            "MPC_FOR_LANE",
            llvm::formatv("mpc_row_lanes() * {0}LL >= {1}LL", warpRegisters,
                          width)
                .str(),
            llvm::formatv("MPC_FOR_LANE_UNROLLED(k, j, {0}LL, {1})", width,
                          warpRegisters)
                .str(),
            "mpc_row_reduce_sum",
            warpRowUnrolledIndex(width),
            warpRegisters,
            (rows + warpRowsPerBlock - 1) / warpRowsPerBlock,
            warpRowRegisterBudget};
  int64_t blockRegisters = (width + rowBlockSize - 1) / rowBlockSize;
  return {"  {\n  long long r = blockIdx.x;\n",
          "  }\n",
          "return;",
          "MPC_FOR_THREAD",
          llvm::formatv("blockDim.x == {0}", rowBlockSize).str(),
          llvm::formatv("MPC_FOR_THREAD_UNROLLED_BY(k, j, {0}LL, {1}, {2})",
                        width, blockRegisters, rowBlockSize)
              .str(),
          "mpc_block_reduce_sum",
          llvm::formatv("r * {0}LL + j", width).str(),
          blockRegisters <= maxRowRegisters ? blockRegisters : 0,
          rows,
          blockRowRegisterBudget(blockRegisters)};
}

/// layer_norm over rows of `width` elements: mean, variance, then the
/// outputs, a warp a row (a block a row where a row is too wide for a
/// warp's registers). In a `row` group the input is computed by the group's
/// prologue (a residual sum), which the first pass also stores when it is
/// read later.
///
/// Each thread keeps its elements of the row in registers from the first
/// pass (indexed by unrolled constants), so the row is read once, not three
/// times. Where there are fewer threads to a row than that needs (the cpu
/// target's one) the passes read it again, in the same order, to the same
/// bits. The emulator's counters showed the three reads (GPT-2 small: 3.8
/// GB of L1 sectors for 1.5 GB of rows) and the loads each thread waits on
/// behind them; ncu then showed a block a row issue-bound (MPC_FOR_WARP_ROW).
LogicalResult emitLayerNorm(StepEmitter &emitter, const Step &step,
                            LayerNormOp op) {
  int64_t width = op.getGamma().getType().getNumElements();
  int64_t rows = op.getInput().getType().getNumElements() / width;
  std::string name = emitter.kernelName("layer_norm");
  FailureOr<RowAccess> x =
      rowInput(emitter, step, op, op.getInput(), "x", name);
  if (failed(x))
    return failure();
  std::string at = llvm::formatv("r * {0}LL + j", width).str();
  std::string element = x->load(at);
  RowShape shape = rowShape(rows, width);
  auto keep = [&](StringRef value, StringRef index) {
    return x->stored ? "mpc_store(" + *x->stored + " + " + index.str() + ", " +
                           value.str() + "); "
                     : std::string();
  };
  std::string eps = floatLiteral(op.getEps().convertToDouble());
  // A current-scaling quantization of y after it in the group: the kernel
  // finds y's amax as it stores it, each block's into the step's scratch.
  QuantizeOp quantize = storedAmaxQuantize(step);
  // A delayed-scaling quantization of y after it in the group: the kernel
  // casts y to FP8 with the table's scale (and stores y only where it is
  // read elsewhere), raising the table's amax and saturation count.
  QuantizeOp cast = rowCastQuantize(step);
  bool storesY = !cast || emitter.getPlan().isMaterialised(op.getResult());
  auto storeY = [&](StringRef index, StringRef value) {
    if (cast)
      return delayedCastStore(cast, "q", storesY ? "y" : "", index, value,
                              "fp8_amax", "fp8_saturated");
    return quantize
               ? llvm::formatv("mpc_store_amax(y + {0}, {1}, amax);", index,
                               value)
                     .str()
               : llvm::formatv("mpc_store(y + {0}, {1});", index, value).str();
  };
  std::string outputParameters =
      storesY
          ? llvm::formatv(", {0} *__restrict__ y", elementCType(op.getResult()))
                .str()
          : std::string();
  std::string amaxDeclaration, amaxPartials;
  if (quantize) {
    outputParameters += amaxPartialsParameter;
    amaxDeclaration = threadAmaxDeclaration;
    amaxPartials = blockAmaxPartial("  ");
    // A block a row leaves early: with its amax written.
    if (shape.exit == "return;")
      shape.exit =
          StringRef(blockAmaxPartial("    ")).ltrim().str() + "    return;";
  }
  if (cast) {
    outputParameters +=
        llvm::formatv(", {0} *__restrict__ q, float *__restrict__ scale_inv, "
                      "float *__restrict__ table",
                      elementCType(cast.getResult()))
            .str();
    amaxDeclaration =
        delayedScaleCode(cast, "fp8_amax", "fp8_saturated") +
        "  if (blockIdx.x == 0 && threadIdx.x == 0) scale_inv[0] = 1.0f / "
        "scale;\n";
    amaxPartials = delayedTableUpdate(cast, "fp8_amax", "fp8_saturated");
    if (shape.exit == "return;")
      shape.exit = StringRef(indentLines(amaxPartials, "  ")).ltrim().str() +
                   "    return;";
  }
  std::string inRegisters;
  if (shape.registers)
    inRegisters = llvm::formatv(
        "  if ({5}) {{\n"
        "    // The thread's elements of the row, read once.\n"
        "    float v[{0}];\n"
        "    {6} {{\n"
        "      v[k] = {2};\n"
        "      {3}sum += v[k];\n"
        "    }\n"
        "    float mean = {7}(sum) / {1}.0f;\n"
        "    mpc_sum squares = 0.0f;\n"
        "    {6} {{\n"
        "      float d = v[k] - mean;\n"
        "      squares += d * d;\n"
        "    }\n"
        "    float rstd = mpc_rsqrt({7}(squares) / {1}.0f + {4});\n"
        "    {6}\n"
        "      {9}\n"
        "    {8}\n"
        "  }\n",
        shape.registers, width, x->load(shape.unrolledIndex),
        keep("v[k]", shape.unrolledIndex), eps, shape.holds, shape.forHeld,
        shape.reduce, shape.exit,
        storeY(shape.unrolledIndex, "(v[k] - mean) * rstd * mpc_load(gamma + "
                                    "j) + mpc_load(beta + j)"));
  emitter.addKernel(llvm::formatv(
      "{7}__global__ void {0}({1}, const {2} *__restrict__ gamma, const {2} "
      "*__restrict__ beta{14}) {{\n"
      "{16}{10}"
      "  mpc_sum sum = 0.0f;\n"
      "{9}"
      "  {11}(j, {4}LL) {{ float v = {6}; {8}sum += v; }\n"
      "  float mean = {12}(sum) / {4}.0f;\n"
      "  mpc_sum squares = 0.0f;\n"
      "  {11}(j, {4}LL) {{ float d = {6} - mean; squares += d * d; }\n"
      "  float rstd = mpc_rsqrt({12}(squares) / {4}.0f + {5});\n"
      "  {11}(j, {4}LL) {17}\n"
      "{13}{15}"
      "}\n",
      name, llvm::join(x->parameters, ", "), elementCType(op.getGamma()),
      elementCType(op.getResult()), width, eps, element, x->functions(),
      keep("v", at), inRegisters, shape.open, shape.forElements, shape.reduce,
      shape.close, outputParameters, amaxPartials, amaxDeclaration,
      storeY(at, "(" + element +
                     " - mean) * rstd * mpc_load(gamma + j) + "
                     "mpc_load(beta + j)")));
  SmallVector<std::string> arguments(x->arguments);
  arguments.append({emitter.constPointer(op.getGamma()),
                    emitter.constPointer(op.getBeta())});
  if (storesY)
    arguments.push_back(emitter.pointer(op.getResult()));
  if (quantize)
    arguments.push_back(emitter.scratchPointer(
        step, "float", quantizeScratch(step, quantize).amaxOffset,
        shape.grid * 4));
  // Mean, variance, then (x - mean) * rstd * gamma + beta: 8 FLOPs an
  // element and 5 a row.
  KernelCost cost = KernelCost()
                        .reads(op.getGamma())
                        .reads(op.getBeta())
                        .flopsPer(rows * width, 8)
                        .flopsPer(rows, 5);
  if (storesY)
    cost.writes(op.getResult());
  if (cast) {
    arguments.append({emitter.pointer(cast.getResult()),
                      emitter.pointer(cast.getScaleInv()),
                      emitter.pointer(cast.getScaling())});
    // The cast (a scale and a clip an element), the scale's inverse, and
    // each block's amax and count raised into the table.
    cost.writes(cast.getResult())
        .writes(cast.getScaleInv())
        .readsBytes(shape.grid * 4)
        .writesBytes(shape.grid * 8)
        .flopsPer(rows * width, 3);
  }
  if (x->fused)
    cost += x->fused->cost;
  else
    cost.reads(op.getInput());
  if (quantize)
    cost.writesBytes(shape.grid * 4).flopsPer(rows * width, 1);
  emitter.launch(name, shape.grid, rowBlockSize, arguments, cost);
  if (shape.registers)
    emitter.limitRegisters(name, shape.registerBudget);
  return success();
}

/// rms_norm over rows of `width` elements: the mean square, then the
/// outputs, one block a row.
void emitRmsNorm(StepEmitter &emitter, RmsNormOp op) {
  int64_t width = op.getGamma().getType().getNumElements();
  int64_t rows = op.getInput().getType().getNumElements() / width;
  std::string name = emitter.kernelName("rms_norm");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ x, const {2} "
      "*__restrict__ gamma, {1} *__restrict__ y) {{\n"
      "  const {1} *xr = x + (long long)blockIdx.x * {3}LL;\n"
      "  {1} *yr = y + (long long)blockIdx.x * {3}LL;\n"
      "  mpc_sum squares = 0.0f;\n"
      "  MPC_FOR_THREAD(j, {3}LL) {{ float v = mpc_load(xr + j); "
      "squares += v * v; }\n"
      "  float rstd = mpc_rsqrt(mpc_block_reduce_sum(squares) / {3}.0f + "
      "{4});\n"
      "  MPC_FOR_THREAD(j, {3}LL) mpc_store(yr + j, mpc_load(xr + j) * rstd "
      "* mpc_load(gamma + j));\n"
      "}\n",
      name, elementCType(op.getInput()), elementCType(op.getGamma()), width,
      floatLiteral(op.getEps().convertToDouble())));
  // The mean square (2 FLOPs an element, 3 a row), then x * rstd * gamma
  // (2 an element).
  emitter.launch(name, rows, rowBlockSize,
                 {emitter.constPointer(op.getInput()),
                  emitter.constPointer(op.getGamma()),
                  emitter.pointer(op.getResult())},
                 KernelCost()
                     .reads(op.getInput())
                     .reads(op.getGamma())
                     .writes(op.getResult())
                     .flopsPer(rows * width, 4)
                     .flopsPer(rows, 3));
}

/// The statements of a batch norm's statistics kernel that write channel
/// c's `mean` and `var` (biased, over `count` elements) into `stats` and,
/// when the step applies updates, fold them into the running statistics.
std::string storeBatchStatistics(int64_t channels, int64_t count, StringRef eps,
                                 StringRef momentum) {
  return llvm::formatv(
      "stats[c] = mean;\n"
      "stats[{0}LL + c] = mpc_rsqrt(var + {1});\n"
      "if (update) {{\n"
      "  // PyTorch keeps the unbiased variance in the running average.\n"
      "  mpc_store(running_mean + c, (1.0f - {2}) * mpc_load(running_mean + "
      "c) + {2} * mean);\n"
      "  mpc_store(running_var + c, (1.0f - {2}) * mpc_load(running_var + c) "
      "+ {2} * var * {3}.0f / {4}.0f);\n"
      "}\n",
      channels, eps, momentum, count, std::max<int64_t>(count - 1, 1));
}

/// The max pooling after a batch norm (and the loop ops applied to its
/// result, its ReLU) in one row group: the pool's loads compute what the
/// norm's apply kernel would have stored, from x, the channel's `stats`,
/// gamma and beta, rounded to the type it would have stored, and only
/// the pooled values and their window positions are written. The pool's
/// taps read x where they read the stored output (a 3x3 window of stride
/// 2 evaluates an element 2.25 times, in registers).
LogicalResult emitNormalisingPool(StepEmitter &emitter, const Step &step,
                                  BatchNormOp op, MaxPool2dWithIndicesOp pool,
                                  StringRef stats) {
  auto type = op.getInput().getType();
  int64_t channels = type.getDimSize(1);
  int64_t plane = type.getDimSize(2) * type.getDimSize(3);
  std::string name = emitter.kernelName("batch_norm_max_pool2d");
  SmallVector<Operation *> epilogue;
  for (Operation *member : step.ops)
    if (member != op && member != pool)
      epilogue.push_back(member);
  Value pooled = pool.getInput();
  std::string normalised =
      "(mpc_load(src + {0}) - mean) * rstd * g + b";
  std::optional<ElementFunction> fused;
  if (!epilogue.empty()) {
    FailureOr<ElementFunction> function = buildElementFunction(
        epilogue, pooled, op.getResult(), emitter, name + "_y", "y_");
    if (failed(function))
      return failure();
    fused = std::move(*function);
    normalised = fused->call(
        ("plane * " + std::to_string(plane) + "LL + ({0})"), normalised);
  }
  PoolInput input;
  input.setup = llvm::formatv("    long long c = plane % {0}LL;\n"
                              "    float mean = stats[c], rstd = stats[{0}LL + "
                              "c], g = mpc_load(gamma + c), b = "
                              "mpc_load(beta + c);\n",
                              channels)
                    .str();
  input.load =
      "mpc_rounded<" + elementCType(pooled) + ">(" + normalised + ")";
  std::string param = elementCType(op.getGamma());
  emitMaxPoolWithIndices(
      emitter, pool, name, op.getInput(), input,
      {"const " + param + " *__restrict__ gamma",
       "const " + param + " *__restrict__ beta",
       "const float *__restrict__ stats"},
      {emitter.constPointer(op.getGamma()), emitter.constPointer(op.getBeta()),
       stats.str()},
      fused ? &*fused : nullptr,
      // (x - mean) * rstd * gamma + beta, an element's every evaluation.
      KernelCost()
          .reads(op.getGamma())
          .reads(op.getBeta())
          .readsBytes(2 * channels * 4)
          .flopsPer(type.getNumElements(), 4));
  return success();
}

/// What a batch norm in training that reads x once costs (the one-kernel
/// and the cluster forms): mean and variance (4 FLOPs an element), then
/// (x - mean) * rstd * gamma + beta (4); the running statistics read and
/// written once a channel, the batch's mean and rstd stored, y through
/// the epilogue.
KernelCost onePassBatchNormCost(BatchNormOp op, const RowAccess &y) {
  auto type = op.getInput().getType();
  int64_t channels = type.getDimSize(1);
  KernelCost cost = KernelCost()
                        .reads(op.getInput())
                        .reads(op.getGamma())
                        .reads(op.getBeta())
                        .reads(op.getRunningMean())
                        .reads(op.getRunningVar())
                        .writes(op.getRunningMean())
                        .writes(op.getRunningVar())
                        .writesBytes(2 * channels * 4)
                        .writes(y.written)
                        .flopsPer(type.getNumElements(), 8)
                        .flopsPer(channels, 12);
  if (y.fused)
    cost += y.fused->cost;
  return cost;
}

/// batch_norm in training with each channel sliced over `splits` blocks,
/// on GPUs with thread-block clusters: the channel's blocks are one
/// cluster. Each block holds its slice in registers (a half input in
/// pairs), sums it as batch_norm_partials does and stores its partials;
/// after the cluster's barrier every block combines the channel's partials
/// as batch_norm_stats does, and normalises its slice from its registers.
/// The same values as the three sliced kernels, bit for bit, from one
/// kernel that reads x once (the sliced forms read it twice). False where a
/// slice does not fit a block's registers: the sliced kernels run then.
FailureOr<bool> emitClusterBatchNorm(StepEmitter &emitter, const Step &step,
                                     BatchNormOp op, StringRef stats,
                                     int64_t splits) {
  auto type = op.getInput().getType();
  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1);
  int64_t spatial = type.getNumElements() / (batch * channels);
  int64_t count = batch * spatial;
  int64_t slice = (count + splits - 1) / splits;
  int block = batchNormBlockSize(slice);
  int64_t registers = (slice + block - 1) / block;
  int64_t pairRegisters = (slice / 2 + block - 1) / block;
  // The partials kernel's choice: pairs where they fit, else floats.
  bool inPairs = elementBytes(op.getInput()) == 2 && spatial % 2 == 0 &&
                 slice % 2 == 0 && pairRegisters <= maxChannelRegisters;
  if (!inPairs && registers > maxChannelRegisters)
    return false;
  std::string eps = floatLiteral(op.getEps().convertToDouble());
  std::string momentum = floatLiteral(op.getMomentum().convertToDouble());
  std::string element = elementCType(op.getInput());
  std::string param = elementCType(op.getGamma());
  std::string running = elementCType(op.getRunningMean());
  std::string name = emitter.kernelName("batch_norm_cluster");
  FailureOr<RowAccess> y =
      rowOutput(emitter, step, op, op.getResult(), "y", name);
  if (failed(y))
    return failure();
  // Where the sliced form keeps them (Codegen.cpp's scratchBytes).
  std::string partials =
      emitter.scratchPointer(step, "float", op.getStats() ? 0 : 2 * channels * 4,
                             2 * channels * splits * 4);
  // Element t of the channel (from its first) is at xc + offset(t).
  std::string offset = llvm::formatv("t / {0}LL * {1}LL + t % {0}LL", spatial,
                                     channels * spatial);
  std::string heldSums, heldApply;
  if (inPairs) {
    auto e = [&](int k) {
      return llvm::formatv("mpc_pair_element<{0}>(v[k], {1})", element, k)
          .str();
    };
    heldSums = llvm::formatv(
        "    MPC_FOR_THREAD_UNROLLED(k, p, (end - begin) / 2, {0}) {{\n"
        "      long long t = begin + 2 * p;\n"
        "      v[k] = mpc_load_pair(xc + {1});\n"
        "      sum += {2};\n"
        "      sum += {3};\n"
        "    }\n"
        "    total = mpc_block_reduce_sum(sum);\n"
        "    float mean = total / (float)(end - begin);\n"
        "    mpc_sum squares = 0.0f;\n"
        "    MPC_FOR_THREAD_UNROLLED(k, p, (end - begin) / 2, {0}) {{\n"
        "      squares += mpc_square({2} - mean);\n"
        "      squares += mpc_square({3} - mean);\n"
        "    }\n"
        "    m2 = mpc_block_reduce_sum(squares);\n",
        pairRegisters, offset, e(0), e(1));
    heldApply = llvm::formatv(
        "    MPC_FOR_THREAD_UNROLLED(k, p, (end - begin) / 2, {0}) {{\n"
        "      long long t = begin + 2 * p;\n"
        "      long long i = c * {1}LL + {2};\n"
        "      float normalised = ({3} - mean) * rstd;\n"
        "      {5}\n"
        "      normalised = ({4} - mean) * rstd;\n"
        "      {6}\n"
        "    }\n",
        pairRegisters, spatial, offset, e(0), e(1),
        y->store("i", "normalised * g + b"),
        y->store("i + 1", "normalised * g + b"));
  } else {
    heldSums = llvm::formatv(
        "    MPC_FOR_THREAD_UNROLLED(k, j, end - begin, {0}) {{\n"
        "      long long t = begin + j;\n"
        "      v[k] = mpc_load(xc + {1});\n"
        "      sum += v[k];\n"
        "    }\n"
        "    total = mpc_block_reduce_sum(sum);\n"
        "    float mean = total / (float)(end - begin);\n"
        "    mpc_sum squares = 0.0f;\n"
        "    MPC_FOR_THREAD_UNROLLED(k, j, end - begin, {0}) squares += "
        "mpc_square(v[k] - mean);\n"
        "    m2 = mpc_block_reduce_sum(squares);\n",
        registers, offset);
    heldApply = llvm::formatv(
        "    MPC_FOR_THREAD_UNROLLED(k, j, end - begin, {0}) {{\n"
        "      long long t = begin + j;\n"
        "      long long i = c * {1}LL + {2};\n"
        "      float normalised = (v[k] - mean) * rstd;\n"
        "      {3}\n"
        "    }\n",
        registers, spatial, offset, y->store("i", "normalised * g + b"));
  }
  emitter.addKernel(llvm::formatv(
      "{0}__global__ void {1}(const {2} *__restrict__ x, const {3} "
      "*__restrict__ gamma, const {3} *__restrict__ beta, {4} "
      "*__restrict__ running_mean, {4} *__restrict__ running_var, float "
      "*__restrict__ stats, int update, float *__restrict__ partials, {5}) "
      "{{\n"
      "  long long c = blockIdx.x / {6}LL, s = blockIdx.x % {6}LL;\n"
      "  const {2} *xc = x + c * {7}LL;\n"
      "  long long begin = s * {8}LL;\n"
      "  long long end = begin + {8}LL < {9}LL ? begin + {8}LL : {9}LL;\n"
      // The block's threads hold its slice (an emulated block of fewer
      // threads reads it again).
      "  bool held = blockDim.x * {10}LL >= (end - begin){11};\n"
      "  {12} v[{10}];\n"
      "  float total, m2;\n"
      "  if (held) {{\n"
      "    mpc_sum sum = 0.0f;\n"
      "{13}"
      "  } else {{\n"
      "    mpc_sum sum = 0.0f;\n"
      "    MPC_SUM_CHANNEL_SLICE(begin, end, {7}LL, {14}LL, at, sum, "
      "mpc_load(xc + at));\n"
      "    total = mpc_block_reduce_sum(sum);\n"
      "    float mean = total / (float)(end - begin);\n"
      "    mpc_sum squares = 0.0f;\n"
      "    MPC_SUM_CHANNEL_SLICE(begin, end, {7}LL, {14}LL, at, squares, "
      "mpc_square(mpc_load(xc + at) - mean));\n"
      "    m2 = mpc_block_reduce_sum(squares);\n"
      "  }\n"
      "  if (threadIdx.x == 0) {{\n"
      "    partials[2LL * blockIdx.x] = total;\n"
      "    partials[2LL * blockIdx.x + 1] = m2;\n"
      "  }\n"
      // Every block of the channel has stored its partials.
      "  mpc_cluster_sync();\n"
      "  const float *p = partials + 2LL * {6}LL * c;\n"
      "  float channelTotal = 0.0f;\n"
      "  for (long long r = 0; r < {6}LL; ++r) channelTotal += p[2 * r];\n"
      "  float mean = channelTotal / {9}.0f;\n"
      "  float channelM2 = 0.0f;\n"
      "  for (long long r = 0; r < {6}LL; ++r) {{\n"
      "    long long n = {9}LL - r * {8}LL < {8}LL ? {9}LL - r * {8}LL : "
      "{8}LL;\n"
      "    float d = p[2 * r] / (float)n - mean;\n"
      "    channelM2 += p[2 * r + 1] + (float)n * d * d;\n"
      "  }\n"
      "  float var = channelM2 / {9}.0f;\n"
      "  if (s == 0 && threadIdx.x == 0) {{\n"
      "{15}"
      "  }\n"
      "  float rstd = mpc_rsqrt(var + {16}), g = mpc_load(gamma + c), b = "
      "mpc_load(beta + c);\n"
      "  if (held) {{\n"
      "{17}"
      "  } else {{\n"
      "    for (long long t = begin + threadIdx.x; t < end; t += "
      "blockDim.x) {{\n"
      "      long long i = c * {7}LL + {18};\n"
      "      float normalised = (mpc_load(x + i) - mean) * rstd;\n"
      "      {19}\n"
      "    }\n"
      "  }\n"
      "}\n",
      y->functions(), name, element, param, running,
      llvm::join(y->parameters, ", "), splits, spatial, slice, count,
      inPairs ? pairRegisters : registers, inPairs ? " / 2" : "",
      inPairs ? "mpc_pair" : "float", heldSums, channels * spatial,
      storeBatchStatistics(channels, count, eps, momentum), eps, heldApply,
      offset, y->store("i", "normalised * g + b")));
  SmallVector<std::string> arguments{emitter.constPointer(op.getInput()),
                                     emitter.constPointer(op.getGamma()),
                                     emitter.constPointer(op.getBeta()),
                                     emitter.pointer(op.getRunningMean()),
                                     emitter.pointer(op.getRunningVar()),
                                     stats.str(),
                                     "ctx->apply_update",
                                     partials};
  llvm::append_range(arguments, y->arguments);
  // x read once, from the registers after; the partials written, and
  // read by the channel's blocks from L2.
  KernelCost cost = onePassBatchNormCost(op, *y)
                        .writesBytes(2 * channels * splits * 4)
                        .readsBytes(2 * channels * splits * 4)
                        .flopsPer(channels * splits, 7);
  emitter.launchCluster(name, channels * splits, block,
                        static_cast<int>(splits), arguments, cost);
  emitter.limitRegisters(name, channelRegisterBudget);
  return true;
}

/// batch_norm over channel dim 1 of [N, C] or [N, C, H, W], its result
/// stored through the epilogue mpc-form-kernels grouped with it (a ReLU, a
/// residual sum and the ReLU after it), so that what it normalises is never
/// stored. Training, where a block sums a whole channel: one kernel, a
/// block a channel, computes the batch mean and inverse deviation, updates
/// the running statistics (when the step applies updates) and normalises
/// the channel, whose elements it reads again from L2. Training with
/// channels summed in slices, and evaluation (the running statistics):
/// the statistics into scratch, then one elementwise pass normalises.
LogicalResult emitBatchNorm(StepEmitter &emitter, const Step &step,
                            BatchNormOp op) {
  auto type = op.getInput().getType();
  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1);
  int64_t spatial = type.getNumElements() / (batch * channels);
  int64_t count = batch * spatial;
  std::string eps =
      floatLiteral(op.getEps().convertToDouble());
  std::string momentum =
      floatLiteral(op.getMomentum().convertToDouble());
  // Each channel's mean and rstd: the op's `stats` result where its
  // gradient reads them (mpc-save-batch-norm-statistics), else scratch.
  std::string stats = op.getStats() ? emitter.pointer(op.getStats())
                                    : emitter.scratchPointer(step, "float", 0,
                                                             2 * channels * 4);
  std::string element = elementCType(op.getInput());
  std::string param = elementCType(op.getGamma());
  // The running statistics are f32 state; gamma and beta may be bf16
  // parameters without master weights.
  std::string running = elementCType(op.getRunningMean());
  int64_t splits = batchNormSplits(type);
  // A max pooling that normalises as it loads (mpc-form-kernels' stem
  // rule) follows the statistics, which are then always summed in slices
  // (one slice is the one-kernel form's sums, bit for bit).
  MaxPool2dWithIndicesOp pool = normalisingPool(step);
  // Applied where it is read (MemoryPlan::appliedWhereRead): the norm only
  // finds its statistics, and nothing stores its result.
  bool applied = bool(emitter.getPlan().appliedWhereRead(op.getResult()));

  if (applied && splits == 1) {
    // The one-kernel form's passes over the channel (its sums in its
    // order), without the normalisation.
    std::string name = emitter.kernelName("batch_norm_statistics");
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const {1} *__restrict__ x, {2} *__restrict__ "
        "running_mean, {2} *__restrict__ running_var, float *__restrict__ "
        "stats, int update) {{\n"
        "  long long c = blockIdx.x;\n"
        "  const {1} *xc = x + c * {3}LL;\n"
        "  mpc_sum sum = 0.0f;\n"
        "  MPC_SUM_CHANNEL({4}LL, {3}LL, {5}LL, at, sum, mpc_load(xc + "
        "at));\n"
        "  float mean = mpc_block_reduce_sum(sum) / {6}.0f;\n"
        "  mpc_sum squares = 0.0f;\n"
        "  MPC_SUM_CHANNEL({4}LL, {3}LL, {5}LL, at, squares, "
        "mpc_square(mpc_load(xc + at) - mean));\n"
        "  float var = mpc_block_reduce_sum(squares) / {6}.0f;\n"
        "  if (threadIdx.x == 0) {{\n"
        "{7}"
        "  }\n"
        "}\n",
        name, element, running, spatial, batch, channels * spatial, count,
        storeBatchStatistics(channels, count, eps, momentum)));
    // x is read from DRAM once (the second pass finds the channel in L2).
    emitter.launch(name, channels, batchNormBlockSize(count),
                   {emitter.constPointer(op.getInput()),
                    emitter.pointer(op.getRunningMean()),
                    emitter.pointer(op.getRunningVar()), stats,
                    "ctx->apply_update"},
                   KernelCost()
                       .reads(op.getInput())
                       .reads(op.getRunningMean())
                       .reads(op.getRunningVar())
                       .writes(op.getRunningMean())
                       .writes(op.getRunningVar())
                       .writesBytes(2 * channels * 4)
                       .flopsPer(type.getNumElements(), 4)
                       .flopsPer(channels, 12));
    return success();
  }

  if (emitter.isTraining() && splits == 1 && !pool) {
    std::string name = emitter.kernelName("batch_norm");
    FailureOr<RowAccess> y =
        rowOutput(emitter, step, op, op.getResult(), "y", name);
    if (failed(y))
      return failure();
    int block = batchNormBlockSize(count);
    int64_t registers = (count + block - 1) / block;
    // On the GPU, where the block's threads hold the channel (the block as
    // launched; an emulated block of fewer threads takes the loops below),
    // each thread loads its elements once: the same sums in the same
    // order, and the same arithmetic, as the passes over the channel.
    std::string inRegisters;
    // Where a thread has too many elements for as many floats, a half input
    // whose planes have an even number of elements is held in pairs, a
    // 4-byte load and one register each (ResNet-50's 28x28 stages: 13 pairs
    // a thread, where 25 floats spilled). The sums take a pair's elements
    // in turn: the same terms as the passes, shared among the threads
    // otherwise, so rounded otherwise (the tiny batch norms of
    // cuda.mock_resnet_O2_f16_matches_cpu, 8 images of 8x8, carry such a
    // difference past its tolerance within 2 steps: floats are kept
    // wherever they fit).
    int64_t pairs = count / 2;
    int64_t pairRegisters = (pairs + block - 1) / block;
    // A thread's offsets within its channel in 32-bit arithmetic where the
    // tensor allows: a 64-bit division by a constant is several times the
    // instructions of a 32-bit one, and these forms are issue-bound.
    const char *offsetSuffix =
        type.getNumElements() <= std::numeric_limits<int32_t>::max() ? ""
                                                                     : "LL";
    if (registers > maxChannelRegisters && elementBytes(op.getInput()) == 2 &&
        spatial % 2 == 0 && pairRegisters <= maxChannelRegisters)
      inRegisters = llvm::formatv(
          "#ifdef MPC_DEVICE_BLOCKS\n"
          "  if (blockDim.x * {0}LL >= {1}LL) {{\n"
          "    mpc_pair v[{0}];\n"
          "    mpc_sum sum = 0.0f;\n"
          "    MPC_FOR_THREAD_UNROLLED(k, p, {1}LL, {0}) {{\n"
          "      v[k] = mpc_load_pair(xc + p / {2}{11} * {3}{11} + "
          "p % {2}{11} * 2);\n"
          "      sum += mpc_pair_element<{8}>(v[k], 0);\n"
          "      sum += mpc_pair_element<{8}>(v[k], 1);\n"
          "    }\n"
          "    float mean = mpc_block_reduce_sum(sum) / {9}.0f;\n"
          "    mpc_sum squares = 0.0f;\n"
          "    MPC_FOR_THREAD_UNROLLED(k, p, {1}LL, {0}) {{\n"
          "      squares += mpc_square(mpc_pair_element<{8}>(v[k], 0) - "
          "mean);\n"
          "      squares += mpc_square(mpc_pair_element<{8}>(v[k], 1) - "
          "mean);\n"
          "    }\n"
          "    float var = mpc_block_reduce_sum(squares) / {9}.0f;\n"
          "    if (threadIdx.x == 0) {{\n"
          "{4}"
          "    }\n"
          "    float rstd = mpc_rsqrt(var + {5}), g = mpc_load(gamma + c), b "
          "= mpc_load(beta + c);\n"
          "    MPC_FOR_THREAD_UNROLLED(k, p, {1}LL, {0}) {{\n"
          "      long long i = c * {10}LL + "
          "(p / {2}{11} * {3}{11} + p % {2}{11} * 2);\n"
          "      float normalised = (mpc_pair_element<{8}>(v[k], 0) - mean) * "
          "rstd;\n"
          "      {6}\n"
          "      normalised = (mpc_pair_element<{8}>(v[k], 1) - mean) * "
          "rstd;\n"
          "      {7}\n"
          "    }\n"
          "    return;\n"
          "  }\n"
          "#endif\n",
          pairRegisters, pairs, spatial / 2, channels * spatial,
          storeBatchStatistics(channels, count, eps, momentum), eps,
          y->store("i", "normalised * g + b"),
          y->store("i + 1", "normalised * g + b"), element, count, spatial,
          offsetSuffix);
    else if (registers <= maxChannelRegisters)
      inRegisters = llvm::formatv(
          "#ifdef MPC_DEVICE_BLOCKS\n"
          "  if (blockDim.x * {0}LL >= {1}LL) {{\n"
          "    float v[{0}];\n"
          "    mpc_sum sum = 0.0f;\n"
          "    MPC_FOR_THREAD_UNROLLED(k, t, {1}LL, {0}) {{\n"
          "      v[k] = mpc_load(xc + t / {2}{7} * {3}{7} + t % {2}{7});\n"
          "      sum += v[k];\n"
          "    }\n"
          "    float mean = mpc_block_reduce_sum(sum) / {1}.0f;\n"
          "    mpc_sum squares = 0.0f;\n"
          "    MPC_FOR_THREAD_UNROLLED(k, t, {1}LL, {0}) squares += "
          "mpc_square(v[k] - mean);\n"
          "    float var = mpc_block_reduce_sum(squares) / {1}.0f;\n"
          "    if (threadIdx.x == 0) {{\n"
          "{4}"
          "    }\n"
          "    float rstd = mpc_rsqrt(var + {5}), g = mpc_load(gamma + c), b "
          "= mpc_load(beta + c);\n"
          "    MPC_FOR_THREAD_UNROLLED(k, t, {1}LL, {0}) {{\n"
          "      long long i = c * {2}LL + "
          "(t / {2}{7} * {3}{7} + t % {2}{7});\n"
          "      float normalised = (v[k] - mean) * rstd;\n"
          "      {6}\n"
          "    }\n"
          "    return;\n"
          "  }\n"
          "#endif\n",
          registers, count, spatial, channels * spatial,
          storeBatchStatistics(channels, count, eps, momentum), eps,
          y->store("i", "normalised * g + b"), offsetSuffix);
    emitter.addKernel(llvm::formatv(
        "{9}__global__ void {0}(const {1} *__restrict__ x, const {2} "
        "*__restrict__ gamma, const {2} *__restrict__ beta, {3} "
        "*__restrict__ running_mean, {3} *__restrict__ running_var, float "
        "*__restrict__ stats, int update, {10}) {{\n"
        "  long long c = blockIdx.x;\n"
        "  const {1} *xc = x + c * {5}LL;\n"
        "{13}"
        "  mpc_sum sum = 0.0f;\n"
        "  MPC_SUM_CHANNEL({6}LL, {5}LL, {7}LL, at, sum, mpc_load(xc + "
        "at));\n"
        "  float mean = mpc_block_reduce_sum(sum) / {4}.0f;\n"
        "  mpc_sum squares = 0.0f;\n"
        "  MPC_SUM_CHANNEL({6}LL, {5}LL, {7}LL, at, squares, "
        "mpc_square(mpc_load(xc + at) - mean));\n"
        "  float var = mpc_block_reduce_sum(squares) / {4}.0f;\n"
        "  if (threadIdx.x == 0) {{\n"
        "{8}"
        "  }\n"
        "  float rstd = mpc_rsqrt(var + {11}), g = mpc_load(gamma + c), b = "
        "mpc_load(beta + c);\n"
        "  MPC_FOR_CHANNEL({6}LL, {5}LL, {7}LL, at) {{\n"
        "    long long i = c * {5}LL + at;\n"
        "    float normalised = (mpc_load(x + i) - mean) * rstd;\n"
        "    {12}\n"
        "  }\n"
        "}\n",
        name, element, param, running, count, spatial, batch,
        channels * spatial,
        storeBatchStatistics(channels, count, eps, momentum), y->functions(),
        llvm::join(y->parameters, ", "), eps,
        y->store("i", "normalised * g + b"), inRegisters));
    SmallVector<std::string> arguments{emitter.constPointer(op.getInput()),
                                       emitter.constPointer(op.getGamma()),
                                       emitter.constPointer(op.getBeta()),
                                       emitter.pointer(op.getRunningMean()),
                                       emitter.pointer(op.getRunningVar()),
                                       stats,
                                       "ctx->apply_update"};
    llvm::append_range(arguments, y->arguments);
    // x is read from DRAM once (the block's later passes over its channel
    // find it in L2, as the statistics kernel's second does).
    KernelCost cost = onePassBatchNormCost(op, *y);
    emitter.launch(name, channels, block, arguments, cost);
    // Left to itself ptxas spilled the registers form at 40 registers a
    // thread (sm_80, 128 threads); given 64 it spills nothing.
    if (!inRegisters.empty())
      emitter.limitRegisters(name, channelRegisterBudget);
    return success();
  }

  if (emitter.isTraining() && !pool && !applied &&
      splits <= maxClusterBlocks && emitter.getPlan().threadBlockClusters) {
    FailureOr<bool> clustered =
        emitClusterBatchNorm(emitter, step, op, stats, splits);
    if (failed(clustered))
      return failure();
    if (*clustered)
      return success();
  }

  std::string statsName = emitter.kernelName("batch_norm_stats");
  if (emitter.isTraining()) {
    // Each slice's sum and its sum of squares about its own mean; then, per
    // channel, the mean and Chan et al.'s combination of the slices'
    // squares: M2 = sum_s M2_s + n_s (mean_s - mean)^2, as exact as
    // squaring about the channel's mean, and x is read from DRAM once (a
    // slice's second pass finds it in L2).
    int64_t slice = (count + splits - 1) / splits;
    // After the statistics where they are scratch too (Codegen.cpp's
    // scratchBytes lays the step's scratch out so).
    std::string partials = emitter.scratchPointer(
        step, "float", op.getStats() ? 0 : 2 * channels * 4,
        2 * channels * splits * 4);
    std::string partialsName = emitter.kernelName("batch_norm_partials");
    // On the GPU, where the block's threads hold the slice, each thread
    // loads its elements once for both sums: a half input in pairs, as the
    // one-kernel form keeps them (ResNet-50's 112x112 and 56x56 stages: 7
    // to 13 pairs a thread, half the load instructions of floats), or
    // floats (the same sums in the same order as the passes).
    int partialsBlock = batchNormBlockSize(slice);
    int64_t registers = (slice + partialsBlock - 1) / partialsBlock;
    int64_t pairRegisters = (slice / 2 + partialsBlock - 1) / partialsBlock;
    bool inPairs = elementBytes(op.getInput()) == 2 && spatial % 2 == 0 &&
                   slice % 2 == 0 && pairRegisters <= maxChannelRegisters;
    // Both forms end as the passes do: the slice's M2, its partials, and
    // the block is done.
    const char *storePartials =
        "    float m2 = mpc_block_reduce_sum(squares);\n"
        "    if (threadIdx.x == 0) {\n"
        "      partials[2LL * blockIdx.x] = total;\n"
        "      partials[2LL * blockIdx.x + 1] = m2;\n"
        "    }\n"
        "    return;\n";
    std::string inRegisters;
    if (registers <= maxChannelRegisters && !inPairs)
      inRegisters = llvm::formatv(
          "#ifdef MPC_DEVICE_BLOCKS\n"
          "  if (blockDim.x * {0}LL >= {1}LL) {{\n"
          "    float v[{0}];\n"
          "    mpc_sum sum = 0.0f;\n"
          "    MPC_FOR_THREAD_UNROLLED(k, j, end - begin, {0}) {{\n"
          "      long long t = begin + j;\n"
          "      v[k] = mpc_load(xc + t / {2}LL * {3}LL + t % {2}LL);\n"
          "      sum += v[k];\n"
          "    }\n"
          "    float total = mpc_block_reduce_sum(sum);\n"
          "    float mean = total / (float)(end - begin);\n"
          "    mpc_sum squares = 0.0f;\n"
          "    MPC_FOR_THREAD_UNROLLED(k, j, end - begin, {0}) squares += "
          "mpc_square(v[k] - mean);\n"
          "{4}"
          "  }\n"
          "#endif\n",
          registers, slice, spatial, channels * spatial, storePartials);
    else if (inPairs)
      inRegisters = llvm::formatv(
          "#ifdef MPC_DEVICE_BLOCKS\n"
          "  if (blockDim.x * {0}LL >= {1}LL) {{\n"
          "    mpc_pair v[{0}];\n"
          "    mpc_sum sum = 0.0f;\n"
          "    MPC_FOR_THREAD_UNROLLED(k, p, (end - begin) / 2, {0}) {{\n"
          "      long long t = begin + 2 * p;\n"
          "      v[k] = mpc_load_pair(xc + t / {2}LL * {3}LL + t % {2}LL);\n"
          "      sum += mpc_pair_element<{5}>(v[k], 0);\n"
          "      sum += mpc_pair_element<{5}>(v[k], 1);\n"
          "    }\n"
          "    float total = mpc_block_reduce_sum(sum);\n"
          "    float mean = total / (float)(end - begin);\n"
          "    mpc_sum squares = 0.0f;\n"
          "    MPC_FOR_THREAD_UNROLLED(k, p, (end - begin) / 2, {0}) {{\n"
          "      squares += mpc_square(mpc_pair_element<{5}>(v[k], 0) - "
          "mean);\n"
          "      squares += mpc_square(mpc_pair_element<{5}>(v[k], 1) - "
          "mean);\n"
          "    }\n"
          "{4}"
          "  }\n"
          "#endif\n",
          pairRegisters, slice / 2, spatial, channels * spatial, storePartials,
          element);
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const {1} *__restrict__ x, float *__restrict__ "
        "partials) {{\n"
        "  long long c = blockIdx.x / {2}LL, s = blockIdx.x % {2}LL;\n"
        "  const {1} *xc = x + c * {3}LL;\n"
        "  long long begin = s * {4}LL;\n"
        "  long long end = begin + {4}LL < {5}LL ? begin + {4}LL : {5}LL;\n"
        "{7}"
        "  mpc_sum sum = 0.0f;\n"
        "  MPC_SUM_CHANNEL_SLICE(begin, end, {3}LL, {6}LL, at, sum, "
        "mpc_load(xc + at));\n"
        "  float total = mpc_block_reduce_sum(sum);\n"
        "  float mean = total / (float)(end - begin);\n"
        "  mpc_sum squares = 0.0f;\n"
        "  MPC_SUM_CHANNEL_SLICE(begin, end, {3}LL, {6}LL, at, squares, "
        "mpc_square(mpc_load(xc + at) - mean));\n"
        "  float m2 = mpc_block_reduce_sum(squares);\n"
        "  if (threadIdx.x == 0) {{\n"
        "    partials[2LL * blockIdx.x] = total;\n"
        "    partials[2LL * blockIdx.x + 1] = m2;\n"
        "  }\n"
        "}\n",
        partialsName, element, splits, spatial, slice, count,
        channels * spatial, inRegisters));
    emitter.launch(partialsName, channels * splits, partialsBlock,
                   {emitter.constPointer(op.getInput()), partials},
                   KernelCost()
                       .reads(op.getInput())
                       .writesBytes(2 * channels * splits * 4)
                       .flopsPer(count * channels, 4));
    if (!inRegisters.empty())
      emitter.limitRegisters(partialsName, channelRegisterBudget);
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const float *__restrict__ partials, {1} "
        "*__restrict__ running_mean, {1} *__restrict__ running_var, float "
        "*__restrict__ stats, int update) {{\n"
        "  MPC_FOR_EACH(c, {2}LL) {{\n"
        "    const float *p = partials + 2LL * {3}LL * c;\n"
        "    float total = 0.0f;\n"
        "    for (long long s = 0; s < {3}LL; ++s) total += p[2 * s];\n"
        "    float mean = total / {4}.0f;\n"
        "    float m2 = 0.0f;\n"
        "    for (long long s = 0; s < {3}LL; ++s) {{\n"
        "      long long n = {4}LL - s * {5}LL < {5}LL ? {4}LL - s * {5}LL : "
        "{5}LL;\n"
        "      float d = p[2 * s] / (float)n - mean;\n"
        "      m2 += p[2 * s + 1] + (float)n * d * d;\n"
        "    }\n"
        "    float var = m2 / {4}.0f;\n"
        "{6}"
        "  }\n"
        "}\n",
        statsName, running, channels, splits, count, slice,
        storeBatchStatistics(channels, count, eps, momentum)));
    emitter.launch(statsName, elementwiseGrid(channels), rowBlockSize,
                   {partials, emitter.pointer(op.getRunningMean()),
                    emitter.pointer(op.getRunningVar()), stats,
                    "ctx->apply_update"},
                   KernelCost()
                       .readsBytes(2 * channels * splits * 4)
                       .reads(op.getRunningMean())
                       .reads(op.getRunningVar())
                       .writes(op.getRunningMean())
                       .writes(op.getRunningVar())
                       .writesBytes(2 * channels * 4)
                       .flopsPer(channels * splits, 7)
                       .flopsPer(channels, 12));
  } else {
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const {1} *__restrict__ running_mean, const {1} "
        "*__restrict__ running_var, float *__restrict__ stats) {{\n"
        "  MPC_FOR_EACH(c, {2}LL) {{\n"
        "    stats[c] = mpc_load(running_mean + c);\n"
        "    stats[{2}LL + c] = mpc_rsqrt(mpc_load(running_var + c) + {3});\n"
        "  }\n"
        "}\n",
        statsName, running, channels, eps));
    emitter.launch(statsName, elementwiseGrid(channels), rowBlockSize,
                   {emitter.constPointer(op.getRunningMean()),
                    emitter.constPointer(op.getRunningVar()), stats},
                   KernelCost()
                       .reads(op.getRunningMean())
                       .reads(op.getRunningVar())
                       .writesBytes(2 * channels * 4)
                       .flopsPer(channels, 3));
  }

  if (applied)
    return success();
  if (pool)
    return emitNormalisingPool(emitter, step, op, pool, stats);

  std::string name = emitter.kernelName("batch_norm_apply");
  FailureOr<RowAccess> y =
      rowOutput(emitter, step, op, op.getResult(), "y", name);
  if (failed(y))
    return failure();
  emitter.addKernel(llvm::formatv(
      "{6}__global__ void {0}(const {1} *__restrict__ x, const {2} "
      "*__restrict__ gamma, const {2} *__restrict__ beta, const float "
      "*__restrict__ stats, {7}) {{\n"
      "#ifdef MPC_DEVICE_BLOCKS\n"
      // A thread's channel changes once in a plane of its elements: its
      // values are loaded then, not with every element.
      "  long long cached = -1;\n"
      "  float mean = 0.0f, rstd = 0.0f, g = 0.0f, b = 0.0f;\n"
      "  MPC_FOR_EACH(i, {3}LL) {{\n"
      "    long long c = (i / {4}LL) % {5}LL;\n"
      "    if (c != cached) {{\n"
      "      cached = c;\n"
      "      mean = stats[c];\n"
      "      rstd = stats[{5}LL + c];\n"
      "      g = mpc_load(gamma + c);\n"
      "      b = mpc_load(beta + c);\n"
      "    }\n"
      "    float normalised = (mpc_load(x + i) - mean) * rstd;\n"
      "    {8}\n"
      "  }\n"
      "#else\n"
      // The same arithmetic, a channel's values loaded once a run.
      "  MPC_FOR_EACH_PLANE_RUN(i0, i1, {3}LL, {4}LL) {{\n"
      "    long long c = (i0 / {4}LL) % {5}LL;\n"
      "    float mean = stats[c], rstd = stats[{5}LL + c], g = mpc_load(gamma "
      "+ c), b = mpc_load(beta + c);\n"
      "    MPC_SIMD for (long long i = i0; i < i1; ++i) {{\n"
      "      float normalised = (mpc_load(x + i) - mean) * rstd;\n"
      "      {9}\n"
      "    }\n"
      "  }\n"
      "#endif\n"
      "}\n",
      name, element, param, type.getNumElements(), spatial, channels,
      y->functions(), llvm::join(y->parameters, ", "),
      y->store("i", "normalised * g + b"),
      y->store("i", "normalised * g + b")));
  SmallVector<std::string> arguments{emitter.constPointer(op.getInput()),
                                     emitter.constPointer(op.getGamma()),
                                     emitter.constPointer(op.getBeta()), stats};
  llvm::append_range(arguments, y->arguments);
  // (x - mean) * rstd * gamma + beta.
  KernelCost cost = KernelCost()
                        .reads(op.getInput())
                        .reads(op.getGamma())
                        .reads(op.getBeta())
                        .readsBytes(2 * channels * 4)
                        .writes(y->written)
                        .flopsPer(type.getNumElements(), 4);
  if (y->fused)
    cost += y->fused->cost;
  emitter.launch(name, elementwiseGrid(type.getNumElements()), 256, arguments,
                 cost);
  return success();
}

} // namespace

int64_t mlir::mpc::storedAmaxBlocks(Operation *producer) {
  if (isAttentionLike(producer))
    return attentionBlocks(producer);
  if (auto norm = dyn_cast<LayerNormOp>(producer)) {
    int64_t width = norm.getGamma().getType().getNumElements();
    return rowShape(norm.getInput().getType().getNumElements() / width, width)
        .grid;
  }
  return layerNormGradInputGrid(cast<LayerNormGradOp>(producer));
}

FailureOr<RowAccess> mlir::mpc::rowInput(StepEmitter &emitter, const Step &step,
                                         Operation *rowOp, Value operand,
                                         StringRef pointer, StringRef kernel,
                                         bool storesOperand) {
  RowAccess access;
  access.pointer = pointer.str();
  // The ops before `rowOp`; none after another row op or an attention (a
  // quantization whose amax the kernels before it find reads what they
  // stored).
  SmallVector<Operation *> prologue;
  for (Operation *op : step.ops) {
    if (op == rowOp)
      break;
    prologue.push_back(op);
  }
  if (llvm::any_of(prologue, [](Operation *op) {
        return isRowFusible(op) || isAttentionLike(op);
      }))
    prologue.clear();
  Operation *def = operand.getDefiningOp();
  // A pooling's gradient no routing kernel computes
  // (MemoryPlan::gatheredWhereRead): each load gathers its element.
  bool gathered = bool(emitter.getPlan().gatheredWhereRead(operand));
  if (!gathered &&
      (!step.group || !def || !llvm::is_contained(prologue, def))) {
    access.parameters.push_back("const " + elementCType(operand) +
                                " *__restrict__ " + pointer.str());
    access.arguments.push_back(emitter.constPointer(operand));
    return access;
  }
  FailureOr<ElementFunction> fused = buildElementFunction(
      gathered ? ArrayRef<Operation *>() : ArrayRef<Operation *>(prologue),
      operand, Value(), emitter, (kernel + "_" + pointer).str(),
      (pointer + "_").str());
  if (failed(fused))
    return failure();
  access.parameters = fused->parameters;
  access.arguments = fused->arguments;
  access.fused = std::move(*fused);
  // The operand is read after the kernel too (a residual sum; a gathered
  // gradient a sliced norm gradient's second kernel reads): the kernel
  // stores it as it computes it.
  if (storesOperand && emitter.getPlan().isMaterialised(operand)) {
    access.stored = pointer.str() + "_out";
    access.parameters.push_back(elementCType(operand) + " *__restrict__ " +
                                *access.stored);
    access.arguments.push_back(emitter.pointer(operand));
    access.fused->cost.writes(operand);
  }
  return access;
}

FailureOr<RowAccess> mlir::mpc::rowOutput(StepEmitter &emitter,
                                          const Step &step, Operation *rowOp,
                                          Value result, StringRef pointer,
                                          StringRef kernel) {
  RowAccess access;
  access.pointer = pointer.str();
  // The ops after `rowOp`, up to the quantization whose amax the kernel
  // finds or the max pooling that normalises, if any.
  SmallVector<Operation *> epilogue;
  for (Operation *op : llvm::drop_begin(
           llvm::make_range(llvm::find(step.ops, rowOp), step.ops.end()))) {
    if (isRowFusible(op) || isa<MaxPool2dWithIndicesOp>(op))
      break;
    epilogue.push_back(op);
  }
  Value written = epilogue.empty() ? result : epilogue.back()->getResult(0);
  access.written = written;
  access.parameters.push_back(elementCType(written) + " *__restrict__ " +
                              pointer.str());
  access.arguments.push_back(emitter.pointer(written));
  if (epilogue.empty())
    return access;
  FailureOr<ElementFunction> fused = buildElementFunction(
      epilogue, written, result, emitter, (kernel + "_" + pointer).str(),
      (pointer + "_").str());
  if (failed(fused))
    return failure();
  llvm::append_range(access.parameters, fused->parameters);
  llvm::append_range(access.arguments, fused->arguments);
  access.fused = std::move(*fused);
  return access;
}

FailureOr<bool> mlir::mpc::emitRowOp(Operation *op, const Step &step,
                                     StepEmitter &emitter) {
  auto handled = [](LogicalResult result) -> FailureOr<bool> {
    if (failed(result))
      return failure();
    return true;
  };
  if (auto softmax = dyn_cast<SoftmaxOp>(op))
    return handled(emitSoftmax(emitter, step, op, softmax.getInput(),
                               softmax.getResult(), softmax.getDim(),
                               /*logarithm=*/false));
  if (auto logSoftmax = dyn_cast<LogSoftmaxOp>(op))
    return handled(emitSoftmax(emitter, step, op, logSoftmax.getInput(),
                               logSoftmax.getResult(), logSoftmax.getDim(),
                               /*logarithm=*/true));
  if (auto grad = dyn_cast<SoftmaxGradOp>(op))
    return handled(emitSoftmaxGrad(emitter, step, op, grad.getGrad(),
                                   grad.getOutput(), grad.getResult(),
                                   grad.getDim(), /*logarithm=*/false));
  if (auto grad = dyn_cast<LogSoftmaxGradOp>(op))
    return handled(emitSoftmaxGrad(emitter, step, op, grad.getGrad(),
                                   grad.getOutput(), grad.getResult(),
                                   grad.getDim(), /*logarithm=*/true));
  if (auto reduce = dyn_cast<ReduceSumOp>(op)) {
    emitReduce(emitter, step, op, reduce.getInput(), writtenResult(step),
               reduce.getDims(), "sum");
    return true;
  }
  if (auto reduce = dyn_cast<ReduceMeanOp>(op)) {
    emitReduce(emitter, step, op, reduce.getInput(), reduce.getResult(),
               reduce.getDims(), "mean");
    return true;
  }
  if (auto reduce = dyn_cast<ReduceMaxOp>(op)) {
    emitReduce(emitter, step, op, reduce.getInput(), reduce.getResult(),
               reduce.getDims(), "max");
    return true;
  }
  if (auto norm = dyn_cast<LayerNormOp>(op)) {
    return handled(emitLayerNorm(emitter, step, norm));
  }
  if (auto norm = dyn_cast<BatchNormOp>(op))
    return handled(emitBatchNorm(emitter, step, norm));
  if (auto norm = dyn_cast<RmsNormOp>(op)) {
    emitRmsNorm(emitter, norm);
    return true;
  }
  if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
    if (step.group == FusionKind::Classifier)
      emitClassifier(emitter, step, loss);
    else
      emitCrossEntropy(emitter, step, loss);
    return true;
  }
  if (auto grad = dyn_cast<CrossEntropyGradOp>(op)) {
    emitCrossEntropyGrad(emitter, step, grad);
    return true;
  }
  if (auto loss = dyn_cast<MseLossOp>(op)) {
    emitMseLoss(emitter, step, loss);
    return true;
  }
  return false;
}
