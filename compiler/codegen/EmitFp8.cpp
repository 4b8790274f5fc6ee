//===- EmitFp8.cpp - FP8 quantization and scaled GEMMs ------------*- C++
//-*-===//
//
// This file implements emitFp8Op: mpc.quantize as two kernels (each block's
// amax into scratch, or the row kernel that stored the input finds it; then
// every block finds the amax from those partials,
// derives the power-of-two scale and casts its elements, block 0 writing
// the inverse scale), and mpc.scaled_matmul as mpc_rt_gemm_scaled, which
// reads the inverse scales where they are (cuBLASLt's scale pointers on
// cuda), so the step never waits for them on the host.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::mpc;

int64_t mlir::mpc::quantizeBlocks(QuantizeOp op) {
  // As mse_loss's partial sums: a few thousand elements a block, at most
  // 256 partials for each block of the cast to read again.
  return std::clamp<int64_t>(op.getInput().getType().getNumElements() / 4096, 1,
                             256);
}

int64_t mlir::mpc::quantizeBiasTileRows(QuantizeOp op) {
  auto shape = op.getInput().getType().getShape();
  int64_t rows = op.getInput().getType().getNumElements() / shape.back();
  return (rows + 31) / 32;
}

namespace {

/// The largest finite magnitude of an FP8 element type (448, 57344).
std::string fp8Max(Type format) {
  const llvm::fltSemantics &semantics =
      cast<FloatType>(format).getFloatSemantics();
  return floatLiteral(llvm::APFloat::getLargest(semantics).convertToDouble());
}

/// 2^`exponent` (an int expression in [-126, 127]), built from its bits.
std::string powerOfTwo(StringRef exponent) {
  return ("__uint_as_float((unsigned int)(" + exponent + " + 127) << 23)")
      .str();
}

/// The largest power of two p with `amax` · p <= `largest` (as the
/// exponent `exponent`): 0 where amax is 0 or not finite, at most 127.
/// The exponent of the rounded quotient, one less where the quotient
/// rounded up to a power of two (amax · p is exact: p is a power of two).
std::string scaleExponentCode(StringRef amax, StringRef largest) {
  return llvm::formatv("  int exponent = 0;\n"
                       "  if ({0} > 0.0f && {0} <= 3.40282347e38f) {{\n"
                       "    unsigned int bits = __float_as_uint({1} / {0}) & "
                       "0x7f800000u;\n"
                       "    exponent = (int)(bits >> 23) - 127;\n"
                       "    if (exponent > 127) exponent = 127;\n"
                       "    if ({0} * {2} > {1}) exponent -= 1;\n"
                       "  }\n",
                       amax, largest, powerOfTwo("exponent"))
      .str();
}

/// Delayed scaling's cast of a value `v` scaled to `y` (`indent` before
/// each line): |v| raises the thread's amax `m`, and a finite y beyond the
/// format's largest is clipped and counted in `saturated`.
std::string delayedSaturation(Type format, StringRef v, StringRef y,
                              StringRef m, StringRef saturated,
                              StringRef indent) {
  // fabsf(v) > m is false for NaN: a NaN is not the amax. A finite value
  // that outgrew the history saturates (clipped this step, and counted;
  // its amax sets the next scales), as Transformer Engine's casts do;
  // inf and NaN stay non-finite (NaN in e4m3, which has no inf), so a
  // loss scaler still sees them.
  return llvm::formatv(
             "{6}float {0}_magnitude = fabsf({0});\n"
             "{6}{2} = {0}_magnitude > {2} ? {0}_magnitude : {2};\n"
             "{6}if (MPC_ISFINITE({0})) {{\n"
             "{6}  if (fabsf({1}) > {4}) {3} += 1.0f;\n"
             "{6}  {1} = {1} > {4} ? {4} : ({1} < -{4} ? -{4} : {1});\n"
             "{6}}\n"
             "{5}",
             v, y, m, saturated, fp8Max(format),
             isa<Float8E4M3FNType>(format)
                 ? (indent + "else " + y + " = NAN;\n").str()
                 : std::string(),
             indent)
      .str();
}

/// The table's entries of a delayed quantization: its scale's exponent,
/// the step's amax and the step's saturation count.
struct DelayedColumns {
  int64_t scale, amax, saturated;
};
DelayedColumns delayedColumns(QuantizeOp op) {
  auto table = cast<RankedTensorType>(op.getScaling().getType());
  int64_t columns = table.getDimSize(1), column = *op.getIndex();
  return {column, columns + column, 2 * columns + column};
}

/// The elements of the cast pass: `v` read through `input` (loaded, or
/// computed by the fused prologue, and then stored where it is read after
/// the kernel too), `y` its scaled value stored (at `index`), each
/// thread's amax in `m` under delayed scaling.
std::string castElementCode(QuantizeOp op, const RowAccess &input,
                            StringRef index, StringRef store) {
  Type format = op.getResult().getType().getElementType();
  std::string code =
      llvm::formatv("    float v = {0};\n", input.load(index)).str();
  if (input.stored)
    code +=
        llvm::formatv("    mpc_store({0} + {1}, v);\n", *input.stored, index)
            .str();
  code += "    float y = v * scale;\n";
  if (op.getScaling())
    code += delayedSaturation(format, "v", "y", "m", "saturated", "    ");
  return code + store.str();
}

/// A delayed quantization's transposed copy, where the layer norm before
/// it in its row group cast the FP8 result (rowCastQuantize): the bytes,
/// 32 x 32 tiles through shared memory (33 a row: a column falls in 32
/// banks), a warp reading 32 consecutive bytes of a row and writing 32 of
/// a column of the result.
void emitFp8Transpose(StepEmitter &emitter, QuantizeOp op) {
  int64_t n = op.getResult().getType().getNumElements();
  int64_t cols = op.getResult().getType().getShape().back();
  int64_t rows = n / cols;
  int64_t tilesRows = (rows + 31) / 32, tilesCols = (cols + 31) / 32;
  std::string type = elementCType(op.getResult());
  std::string name = emitter.kernelName("fp8_transpose");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ input, {1} *__restrict__ "
      "output_t) {{\n"
      "  const unsigned char *in = reinterpret_cast<const unsigned char "
      "*>(input);\n"
      "  unsigned char *out = reinterpret_cast<unsigned char *>(output_t);\n"
      "  MPC_SHARED(unsigned char, tile, 32 * 33);\n"
      "  for (long long t = blockIdx.x; t < {2}LL; t += gridDim.x) {{\n"
      "    const long long r0 = t / {3}LL * 32, c0 = t % {3}LL * 32;\n"
      "    MPC_FOR_THREAD(j, 1024) {{\n"
      "      const long long r = r0 + j / 32, c = c0 + j % 32;\n"
      "      if (r < {4}LL && c < {5}LL) tile[j / 32 * 33 + j % 32] = in[r * "
      "{5}LL + c];\n"
      "    }\n"
      "    __syncthreads();\n"
      "    MPC_FOR_THREAD(j, 1024) {{\n"
      "      const long long c = c0 + j / 32, r = r0 + j % 32;\n"
      "      if (r < {4}LL && c < {5}LL) out[c * {4}LL + r] = tile[j % 32 * 33 "
      "+ j / 32];\n"
      "    }\n"
      "    __syncthreads();\n"
      "  }\n"
      "}\n",
      name, type, tilesRows * tilesCols, tilesCols, rows, cols));
  emitter.launch(
      name, std::clamp<int64_t>((tilesRows * tilesCols + 3) / 4, 1, 65535), 256,
      {emitter.constPointer(op.getResult()),
       emitter.pointer(op.getTransposed())},
      KernelCost().reads(op.getResult()).writes(op.getTransposed()));
}

/// Current scaling's amax pass: each of `blocks` blocks the largest
/// magnitude of its chunk of the input into `partials`.
LogicalResult launchAmaxPass(StepEmitter &emitter, const Step &step,
                             QuantizeOp op, int64_t blocks,
                             const std::string &partials) {
  int64_t n = op.getInput().getType().getNumElements();
  int64_t chunk = (n + blocks - 1) / blocks;
  std::string name = emitter.kernelName("fp8_amax");
  // The input, or the elementwise ops of the row group that compute it,
  // evaluated here and again in the cast pass (which stores the value
  // where it is read after the group).
  FailureOr<RowAccess> x = rowInput(emitter, step, op, op.getInput(), "input",
                                    name, /*storesOperand=*/false);
  if (failed(x))
    return failure();
  KernelCost cost;
  if (x->fused)
    cost += x->fused->cost;
  else
    cost.reads(op.getInput());
  // fabsf(v) > m is false for NaN: a NaN is not the amax (it stays NaN
  // through the cast, and the finite check finds it downstream).
  emitter.addKernel(llvm::formatv(
      "{5}__global__ void {0}({1}, float *__restrict__ partials) {{\n"
      "  long long begin = (long long)blockIdx.x * {2}LL;\n"
      "  long long count = {3}LL - begin < {2}LL ? {3}LL - begin : {2}LL;\n"
      "  float m = 0.0f;\n"
      "  MPC_FOR_THREAD(j, count) {{\n"
      "    float v = fabsf({4});\n"
      "    m = v > m ? v : m;\n"
      "  }\n"
      "  m = mpc_block_reduce_max(m);\n"
      "  if (threadIdx.x == 0) partials[blockIdx.x] = m;\n"
      "}\n",
      name, llvm::join(x->parameters, ", "), chunk, n, x->load("begin + j"),
      x->functions()));
  std::vector<std::string> arguments(x->arguments.begin(), x->arguments.end());
  arguments.push_back(partials);
  emitter.launch(name, blocks, rowBlockSize, arguments,
                 cost.writesBytes(blocks * 4).flopsPer(n, 1));
  return success();
}

/// The maximum of the `blocks` amax partials that the kernels storing the
/// input left in `partials` (storedAmaxQuantize), into `amax` (one block).
void launchAmaxCombine(StepEmitter &emitter, int64_t blocks,
                       const std::string &partials, const std::string &amax) {
  std::string name = emitter.kernelName("fp8_amax_combine");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const float *__restrict__ partials, float "
      "*__restrict__ amax) {{\n"
      "  float m = 0.0f;\n"
      "  MPC_FOR_THREAD(b, {1}LL) m = partials[b] > m ? partials[b] : m;\n"
      "  m = mpc_block_reduce_max(m);\n"
      "  if (threadIdx.x == 0) amax[0] = m;\n"
      "}\n",
      name, blocks));
  emitter.launch(
      name, 1, rowBlockSize, {partials, amax},
      KernelCost().readsBytes(blocks * 4).writesBytes(4).flopsPer(blocks, 1));
}

/// mpc.quantize: the scale (1; from this step's amax, found by a kernel of
/// its own first or by the row kernel before it in the group that stored
/// the input; or from the delayed-scaling table), then one pass that
/// casts, writes the transposed copy where the op has one, and under
/// delayed scaling raises the table's amax.
LogicalResult emitQuantize(StepEmitter &emitter, const Step &step,
                           QuantizeOp op) {
  int64_t n = op.getInput().getType().getNumElements();
  std::string output = elementCType(op.getResult());
  Type format = op.getResult().getType().getElementType();
  Value transposed = op.getTransposed();
  // A weight gradient's operands are read transposed only: the pass writes
  // just the transposed copy then.
  bool writesResult = !transposed || !op.getResult().use_empty();
  std::vector<std::string> args = {emitter.pointer(op.getScaleInv())};
  std::string parameters = "float *__restrict__ scale_inv";
  if (writesResult) {
    args.push_back(emitter.pointer(op.getResult()));
    parameters += llvm::formatv(", {0} *__restrict__ output", output);
  }
  std::string prologue = "  const float scale = 1.0f;\n";
  std::string epilogue;
  KernelCost cost;
  cost.writes(op.getScaleInv()).flopsPer(n, 1);
  if (writesResult)
    cost.writes(op.getResult());
  if (transposed) {
    args.push_back(emitter.pointer(transposed));
    parameters += llvm::formatv(", {0} *__restrict__ output_t", output);
    cost.writes(transposed);
  }
  int64_t grid;
  int64_t rows = 0, cols = 0, tilesRows = 0, tilesCols = 0;
  if (transposed) {
    cols = op.getInput().getType().getShape().back();
    rows = n / cols;
    tilesRows = (rows + 31) / 32;
    tilesCols = (cols + 31) / 32;
    // Four tiles a block, the 4096 elements an elementwise block takes.
    grid = std::clamp<int64_t>((tilesRows * tilesCols + 3) / 4, 1, 65535);
  } else {
    grid = elementwiseGrid(n);
  }
  if (op.getScaling()) {
    args.push_back(emitter.pointer(op.getScaling()));
    parameters += ", float *__restrict__ table";
    prologue = delayedScaleCode(op, "m", "saturated");
    epilogue = delayedTableUpdate(op, "m", "saturated");
    cost.readsBytes(grid * 4).writesBytes(grid * 4).flopsPer(n, 1);
  } else if (!op.getUnscaled()) {
    QuantizeScratch scratch = quantizeScratch(step, op);
    std::string partials = emitter.scratchPointer(
        step, "float", scratch.amaxOffset, scratch.amaxBlocks * 4);
    if (storedAmaxQuantize(step) == op)
      launchAmaxCombine(
          emitter, scratch.amaxBlocks, partials,
          emitter.scratchPointer(step, "float", scratch.castOffset, 4));
    else if (failed(launchAmaxPass(emitter, step, op, scratch.amaxBlocks,
                                   partials)))
      return failure();
    int64_t blocks = scratch.castPartials;
    args.push_back(
        emitter.scratchPointer(step, "float", scratch.castOffset, blocks * 4));
    parameters += ", const float *__restrict__ partials";
    // The largest power of two s with amax * s <= max (its exponent from
    // max / amax), which amax = 0, inf or NaN leave at 1.
    prologue = llvm::formatv("  float amax = 0.0f;\n"
                             "  MPC_FOR_THREAD(b, {0}LL) amax = partials[b] "
                             "> amax ? partials[b] : amax;\n"
                             "  amax = mpc_block_reduce_max(amax);\n",
                             blocks)
                   .str() +
               scaleExponentCode("amax", fp8Max(format)) +
               "  const float scale = " + powerOfTwo("exponent") + ";\n";
    cost.readsBytes(grid * blocks * 4);
  }
  prologue += "  if (blockIdx.x == 0 && threadIdx.x == 0) scale_inv[0] = "
              "1.0f / scale;\n";
  std::string name = emitter.kernelName(transposed ? "fp8_quantize_transpose"
                                                   : "fp8_quantize");
  // The input, or (in a row group) the elementwise ops that compute it,
  // evaluated in this pass.
  FailureOr<RowAccess> x =
      rowInput(emitter, step, op, op.getInput(), "input", name);
  if (failed(x))
    return failure();
  parameters = llvm::join(x->parameters, ", ") + ", " + parameters;
  args.insert(args.begin(), x->arguments.begin(), x->arguments.end());
  if (x->fused)
    cost += x->fused->cost;
  else
    cost.reads(op.getInput());
  // A bias sum in the group (mpc-form-kernels: the FP8 weight gradient's
  // bias): each tile's column sums of the values it casts, then one
  // kernel adds a column's tiles in order. Its f32 value where its
  // widening cast is grouped too (written from the f32 sums, once).
  ReduceSumOp biasSum;
  Value biasResult;
  for (Operation *member : step.ops)
    if (auto sum = dyn_cast<ReduceSumOp>(member))
      biasSum = sum;
  if (biasSum) {
    biasResult = biasSum.getResult();
    for (Operation *member : step.ops)
      if (auto widen = dyn_cast<CastOp>(member);
          widen && widen.getInput() == biasResult)
        biasResult = widen.getResult();
    if (!transposed)
      return op.emitError() << "a bias sum needs the transposed copy's tiles";
  }
  std::string biasPartials, biasTile, biasSums;
  if (biasSum) {
    // After current scaling's amax partials, where there are some.
    biasPartials = emitter.scratchPointer(step, "float",
                                          quantizeScratch(step, op).biasOffset);
    args.push_back(biasPartials);
    parameters += ", float *__restrict__ bias_partials";
    cost.writesBytes(saturatingProduct({tilesRows, cols, 4})).flopsPer(n, 1);
    biasTile = "      values[j / 32 * 33 + j % 32] = v;\n";
    // After the tile's barrier: thread c sums column c0 + c over the
    // tile's rows, in order.
    biasSums =
        llvm::formatv("    MPC_FOR_THREAD(j, 32) {{\n"
                      "      if (c0 + j >= {0}LL) continue;\n"
                      "      float s = 0.0f;\n"
                      "      for (int i = 0; i < 32 && r0 + i < {1}LL; ++i)\n"
                      "        s += values[i * 33 + j];\n"
                      "      bias_partials[t / {2}LL * {0}LL + c0 + j] = s;\n"
                      "    }\n",
                      cols, rows, tilesCols);
  }
  std::string body;
  if (!transposed) {
    body = llvm::formatv(
               "  MPC_FOR_EACH(i, {0}LL) {{\n{1}  }\n", n,
               castElementCode(op, *x, "i", "    mpc_store(output + i, y);\n"))
               .str();
  } else {
    // 32 x 32 tiles: a warp reads (and writes) 32 consecutive elements of
    // a row, keeps the scaled values in shared memory (33 a row: a column
    // falls in 32 banks), and writes the transposed tile a row of it at a
    // time, again 32 consecutive elements.
    body = llvm::formatv(
        "  MPC_SHARED(float, tile, 32 * 33);\n{5}"
        "  for (long long t = blockIdx.x; t < {0}LL; t += gridDim.x) {{\n"
        "    const long long r0 = t / {1}LL * 32, c0 = t % {1}LL * 32;\n"
        "    MPC_FOR_THREAD(j, 1024) {{\n"
        "      const long long r = r0 + j / 32, c = c0 + j % 32;\n"
        "      if (r >= {2}LL || c >= {3}LL) continue;\n"
        "{4}{6}"
        "      tile[j / 32 * 33 + j % 32] = y;\n"
        "    }\n"
        "    __syncthreads();\n{7}"
        "    MPC_FOR_THREAD(j, 1024) {{\n"
        "      const long long c = c0 + j / 32, r = r0 + j % 32;\n"
        "      if (r >= {2}LL || c >= {3}LL) continue;\n"
        "      mpc_store(output_t + c * {2}LL + r, tile[j % 32 * 33 + j / "
        "32]);\n"
        "    }\n"
        "    __syncthreads();\n"
        "  }\n",
        tilesRows * tilesCols, tilesCols, rows, cols,
        indentLines(
            castElementCode(
                op, *x, llvm::formatv("r * {0}LL + c", cols).str(),
                writesResult
                    ? llvm::formatv(
                          "    mpc_store(output + r * {0}LL + c, y);\n", cols)
                          .str()
                    : std::string()),
            "  "),
        biasSum ? "  MPC_SHARED(float, values, 32 * 33);\n" : "", biasTile,
        biasSums);
  }
  emitter.addKernel(
      llvm::formatv("{5}__global__ void {0}({1}) {{\n{2}{3}{4}}\n", name,
                    parameters, prologue, body, epilogue, x->functions()));
  emitter.launch(name, grid, 256, args, cost);
  if (biasSum) {
    // The sum's kernel: the report counts it as the bias gradient's, not
    // as quantizing.
    emitter.setSource({biasSum.getOperation()});
    emitColumnSums(emitter, emitter.kernelName("fp8_bias_grad"), biasPartials,
                   tilesRows, cols, cols, {{biasResult, 0, "db"}});
  }
  return success();
}

void emitScaledMatmul(StepEmitter &emitter, ScaledMatmulOp op) {
  auto lhs = op.getLhs().getType();
  auto result = op.getResult().getType();
  int64_t m = result.getDimSize(0), n = result.getDimSize(1);
  int64_t k = lhs.getDimSize(1);
  Value bias = op.getBias();
  KernelCost cost;
  cost.flopsPer(1, KernelCost::product({2, m, n, k}))
      .reads(op.getLhs())
      .reads(op.getRhs())
      .reads(op.getLhsScaleInv())
      .reads(op.getRhsScaleInv())
      .writes(op.getResult());
  if (bias)
    cost.reads(bias);
  emitter.recordCall("mpc_rt_gemm_scaled", KernelKind::Gemm,
                     /*halfInputs=*/true, cost, /*fp8Inputs=*/true);
  // C = A · Bᵀ: A is lhs [M, K], B is rhs [N, K] (trans_b).
  emitter.checkedCall(llvm::formatv(
      "mpc_rt_gemm_scaled({0}, {1}, {2}, 0, 1, {3}LL, {4}LL, {5}LL, {6}, "
      "{5}LL, {7}, {8}, {5}LL, {9}, {10}, {11}, {4}LL)",
      gemmDtype(op.getLhs()), gemmDtype(op.getRhs()), gemmDtype(op.getResult()),
      m, n, k, emitter.constPointer(op.getLhs()),
      emitter.constPointer(op.getLhsScaleInv()),
      emitter.constPointer(op.getRhs()),
      emitter.constPointer(op.getRhsScaleInv()),
      bias ? emitter.constPointer(bias) : std::string("nullptr"),
      emitter.pointer(op.getResult())));
}

} // namespace

std::string mlir::mpc::delayedScaleCode(QuantizeOp op, StringRef amax,
                                        StringRef saturated) {
  return llvm::formatv("  const float scale = {0};\n"
                       "  float {1} = 0.0f, {2} = 0.0f;\n",
                       powerOfTwo(llvm::formatv("(int)table[{0}]",
                                                delayedColumns(op).scale)
                                      .str()),
                       amax, saturated)
      .str();
}

std::string mlir::mpc::delayedTableUpdate(QuantizeOp op, StringRef amax,
                                          StringRef saturated) {
  DelayedColumns columns = delayedColumns(op);
  // A thread's and a block's counts are exact in f32 (far below 2^24).
  return llvm::formatv("  {0} = mpc_block_reduce_max({0});\n"
                       "  {1} = mpc_block_reduce_sum({1});\n"
                       "  if (threadIdx.x == 0) {{\n"
                       "    mpc_atomic_max_nonnegative(table + {2}, {0});\n"
                       "    if ({1} > 0.0f) mpc_atomic_add_count(table + "
                       "{3}, {1});\n"
                       "  }\n",
                       amax, saturated, columns.amax, columns.saturated)
      .str();
}

std::string mlir::mpc::delayedCastStore(QuantizeOp op, StringRef output,
                                        StringRef stored, StringRef index,
                                        StringRef value, StringRef amax,
                                        StringRef saturated) {
  // Rounded to the input's type first: the value a quantization pass would
  // have read back, so the FP8 bytes are the same.
  std::string code =
      llvm::formatv("{{ {0} fp8_in; mpc_store(&fp8_in, {1}); float fp8_v = "
                    "mpc_load(&fp8_in); float fp8_y = fp8_v * scale;\n",
                    elementCType(op.getInput()), value)
          .str();
  code += delayedSaturation(op.getResult().getType().getElementType(), "fp8_v",
                            "fp8_y", amax, saturated, "      ");
  if (!stored.empty())
    code += llvm::formatv("      {0}[{1}] = fp8_in;\n", stored, index).str();
  return code +
         llvm::formatv("      mpc_store({0} + {1}, fp8_y); }", output, index)
             .str();
}

void mlir::mpc::emitFp8SaturationCheck(StepEmitter &emitter, QuantizeOp op,
                                       int64_t gemmSite, int64_t quantizeSite,
                                       int operand, StringRef description) {
  Type format = op.getResult().getType().getElementType();
  int64_t n = op.getInput().getType().getNumElements();
  std::string name = emitter.kernelName("check_fp8_saturation");
  // |v| * scale is |v * scale| exactly (scale is a power of two): the
  // quantize kernel's test, element for element.
  emitter.addKernel(llvm::formatv(
      "// --debug-nonfinite: FP8 saturation of {9}\n"
      "__global__ void {1}(const {2} *__restrict__ x, const float "
      "*__restrict__ table, mpc_nonfinite_record_dev *record) {{\n"
      "  if (record->fp8_found) return; // an earlier GEMM was first\n"
      "  const float scale = {3};\n"
      "  float saturated = 0.0f, largest = 0.0f;\n"
      "  MPC_FOR_THREAD(i, {4}LL) {{\n"
      "    float v = mpc_load(x + i);\n"
      "    if (MPC_ISFINITE(v)) {{\n"
      "      float a = fabsf(v);\n"
      "      largest = a > largest ? a : largest;\n"
      "      if (a * scale > {5}) saturated += 1.0f;\n"
      "    }\n"
      "  }\n"
      "  saturated = mpc_block_reduce_sum(saturated);\n"
      "  largest = mpc_block_reduce_max(largest);\n"
      "  if (threadIdx.x == 0 && saturated > 0.0f &&\n"
      "      atomicExch(&record->fp8_found, 1) == 0) {{\n"
      "    record->fp8_gemm_site = {6};\n"
      "    record->fp8_quantize_site = {0};\n"
      "    record->fp8_operand = {7};\n"
      "    record->fp8_format = {8};\n"
      "    record->fp8_amax = largest;\n"
      "    record->fp8_scale = scale;\n"
      "    record->fp8_num_elements = {4}LL;\n"
      "    record->fp8_saturated = (long long)saturated;\n"
      "  }\n"
      "}\n",
      quantizeSite, name, elementCType(op.getInput()),
      powerOfTwo(llvm::formatv("(int)table[{0}]", *op.getIndex()).str()), n,
      fp8Max(format), gemmSite, operand, isa<Float8E4M3FNType>(format) ? 0 : 1,
      description));
  emitter.launch(name, 1, rowBlockSize,
                 {emitter.constPointer(op.getInput()),
                  emitter.constPointer(op.getScaling()),
                  "(mpc_nonfinite_record_dev *)ctx->nonfinite"},
                 KernelCost().reads(op.getInput()).flopsPer(n, 2));
}

void mlir::mpc::emitFp8ScalingUpdate(ModelOp train, StepEmitter &emitter,
                                     bool dataParallel) {
  SmallVector<QuantizeOp> delayed;
  train.getBody().front().walk([&](QuantizeOp op) {
    if (op.getScaling())
      delayed.push_back(op);
  });
  if (delayed.empty())
    return;
  Value table = delayed.front().getScaling();
  auto type = cast<RankedTensorType>(table.getType());
  int64_t history = type.getDimSize(0) - 4, columns = type.getDimSize(1);
  int64_t e4m3Columns = llvm::count_if(delayed, [](QuantizeOp op) {
    return isa<Float8E4M3FNType>(op.getResult().getType().getElementType());
  });
  int64_t margin = *delayed.front().getMargin();
  std::string tablePointer = emitter.pointer(table);
  if (dataParallel) {
    // Each rank saw its own batch: the step's amax is the largest of theirs,
    // so every rank moves the same history and finds the same scales.
    emitter.setSource({}, "fp8: the step's amaxes across ranks");
    emitter.checkedCall(llvm::formatv("mpc_rt_max_across_ranks(ctx, {0} + "
                                      "{1}LL, {1}LL)",
                                      tablePointer, columns));
  }
  std::string name = emitter.kernelName("fp8_scaling_update");
  emitter.addKernel(
      llvm::formatv(
          "// Delayed scaling, a thread a column of the table (mpc.quantize):\n"
          "// when the step applies, the amax it saw joins the history and\n"
          "// the scale follows the history's largest; the amax and the\n"
          "// step's saturation count are reset either way (the count kept\n"
          "// as the last step's), and a skipped step changes nothing else.\n"
          "__global__ void {0}(float *__restrict__ table, const "
          "mpc_train_control *__restrict__ control) {{\n"
          "  MPC_FOR_EACH(t, {1}LL) {{\n"
          "    const float amax = table[{1}LL + t];\n"
          "    table[{1}LL + t] = 0.0f;\n"
          "    table[3 * {1}LL + t] = table[2 * {1}LL + t];\n"
          "    table[2 * {1}LL + t] = 0.0f;\n"
          "    if (!control->applied) continue;\n"
          "    float m = amax;\n"
          "    for (long long h = {2}LL - 1; h > 0; --h) {{\n"
          "      const float older = table[(3 + h) * {1}LL + t];\n"
          "      table[(4 + h) * {1}LL + t] = older;\n"
          "      m = older > m ? older : m;\n"
          "    }\n"
          "    table[4 * {1}LL + t] = amax;\n"
          "    const float largest = t < {3}LL ? 448.0f : 57344.0f;\n"
          "{4}{5}"
          "    table[t] = (float)(exponent < -126 ? -126 : exponent);\n"
          "  }\n"
          "}\n",
          name, columns, history, e4m3Columns,
          scaleExponentCode("m", "largest"),
          margin ? llvm::formatv("  if (m > 0.0f && m <= 3.40282347e38f) "
                                 "exponent -= {0};\n",
                                 margin)
                       .str()
                 : std::string())
          .str());
  emitter.setSource({}, "fp8: delayed scaling's history and scales");
  int64_t bytes = (history + 4) * columns * 4;
  emitter.launch(name, elementwiseGrid(columns), 256,
                 {tablePointer, emitter.controlPointer()},
                 KernelCost().readsBytes(bytes).writesBytes(bytes).flopsPer(
                     columns * history, 1));
}

FailureOr<bool> mlir::mpc::emitFp8Op(Operation *op, const Step &step,
                                     StepEmitter &emitter) {
  if (auto quantize = dyn_cast<QuantizeOp>(op)) {
    // The layer norm's kernel cast it: only the transposed copy is left.
    if (rowCastQuantize(step) == quantize) {
      if (quantize.getTransposed())
        emitFp8Transpose(emitter, quantize);
      return true;
    }
    if (failed(emitQuantize(emitter, step, quantize)))
      return failure();
    return true;
  }
  if (auto matmul = dyn_cast<ScaledMatmulOp>(op)) {
    emitScaledMatmul(emitter, matmul);
    return true;
  }
  return false;
}
