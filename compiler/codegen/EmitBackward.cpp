//===- EmitBackward.cpp - kernels of the backward-only ops --------*- C++
//-*-===//
//
// This file implements emitBackwardOp: code for the ops of MpcGradOps.td that
// are neither elementwise (EmitElementwise.cpp) nor softmax / cross-entropy
// rows (EmitRow.cpp): the gradients of layer_norm, batch_norm, embedding,
// the pools, reduce_max and slice (conv2d's are in EmitConv.cpp).
//
// The kernels are correct for any block size and deterministic on a GPU:
// every output element is written by exactly one thread, as a gather over
// what contributes to it (pool gradients) or as a block reduction
// (norm parameter gradients: one block per column or channel, never
// atomics). embedding_grad, a scatter-add whose rows may repeat, is a
// gather too: the first position of each index sums the rows of all its
// positions in order, in registers, and writes the row once in the table's
// type (mpc_embedding_grad_rows; the cpu target links each index's
// positions, mpc_embedding_grad_lists), where PyTorch's default uses
// atomicAdd.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::mpc;

namespace {

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

/// Columns of a norm gradient's parameters in a tile of a block.
constexpr int64_t columnTile = 8;
/// Slices of the partial-sum rows per tile: columnTile * columnSlices
/// threads, one block (rowBlockSize).
constexpr int64_t columnSlices = rowBlockSize / columnTile;
/// The most rows a thread of the column sums takes unrolled (two sums'
/// loads, 64 registers, in flight at once).
constexpr int64_t maxUnrolledColumnRows = 32;

} // namespace

/// The second kernel of a norm gradient: each output[j] (dgamma, dbeta) is
/// the sum over `blocks` rows of `partials` (row b at b * stride, the
/// output's columns from its offset) of column j. A block takes 8 columns;
/// its thread t sums every 32nd row from row t / 8 (a warp reads 8
/// adjacent columns of 4 rows: 4 whole sectors), and the 32 slices are
/// added in slice order. The same order on every target.
///
/// The spread is the point: where a thread a column summed every row one
/// after another, the GPU ran one block's latency chain (GPT-2 small: 51 us
/// a layer norm on an H100); 32 columns and 8 slices a block left GPT-2
/// small's 768 columns 24 blocks, 1.5 warps an SM, each warp waiting on 256
/// loads in turn (0.39 ms for its 25 norms under Nsight Compute, 8x their
/// bound; the emulator's counters model 2.9 ms). 8 columns and 32 slices
/// give 96 blocks and 64 loads a warp.
void mlir::mpc::emitColumnSums(StepEmitter &emitter, const std::string &name,
                               const std::string &partials, int64_t blocks,
                               int64_t stride, int64_t width,
                               ArrayRef<ColumnSum> outputs) {
  std::string parameters, sums, adds, slices, finals, stores;
  KernelCost cost = KernelCost()
                        .readsBytes(blocks * outputs.size() * width * 4)
                        .flopsPer(blocks * outputs.size() * width, 1);
  SmallVector<std::string> arguments{partials};
  for (auto [index, output] : llvm::enumerate(outputs)) {
    parameters += llvm::formatv(", {0} *__restrict__ {1}",
                                elementCType(output.value), output.name);
    sums += llvm::formatv("    float s{0} = 0.0f;\n", index);
    adds += llvm::formatv("        s{0} += partials[b * {1}LL + {2}LL + j];\n",
                          index, stride, output.offset);
    slices += llvm::formatv("    slices[{0} + t] = s{1};\n",
                            index * rowBlockSize, index);
    finals += llvm::formatv(
        "      s{0} += slices[{1} + slice * {2} + t];\n",
        index, index * rowBlockSize, columnTile);
    stores += llvm::formatv("    mpc_store({0} + j, s{1});\n", output.name,
                            index);
    arguments.push_back(emitter.pointer(output.value));
    cost.writes(output.value);
  }
  // A thread's rows: unrolled where they are few, so that its loads are in
  // flight together. Rolled, nvcc's unrolling by 4 left GPT-2 small's 32
  // rows a thread 8 rounds of DRAM latency on its 96 blocks (5.8 warps an
  // SM): 1.9x the kernel's bound in the model.
  int64_t rowsPerThread = (blocks + columnSlices - 1) / columnSlices;
  std::string rowLoop =
      rowsPerThread <= maxUnrolledColumnRows
          ? llvm::formatv(
                "      MPC_UNROLL for (int k = 0; k < {0}; ++k) {{\n"
                "        long long b = t / {1}LL + k * {2}LL;\n"
                "{3}",
                rowsPerThread, columnTile, columnSlices,
                blocks % columnSlices == 0
                    ? ""
                    : llvm::formatv("        if (b >= {0}LL) break;\n",
                                    blocks)
                          .str())
                .str()
          : llvm::formatv("      for (long long b = t / {0}LL; b < {1}LL; b "
                          "+= {2}LL) {{\n",
                          columnTile, blocks, columnSlices)
                .str();
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const float *__restrict__ partials{1}) {{\n"
      "  MPC_SHARED(float, slices, {2});\n"
      "  long long first = (long long)blockIdx.x * {3}LL;\n"
      "  MPC_FOR_THREAD(t, {4}LL) {{\n"
      "    long long j = first + t % {3}LL;\n"
      "{5}"
      "    if (j < {6}LL) {{\n"
      "{13}"
      "{9}"
      "      }\n"
      "    }\n"
      "{10}"
      "  }\n"
      "  __syncthreads();\n"
      "  MPC_FOR_THREAD(t, {3}LL) {{\n"
      "    long long j = first + t;\n"
      "    if (j >= {6}LL) continue;\n"
      "{5}"
      "    for (int slice = 0; slice < {8}; ++slice) {{\n"
      "{11}"
      "    }\n"
      "{12}"
      "  }\n"
      "}\n",
      name, parameters, outputs.size() * rowBlockSize, columnTile,
      rowBlockSize, sums, width, blocks, columnSlices, adds, slices, finals,
      stores, rowLoop));
  emitter.launch(name, (width + columnTile - 1) / columnTile, rowBlockSize,
                 arguments, cost);
}

namespace {

/// Warps a block of layer_norm_grad_input a warp a row: each has its own
/// partial sums of dgamma and dbeta in shared memory (2 * width floats),
/// 24 KB at width 768.
constexpr int64_t gradRowWarps = 4;
/// Registers a thread of it may use: x and dy in registers (48 at width
/// 768) spilled at 64 and 72 registers on sm_90, not at 80 (6 blocks, 24
/// warps an SM, each with 48 loads in flight).
constexpr int gradRowRegisterBudget = 80;

/// What a layer_norm_grad input kernel adds where it finds dx's amax for
/// the quantization after it (dx.amax): the parameter, the thread's amax,
/// and each block's into the step's scratch at the end.
struct DxAmax {
  std::string parameter, declaration, partial;
};
DxAmax dxAmax(const RowAccess &dx) {
  if (!dx.amax)
    return {};
  return {amaxPartialsParameter, threadAmaxDeclaration, blockAmaxPartial("  ")};
}

/// Launches layer_norm_grad's first kernel (either shape) on `grid` blocks
/// of `block` threads, leaving `sets` partial sums of dgamma and dbeta.
void launchLayerNormGradInput(StepEmitter &emitter, LayerNormGradOp op,
                              const RowAccess &dx, const std::string &name,
                              const std::string &partials,
                              const std::string &amaxPartials, int64_t sets,
                              int64_t grid, int block) {
  int64_t width = op.getGamma().getType().getNumElements();
  int64_t rows = op.getInput().getType().getNumElements() / width;
  SmallVector<std::string> arguments{emitter.constPointer(op.getGrad()),
                                     emitter.constPointer(op.getInput()),
                                     emitter.constPointer(op.getGamma())};
  llvm::append_range(arguments, dx.arguments);
  arguments.push_back(partials);
  if (dx.amax)
    arguments.push_back(amaxPartials);
  // Mean and variance again (4 FLOPs an element), then the two sums (6),
  // dx (7) and the partial sums (3); and dx's amax (1).
  KernelCost cost = KernelCost()
                        .reads(op.getGrad())
                        .reads(op.getInput())
                        .reads(op.getGamma())
                        .writes(dx.written)
                        .writesBytes(sets * 2 * width * 4)
                        .flopsPer(rows * width, 20)
                        .flopsPer(rows, 7);
  if (dx.fused)
    cost += dx.fused->cost;
  if (dx.amax)
    cost.writesBytes(grid * 4).flopsPer(rows * width, 1);
  emitter.launch(name, grid, block, arguments, cost);
}

/// layer_norm_grad's first kernel a warp a row, for rows up to 32 *
/// maxWarpRowRegisters wide (the second is emitColumnSums). Its `sets`
/// partial sums are those of the block-a-row form: set s takes rows s, s +
/// sets, ..., and is warp s % gradRowWarps of block s / gradRowWarps (the
/// cpu target's one thread a block takes its block's sets in turn), so
/// the column sums add the same rows in the same order on every target.
/// A lane keeps its elements of x and dy in registers (unrolled), and
/// adds its own columns of the set's partials in shared memory: no barrier
/// and no shared reduction (a block a row paid four block reductions a
/// row, and ncu counted 2,200 warp instructions a row of GPT-2 small).
void emitLayerNormGradInputByWarps(StepEmitter &emitter, LayerNormGradOp op,
                                   const RowAccess &dx, const std::string &name,
                                   const std::string &partials,
                                   const std::string &amaxPartials,
                                   int64_t sets) {
  DxAmax amax = dxAmax(dx);
  int64_t width = op.getGamma().getType().getNumElements();
  int64_t rows = op.getInput().getType().getNumElements() / width;
  int64_t registers = (width + 31) / 32;
  std::string eps = floatLiteral(op.getEps().convertToDouble());
  std::string unrolledAt = warpRowUnrolledIndex(width);
  std::string at = llvm::formatv("r * {0}LL + j", width).str();
  std::string dxValue = "rstd * (g - sg - xhat * sgx)";
  emitter.addKernel(llvm::formatv(
      "{8}__global__ void {0}(const {1} *__restrict__ dy, const {2} "
      "*__restrict__ x, const {3} *__restrict__ gamma, {4}, "
      "float *__restrict__ partials{16}) {{\n"
      "  MPC_SHARED(float, acc, {5}LL);\n{17}"
      "  for (int w = MPC_ROW_WARP; w < {6}; w += MPC_ROW_WARPS) {{\n"
      "  long long set = (long long)blockIdx.x * {6} + w;\n"
      "  if (set >= {7}LL) break;\n"
      "  long long own = w * {9}LL; // the warp's partials in acc\n"
      "  MPC_FOR_LANE(j, {10}LL) {{ acc[own + j] = 0.0f; acc[own + {10}LL + j] "
      "= 0.0f; "
      "}\n"
      "  for (long long r = set; r < {11}LL; r += {7}LL) {{\n"
      "  const {1} *dyr = dy + r * {10}LL;\n"
      "  const {2} *xr = x + r * {10}LL;\n"
      "  if (mpc_row_lanes() * {12}LL >= {10}LL) {{\n"
      "    float xv[{12}], dv[{12}];\n"
      "    mpc_sum sum = 0.0f;\n"
      "    MPC_FOR_LANE_UNROLLED(k, j, {10}LL, {12}) {{\n"
      "      xv[k] = mpc_load(xr + j);\n"
      "      dv[k] = mpc_load(dyr + j);\n"
      "      sum += xv[k];\n"
      "    }\n"
      "    float mean = mpc_row_reduce_sum(sum) / {10}.0f;\n"
      "    mpc_sum squares = 0.0f;\n"
      "    MPC_FOR_LANE_UNROLLED(k, j, {10}LL, {12}) {{\n"
      "      float d = xv[k] - mean;\n"
      "      squares += d * d;\n"
      "    }\n"
      "    float rstd = mpc_rsqrt(mpc_row_reduce_sum(squares) / {10}.0f + "
      "{13});\n"
      "    mpc_sum sg = 0.0f, sgx = 0.0f;\n"
      "    // xv and dv become xhat and g: all the last loop needs.\n"
      "    MPC_FOR_LANE_UNROLLED(k, j, {10}LL, {12}) {{\n"
      "      float xhat = (xv[k] - mean) * rstd;\n"
      "      float d = dv[k];\n"
      "      float g = d * mpc_load(gamma + j);\n"
      "      sg += g;\n"
      "      sgx += g * xhat;\n"
      "      acc[own + j] = static_cast<float>(acc[own + j]) + d * xhat;\n"
      "      acc[own + {10}LL + j] = static_cast<float>(acc[own + {10}LL + j]) "
      "+ d;\n"
      "      xv[k] = xhat;\n"
      "      dv[k] = g;\n"
      "    }\n"
      "    sg = mpc_row_reduce_sum(sg) / {10}.0f;\n"
      "    sgx = mpc_row_reduce_sum(sgx) / {10}.0f;\n"
      "    MPC_FOR_LANE_UNROLLED(k, j, {10}LL, {12}) {{\n"
      "      float xhat = xv[k], g = dv[k];\n"
      "      {14}\n"
      "    }\n"
      "    continue;\n"
      "  }\n"
      "  mpc_sum sum = 0.0f;\n"
      "  MPC_FOR_LANE(j, {10}LL) sum += mpc_load(xr + j);\n"
      "  float mean = mpc_row_reduce_sum(sum) / {10}.0f;\n"
      "  mpc_sum squares = 0.0f;\n"
      "  MPC_FOR_LANE(j, {10}LL) {{ float d = mpc_load(xr + j) - mean; "
      "squares += d * d; }\n"
      "  float rstd = mpc_rsqrt(mpc_row_reduce_sum(squares) / {10}.0f + "
      "{13});\n"
      "  mpc_sum sg = 0.0f, sgx = 0.0f;\n"
      "  MPC_FOR_LANE(j, {10}LL) {{\n"
      "    float xhat = (mpc_load(xr + j) - mean) * rstd;\n"
      "    float g = mpc_load(dyr + j) * mpc_load(gamma + j);\n"
      "    sg += g;\n"
      "    sgx += g * xhat;\n"
      "  }\n"
      "  sg = mpc_row_reduce_sum(sg) / {10}.0f;\n"
      "  sgx = mpc_row_reduce_sum(sgx) / {10}.0f;\n"
      "  MPC_FOR_LANE(j, {10}LL) {{\n"
      "    float xhat = (mpc_load(xr + j) - mean) * rstd;\n"
      "    float d = mpc_load(dyr + j);\n"
      "    float g = d * mpc_load(gamma + j);\n"
      "    {15}\n"
      "    acc[own + j] = static_cast<float>(acc[own + j]) + d * xhat;\n"
      "    acc[own + {10}LL + j] = static_cast<float>(acc[own + {10}LL + j]) + "
      "d;\n"
      "  }\n"
      "  }\n"
      "  MPC_FOR_LANE(j, {10}LL) {{\n"
      "    partials[set * {9}LL + j] = acc[own + j];\n"
      "    partials[set * {9}LL + {10}LL + j] = acc[own + {10}LL + j];\n"
      "  }\n"
      "  }\n"
      "{18}"
      "}\n",
      name, elementCType(op.getGrad()), elementCType(op.getInput()),
      elementCType(op.getGamma()), llvm::join(dx.parameters, ", "),
      gradRowWarps * 2 * width, gradRowWarps, sets, dx.functions(), 2 * width,
      width, rows, registers, eps, dx.store(unrolledAt, dxValue),
      dx.store(at, dxValue), amax.parameter, amax.declaration, amax.partial));
  emitter.limitRegisters(name, gradRowRegisterBudget);
  launchLayerNormGradInput(emitter, op, dx, name, partials, amaxPartials, sets,
                           layerNormGradInputGrid(op), gradRowWarps * 32);
}

/// layer_norm_grad's first kernel a block a row (rows wider than a warp
/// takes): `blocks` blocks each take every gridDim-th row and leave their
/// partial sums of dgamma and dbeta in `partials`.
void emitLayerNormGradInputByBlocks(StepEmitter &emitter, LayerNormGradOp op,
                                    const RowAccess &dx,
                                    const std::string &rowName,
                                    const std::string &partials,
                                    const std::string &amaxPartials,
                                    int64_t blocks) {
  DxAmax amax = dxAmax(dx);
  int64_t width = op.getGamma().getType().getNumElements();
  int64_t rows = op.getInput().getType().getNumElements() / width;
  std::string eps = floatLiteral(op.getEps().convertToDouble());
  // Shared accumulators up to 32 KB (widths up to 4096). Thread j % blockDim
  // owns columns j and width + j from start to end: no barrier needed.
  bool shared = 2 * width * 4 <= 32 * 1024;
  std::string accumulators =
      shared
          ? llvm::formatv("  MPC_SHARED(float, acc, {0});\n", 2 * width).str()
          : llvm::formatv("  float *acc = partials + (long long)blockIdx.x "
                          "* {0}LL;\n",
                          2 * width)
                .str();
  std::string flush =
      shared ? llvm::formatv("  MPC_FOR_THREAD(j, {0}LL) {{\n"
                             "    partials[(long long)blockIdx.x * {1}LL + j] "
                             "= acc[j];\n"
                             "    partials[(long long)blockIdx.x * {1}LL + "
                             "{0}LL + j] = acc[{0}LL + j];\n"
                             "  }\n",
                             width, 2 * width)
                   .str()
             : "";
  // Each thread keeps its elements of x and dy in registers from the first
  // pass, as layer_norm does (EmitRow.cpp): the row is read once, not four
  // times, where the block has the threads for it; the same sums in the
  // same order otherwise. ptxas gave that 45-48 registers (62.5 %
  // occupancy on sm_90, from 100 %); asked for a full SM it fits 32 with
  // no spills (GPT-2 small, sm_90).
  std::string at = llvm::formatv("r * {0}LL + j", width).str();
  int64_t registers = (width + rowBlockSize - 1) / rowBlockSize;
  std::string inRegisters;
  if (registers <= maxRowRegisters)
    inRegisters = llvm::formatv(
        "  if (blockDim.x == {4}) {{\n"
        "    float xv[{0}], dv[{0}];\n"
        "    mpc_sum sum = 0.0f;\n"
        "    MPC_FOR_THREAD_UNROLLED_BY(k, j, {1}LL, {0}, {4}) {{\n"
        "      xv[k] = mpc_load(xr + j);\n"
        "      dv[k] = mpc_load(dyr + j);\n"
        "      sum += xv[k];\n"
        "    }\n"
        "    float mean = mpc_block_reduce_sum(sum) / {1}.0f;\n"
        "    mpc_sum squares = 0.0f;\n"
        "    MPC_FOR_THREAD_UNROLLED_BY(k, j, {1}LL, {0}, {4}) {{\n"
        "      float d = xv[k] - mean;\n"
        "      squares += d * d;\n"
        "    }\n"
        "    float rstd = mpc_rsqrt(mpc_block_reduce_sum(squares) / {1}.0f + "
        "{2});\n"
        "    mpc_sum sg = 0.0f, sgx = 0.0f;\n"
        "    MPC_FOR_THREAD_UNROLLED_BY(k, j, {1}LL, {0}, {4}) {{\n"
        "      float xhat = (xv[k] - mean) * rstd;\n"
        "      float g = dv[k] * mpc_load(gamma + j);\n"
        "      sg += g;\n"
        "      sgx += g * xhat;\n"
        "    }\n"
        "    sg = mpc_block_reduce_sum(sg) / {1}.0f;\n"
        "    sgx = mpc_block_reduce_sum(sgx) / {1}.0f;\n"
        "    MPC_FOR_THREAD_UNROLLED_BY(k, j, {1}LL, {0}, {4}) {{\n"
        "      float xhat = (xv[k] - mean) * rstd;\n"
        "      float d = dv[k];\n"
        "      float g = d * mpc_load(gamma + j);\n"
        "      {3}\n"
        "      acc[j] = static_cast<float>(acc[j]) + d * xhat;\n"
        "      acc[{1}LL + j] = static_cast<float>(acc[{1}LL + j]) + d;\n"
        "    }\n"
        "    continue;\n"
        "  }\n",
        registers, width, eps, dx.store(at, "rstd * (g - sg - xhat * sgx)"),
        rowBlockSize);
  emitter.addKernel(llvm::formatv(
      "{8}__global__ void {0}(const {1} *__restrict__ dy, const {2} "
      "*__restrict__ x, const {3} *__restrict__ gamma, {4}, "
      "float *__restrict__ partials{13}) {{\n"
      "{10}{14}"
      "  MPC_FOR_THREAD(j, {5}LL) {{ acc[j] = 0.0f; acc[{5}LL + j] = 0.0f; "
      "}\n"
      "  for (long long r = blockIdx.x; r < {7}LL; r += gridDim.x) {{\n"
      "  const {1} *dyr = dy + r * {5}LL;\n"
      "  const {2} *xr = x + r * {5}LL;\n"
      "{12}"
      "  mpc_sum sum = 0.0f;\n"
      "  MPC_FOR_THREAD(j, {5}LL) sum += mpc_load(xr + j);\n"
      "  float mean = mpc_block_reduce_sum(sum) / {5}.0f;\n"
      "  mpc_sum squares = 0.0f;\n"
      "  MPC_FOR_THREAD(j, {5}LL) {{ float d = mpc_load(xr + j) - mean; "
      "squares += d * d; }\n"
      "  float rstd = mpc_rsqrt(mpc_block_reduce_sum(squares) / {5}.0f + "
      "{6});\n"
      "  mpc_sum sg = 0.0f, sgx = 0.0f;\n"
      "  MPC_FOR_THREAD(j, {5}LL) {{\n"
      "    float xhat = (mpc_load(xr + j) - mean) * rstd;\n"
      "    float g = mpc_load(dyr + j) * mpc_load(gamma + j);\n"
      "    sg += g;\n"
      "    sgx += g * xhat;\n"
      "  }\n"
      "  sg = mpc_block_reduce_sum(sg) / {5}.0f;\n"
      "  sgx = mpc_block_reduce_sum(sgx) / {5}.0f;\n"
      "  MPC_FOR_THREAD(j, {5}LL) {{\n"
      "    float xhat = (mpc_load(xr + j) - mean) * rstd;\n"
      "    float d = mpc_load(dyr + j);\n"
      "    float g = d * mpc_load(gamma + j);\n"
      "    {9}\n"
      "    acc[j] = static_cast<float>(acc[j]) + d * xhat;\n"
      "    acc[{5}LL + j] = static_cast<float>(acc[{5}LL + j]) + d;\n"
      "  }\n"
      "  }\n"
      "{11}{15}"
      "}\n",
      rowName, elementCType(op.getGrad()), elementCType(op.getInput()),
      elementCType(op.getGamma()), llvm::join(dx.parameters, ", "), width, eps,
      rows, dx.functions(),
      dx.store(llvm::formatv("r * {0}LL + j", width).str(),
               "rstd * (g - sg - xhat * sgx)"),
      accumulators, flush, inRegisters, amax.parameter, amax.declaration,
      amax.partial));
  // ptxas (sm_90), x and dy of `registers` elements a thread held: 3 fit
  // 32 registers; 5 (1,280 wide) spilled at 32 (with the amax of dx for
  // FP8 too), not at 48; 7 (GPT-2 XL's 1,600) fit 48, 8 and 12 fit 64,
  // 16 (4,096 wide) needed 96. With blockDim.x's stride rather than the
  // constant's, 7 and more spilled at these budgets.
  if (!inRegisters.empty())
    emitter.limitRegisters(rowName, registers <= 3    ? 32
                                    : registers <= 7  ? 48
                                    : registers <= 12 ? 64
                                                      : 96);
  launchLayerNormGradInput(emitter, op, dx, rowName, partials, amaxPartials,
                           blocks, blocks, rowBlockSize);
}

/// layer_norm_grad over rows of `width` elements (gamma's element count).
/// Rows up to 32 * maxWarpRowRegisters wide take a warp each
/// (emitLayerNormGradInputByWarps); wider ones a block, as follows.
/// Kernel 1, layerNormGradBlocks blocks each taking every gridDim-th row:
/// recomputes the row's mean and rstd and writes
///   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * gamma,
/// and adds dy * xhat and dy to its block's per-column partial sums of
/// dgamma and dbeta (each thread its own columns, in shared memory where
/// they fit, else in the scratch itself), which it leaves in scratch.
/// Kernel 2, per column: dgamma[j] and dbeta[j] are the sums of the blocks'
/// partials, in block order. No pass over the activations but the first,
/// and the same sums in the same order on every target (deterministic).
} // namespace

int64_t mlir::mpc::layerNormGradInputGrid(LayerNormGradOp op) {
  int64_t width = op.getGamma().getType().getNumElements();
  int64_t blocks = layerNormGradBlocks(op);
  // A warp a row takes each block's sets in its warps.
  if (width <= 32 * maxWarpRowRegisters)
    return (blocks + gradRowWarps - 1) / gradRowWarps;
  return blocks;
}

namespace {

LogicalResult emitLayerNormGrad(StepEmitter &emitter, const Step &step,
                                LayerNormGradOp op) {
  int64_t width = op.getGamma().getType().getNumElements();
  int64_t blocks = layerNormGradBlocks(op);
  std::string partials = emitter.scratchPointer(step, "float");

  std::string rowName = emitter.kernelName("layer_norm_grad_input");
  // In a `row` group, dx goes through the group's epilogue (the residual
  // gradient added to it) before it is stored.
  FailureOr<RowAccess> dx =
      rowOutput(emitter, step, op, op.getInputGrad(), "dx", rowName);
  if (failed(dx))
    return failure();
  // A current-scaling quantization of what it stores after it in the
  // group: the kernel finds its amax, each block's into the step's scratch.
  std::string amaxPartials;
  if (QuantizeOp quantize = storedAmaxQuantize(step)) {
    dx->amax = "amax";
    amaxPartials = emitter.scratchPointer(
        step, "float", quantizeScratch(step, quantize).amaxOffset,
        layerNormGradInputGrid(op) * 4);
  }
  if (width <= 32 * maxWarpRowRegisters)
    emitLayerNormGradInputByWarps(emitter, op, *dx, rowName, partials,
                                  amaxPartials, blocks);
  else
    emitLayerNormGradInputByBlocks(emitter, op, *dx, rowName, partials,
                                   amaxPartials, blocks);
  emitColumnSums(emitter, emitter.kernelName("layer_norm_grad_params"),
                 partials, blocks, 2 * width, width,
                 {{op.getGammaGrad(), 0, "dgamma"},
                  {op.getBetaGrad(), width, "dbeta"}});
  return success();
}

/// rms_norm_grad over rows of `width` elements, with xhat = x * rstd and
/// g = dy * gamma:
///   dx = rstd * (g - xhat * mean(g * xhat)),  dgamma = sum over rows of
///   dy * xhat.
/// Kernel 1, `rmsNormGradBlocks` blocks striding over the rows: dx, and
/// each block's partial dgamma in scratch. Kernel 2, per column: the
/// partials summed in block order (deterministic, as layer_norm_grad).
void emitRmsNormGrad(StepEmitter &emitter, const Step &step, RmsNormGradOp op) {
  int64_t width = op.getGamma().getType().getNumElements();
  int64_t rows = op.getInput().getType().getNumElements() / width;
  int64_t blocks = rmsNormGradBlocks(op);
  std::string partials = emitter.scratchPointer(step, "float");
  std::string rowName = emitter.kernelName("rms_norm_grad_input");
  // Each thread owns columns j, j + blockDim, ... of the block's partials:
  // no barrier between rows.
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ dy, const {1} "
      "*__restrict__ x, const {2} *__restrict__ gamma, {1} *__restrict__ "
      "dx, float *__restrict__ partials) {{\n"
      "  float *acc = partials + (long long)blockIdx.x * {3}LL;\n"
      "  MPC_FOR_THREAD(j, {3}LL) acc[j] = 0.0f;\n"
      "  for (long long r = blockIdx.x; r < {4}LL; r += gridDim.x) {{\n"
      "    const {1} *dyr = dy + r * {3}LL;\n"
      "    const {1} *xr = x + r * {3}LL;\n"
      "    mpc_sum squares = 0.0f;\n"
      "    MPC_FOR_THREAD(j, {3}LL) {{ float v = mpc_load(xr + j); "
      "squares += v * v; }\n"
      "    float rstd = mpc_rsqrt(mpc_block_reduce_sum(squares) / {3}.0f + "
      "{5});\n"
      "    mpc_sum sgx = 0.0f;\n"
      "    MPC_FOR_THREAD(j, {3}LL) sgx += mpc_load(dyr + j) * "
      "mpc_load(gamma + j) * mpc_load(xr + j) * rstd;\n"
      "    float mean_gx = mpc_block_reduce_sum(sgx) / {3}.0f;\n"
      "    MPC_FOR_THREAD(j, {3}LL) {{\n"
      "      float xhat = mpc_load(xr + j) * rstd;\n"
      "      float d = mpc_load(dyr + j);\n"
      "      mpc_store(dx + r * {3}LL + j, rstd * (d * mpc_load(gamma + j) - "
      "xhat * mean_gx));\n"
      "      acc[j] += d * xhat;\n"
      "    }\n"
      "  }\n"
      "}\n",
      rowName, elementCType(op.getInput()), elementCType(op.getGamma()), width,
      rows, floatLiteral(op.getEps().convertToDouble())));
  // The mean square again (2 FLOPs an element), the sum (4), dx (5) and the
  // partial sums (2).
  emitter.launch(rowName, blocks, rowBlockSize,
                 {emitter.constPointer(op.getGrad()),
                  emitter.constPointer(op.getInput()),
                  emitter.constPointer(op.getGamma()),
                  emitter.pointer(op.getInputGrad()), partials},
                 KernelCost()
                     .reads(op.getGrad())
                     .reads(op.getInput())
                     .reads(op.getGamma())
                     .writes(op.getInputGrad())
                     .writesBytes(blocks * width * 4)
                     .flopsPer(rows * width, 13)
                     .flopsPer(rows, 4));

  emitColumnSums(emitter, emitter.kernelName("rms_norm_grad_gamma"), partials,
                 blocks, width, width, {{op.getGammaGrad(), 0, "dgamma"}});
}

/// batch_norm_grad in training mode, over channel dim 1 of [N, C] or
/// [N, C, H, W], with m = N * H * W elements per channel:
///   dbeta = sum dy, dgamma = sum dy * xhat,
///   dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)),
/// with the forward's mean and rstd where the op reads them (`stats`, from
/// mpc-save-batch-norm-statistics), else the batch mean and variance
/// computed again from x. dy is read through
/// the prologue mpc-form-kernels grouped with it (the ReLU's gradient, from
/// the ReLU's output; with the residual gradients added first, which the
/// kernel then stores for the shortcut). Where a block sums a whole
/// channel: one kernel, a block a channel, the sums and then dx (the
/// channel read again from L2). Where channels are summed in slices: each
/// slice's sums, then per channel the parameters' gradients and the
/// statistics dx needs, then dx elementwise.
LogicalResult emitBatchNormGrad(StepEmitter &emitter, const Step &step,
                                BatchNormGradOp op) {
  auto type = op.getInput().getType();
  int64_t batch = type.getDimSize(0), channels = type.getDimSize(1);
  int64_t spatial = type.getNumElements() / (batch * channels);
  int64_t count = batch * spatial;
  std::string eps = floatLiteral(op.getEps().convertToDouble());
  std::string stats =
      emitter.scratchPointer(step, "float", 0, 4 * channels * 4);
  // The channel's elements for MPC_SUM_CHANNEL: `at` from its first.
  std::string channel = llvm::formatv("{0}LL, {1}LL, {2}LL, at", batch, spatial,
                                      channels * spatial);
  // dy's element `at` of channel c.
  std::string at = llvm::formatv("c * {0}LL + at", spatial);
  // The cost of reading dy: its prologue's loads, or dy itself.
  auto readsDy = [&](KernelCost &cost, const RowAccess &dy) {
    if (dy.fused)
      cost += dy.fused->cost;
    else
      cost.reads(op.getGrad());
  };
  // dy's parameters before the others (a prologue of constants has none).
  auto leading = [](ArrayRef<std::string> parameters) {
    std::string text;
    for (const std::string &parameter : parameters)
      text += parameter + ", ";
    return text;
  };
  // dx is not stored where nothing reads it (the gradient of a model's
  // input).
  bool writesDx = emitter.getPlan().isMaterialised(op.getInputGrad());
  std::string dxParameter =
      writesDx ? ", " + elementCType(op.getInputGrad()) + " *__restrict__ dx"
               : "";
  // The channel's constants of dx, from the sums of dy and dy * xhat over
  // its count elements (none where dx is not written).
  auto dxConstants = [&](int64_t count, StringRef indent) -> std::string {
    if (!writesDx)
      return "";
    return llvm::formatv("{0}float meanDy = tdy / {1}.0f, meanDyXhat = tdyx / "
                         "{1}.0f, gamma_c = mpc_load(gamma + c);\n",
                         indent, count);
  };
  // The ReLU whose gradient this one takes (mpc-save-batch-norm-statistics
  // folded it in): dy `d` masked by the forward's output at the element
  // whose x is `xValue`, given mean, rstd, gamma `g` and relu_b. The
  // prologue's value (what a shortcut reads) is stored unmasked.
  Value reluBeta = op.getReluBeta();
  auto masked = [&](StringRef d, StringRef xValue, StringRef g) -> std::string {
    if (!reluBeta)
      return d.str();
    return llvm::formatv("mpc_batch_norm_relu_grad<{0}>({1}, {2}, mean, rstd, "
                         "{3}, relu_b)",
                         elementCType(op.getInput()), d, xValue, g);
  };
  // (x - mean) * rstd * g + b, once an element for each pass that masks.
  int64_t reluMaskFlops = reluBeta ? 4 : 0;
  std::string reluParameter = reluBeta ? ", const " + elementCType(reluBeta) +
                                             " *__restrict__ relu_beta"
                                       : "";
  auto addReluBeta = [&](SmallVector<std::string> &arguments,
                         KernelCost &cost) {
    if (!reluBeta)
      return;
    arguments.push_back(emitter.constPointer(reluBeta));
    cost.reads(reluBeta);
  };
  // Channel c's gamma and beta for the mask, where gamma_c is not loaded.
  auto reluConstants = [&](StringRef indent) -> std::string {
    if (!reluBeta)
      return "";
    return llvm::formatv("{0}float relu_g = mpc_load(gamma + c), relu_b = "
                         "mpc_load(relu_beta + c);\n",
                         indent);
  };
  // dx's statement at element i, given mean, rstd, meanDy, meanDyXhat,
  // gamma_c (and relu_b); it stores dy where the prologue's value is read
  // after.
  auto inputGradient = [&](const RowAccess &dy, StringRef indent) {
    std::string code =
        llvm::formatv("{0}float d = {1};\n", indent, dy.load("i"));
    if (dy.stored)
      code += llvm::formatv("{0}mpc_store({1} + i, d);\n", indent, *dy.stored);
    if (writesDx) {
      if (reluBeta)
        code += llvm::formatv("{0}d = {1};\n", indent,
                              masked("d", "mpc_load(x + i)", "gamma_c"));
      code += llvm::formatv("{0}float xhat = (mpc_load(x + i) - mean) * rstd;\n"
                            "{0}float g = d - meanDy - xhat * meanDyXhat;\n"
                            "{0}mpc_store(dx + i, gamma_c * rstd * g);\n",
                            indent);
    }
    return code;
  };
  auto addDx = [&](SmallVector<std::string> &arguments, KernelCost &cost) {
    if (!writesDx)
      return;
    arguments.push_back(emitter.pointer(op.getInputGrad()));
    cost.writes(op.getInputGrad());
  };
  // So are gamma's and beta's where nothing reads them (a model that does
  // not train them; an unused beta).
  SmallVector<std::pair<Value, StringRef>> parameterGrads;
  for (auto [grad, name] :
       {std::pair<Value, StringRef>{op.getGammaGrad(), "dgamma"},
        {op.getBetaGrad(), "dbeta"}})
    if (emitter.getPlan().isMaterialised(grad))
      parameterGrads.push_back({grad, name});
  std::string parameterGradParameters;
  for (auto [grad, name] : parameterGrads)
    parameterGradParameters +=
        (", " + elementCType(grad) + " *__restrict__ " + name).str();
  // The stores of dgamma and dbeta at channel c, given their values.
  auto storeParameterGrads = [&](StringRef dgamma, StringRef dbeta,
                                 StringRef indent) {
    std::string code;
    for (auto [grad, name] : parameterGrads)
      code += llvm::formatv("{0}mpc_store({1} + c, {2});\n", indent, name,
                            name == "dgamma" ? dgamma : dbeta);
    return code;
  };
  auto addParameterGrads = [&](SmallVector<std::string> &arguments,
                               KernelCost &cost) {
    for (auto [grad, name] : parameterGrads) {
      arguments.push_back(emitter.pointer(grad));
      cost.writes(grad);
    }
  };

  // The forward's statistics, [2, C]: the means, then the rstds.
  Value saved = op.getStats();
  std::string savedParameter = saved ? ", const float *__restrict__ saved" : "";
  auto addSaved = [&](SmallVector<std::string> &arguments, KernelCost &cost) {
    if (!saved)
      return;
    arguments.push_back(emitter.constPointer(saved));
    cost.reads(saved);
  };

  int64_t splits = batchNormSplits(type);
  if (splits == 1) {
    std::string name = emitter.kernelName("batch_norm_grad");
    FailureOr<RowAccess> dy =
        rowInput(emitter, step, op, op.getGrad(), "dy", name);
    if (failed(dy))
      return failure();
    std::string statistics =
        saved ? llvm::formatv("  float mean = saved[c], rstd = saved[{0}LL + "
                              "c];\n{1}",
                              channels, reluConstants("  "))
                    .str()
              : llvm::formatv(
                    "  mpc_sum sum = 0.0f;\n"
                    "  MPC_SUM_CHANNEL({0}, sum, mpc_load(xc + at));\n"
                    "  float mean = mpc_block_reduce_sum(sum) / {1}.0f;\n"
                    "  mpc_sum squares = 0.0f;\n"
                    "  MPC_SUM_CHANNEL({0}, squares, mpc_square(mpc_load(xc "
                    "+ at) - mean));\n"
                    "  float rstd = mpc_rsqrt(mpc_block_reduce_sum(squares) / "
                    "{1}.0f + {2});\n",
                    channel, count, eps)
                    .str();
    int block = batchNormBlockSize(count);
    int64_t registers = (count + block - 1) / block;
    // On the GPU, with the forward's statistics, where the block's threads
    // hold the channel (the block as launched; an emulated block of fewer
    // threads takes the passes below): each thread keeps its elements of
    // dy (its prologue evaluated once) and of x in registers from the sums
    // to dx. The same sums in the same order, the same arithmetic.
    std::string inRegisters;
    // Where a thread has too many elements for as many floats, a half dy
    // whose planes have an even number of elements is kept in pairs
    // (ResNet-50's 28x28 stages: 13 a thread), packed from its prologue's
    // values, which are already of dy's type; x is loaded in pairs, and
    // again for dx (from L2). The sums take a pair's elements in turn, as
    // the forward's pairs do. Keeping x too, or 64-bit offsets, spilled
    // (ptxas, f16, sm_80 and sm_90, 64 registers).
    int64_t pairRegisters = (count / 2 + block - 1) / block;
    bool inPairs = saved && registers > maxChannelRegisters &&
                   (writesDx || dy->stored) && !(reluBeta && dy->stored) &&
                   elementBytes(op.getInput()) == 2 &&
                   elementBytes(op.getGrad()) == 2 &&
                   (!writesDx || elementBytes(op.getInputGrad()) == 2) &&
                   spatial % 2 == 0 && pairRegisters <= maxChannelRegisters &&
                   type.getNumElements() <= std::numeric_limits<int32_t>::max();
    if (inPairs) {
      std::string dyType = elementCType(op.getGrad());
      std::string xType = elementCType(op.getInput());
      // dy kept as it was packed; dx's two elements packed and stored
      // together (4-byte stores).
      std::string gradient;
      if (dy->stored)
        gradient += llvm::formatv("      mpc_store_pair({0} + i, dv[k]);\n",
                                  *dy->stored);
      if (writesDx) {
        gradient += "      mpc_pair xp = mpc_load_pair(x + i);\n";
        for (int j = 0; j < 2; ++j)
          gradient += llvm::formatv(
              "      float xhat{1} = (mpc_pair_element<{0}>(xp, {1}) - "
              "mean) * rstd;\n"
              "      float g{1} = mpc_pair_element<{2}>(dv[k], {1}) - meanDy - "
              "xhat{1} * meanDyXhat;\n",
              xType, j, dyType);
        gradient += llvm::formatv(
            "      mpc_store_pair(dx + i, mpc_make_pair<{0}>(gamma_c * rstd * "
            "g0, gamma_c * rstd * g1));\n",
            elementCType(op.getInputGrad()));
      }
      inRegisters = llvm::formatv(
          "#ifdef MPC_DEVICE_BLOCKS\n"
          "  if (blockDim.x * {0}LL >= {1}LL) {{\n"
          "    mpc_pair dv[{0}];\n"
          "    mpc_sum sdy = 0.0f, sdyx = 0.0f;\n"
          "    MPC_FOR_THREAD_UNROLLED(k, p, {1}LL, {0}) {{\n"
          "      int at = {2};\n"
          "      mpc_pair xp = mpc_load_pair(xc + at);\n"
          "      float d0 = {3}, d1 = {4};\n"
          "      dv[k] = mpc_make_pair<{5}>(d0, d1);\n"
          "      sdy += d0;\n"
          "      sdyx += d0 * (mpc_pair_element<{6}>(xp, 0) - mean) * "
          "rstd;\n"
          "      sdy += d1;\n"
          "      sdyx += d1 * (mpc_pair_element<{6}>(xp, 1) - mean) * "
          "rstd;\n"
          "    }\n"
          "    float tdy = mpc_block_reduce_sum(sdy);\n"
          "    float tdyx = mpc_block_reduce_sum(sdyx);\n"
          "    if (threadIdx.x == 0) {{\n"
          "{7}"
          "    }\n"
          "{8}"
          "    MPC_FOR_THREAD_UNROLLED(k, p, {1}LL, {0}) {{\n"
          "      long long i = c * {9}LL + {2};\n"
          "{10}"
          "    }\n"
          "    return;\n"
          "  }\n"
          "#endif\n",
          pairRegisters, count / 2,
          llvm::formatv("p / {0} * {1} + p % {0} * 2", spatial / 2,
                        channels * spatial),
          masked(dy->load(at),
                 llvm::formatv("mpc_pair_element<{0}>(xp, 0)", xType).str(),
                 "relu_g"),
          masked(dy->load(at + " + 1"),
                 llvm::formatv("mpc_pair_element<{0}>(xp, 1)", xType).str(),
                 "relu_g"),
          dyType, xType, storeParameterGrads("tdyx", "tdy", "      "),
          dxConstants(count, "    "), spatial, gradient);
    } else if (saved && registers <= maxChannelRegisters &&
               (writesDx || dy->stored) && !(reluBeta && dy->stored)) {
      // 32-bit offsets where the tensor allows (EmitRow.cpp's forward).
      const char *suffix =
          type.getNumElements() <= std::numeric_limits<int32_t>::max() ? ""
                                                                       : "LL";
      std::string element = llvm::formatv("t / {0}{2} * {1}{2} + t % {0}{2}",
                                          spatial, channels * spatial, suffix);
      std::string gradient;
      if (dy->stored)
        gradient +=
            llvm::formatv("      mpc_store({0} + i, dv[k]);\n", *dy->stored);
      if (writesDx)
        gradient += "      float xhat = (xv[k] - mean) * rstd;\n"
                    "      float g = dv[k] - meanDy - xhat * meanDyXhat;\n"
                    "      mpc_store(dx + i, gamma_c * rstd * g);\n";
      inRegisters = llvm::formatv(
          "#ifdef MPC_DEVICE_BLOCKS\n"
          "  if (blockDim.x * {0}LL >= {1}LL) {{\n"
          "    float dv[{0}], xv[{0}];\n"
          "    mpc_sum sdy = 0.0f, sdyx = 0.0f;\n"
          "    MPC_FOR_THREAD_UNROLLED(k, t, {1}LL, {0}) {{\n"
          "      long long at = {2};\n"
          "      xv[k] = mpc_load(xc + at);\n"
          "      dv[k] = {3};\n"
          "      sdy += dv[k];\n"
          "      sdyx += dv[k] * (xv[k] - mean) * rstd;\n"
          "    }\n"
          "    float tdy = mpc_block_reduce_sum(sdy);\n"
          "    float tdyx = mpc_block_reduce_sum(sdyx);\n"
          "    if (threadIdx.x == 0) {{\n"
          "{4}"
          "    }\n"
          "{7}"
          "    MPC_FOR_THREAD_UNROLLED(k, t, {1}LL, {0}) {{\n"
          "      long long i = c * {5}LL + {2};\n"
          "{6}"
          "    }\n"
          "    return;\n"
          "  }\n"
          "#endif\n",
          registers, count, element, masked(dy->load(at), "xv[k]", "relu_g"),
          storeParameterGrads("tdyx", "tdy", "      "), spatial, gradient,
          dxConstants(count, "    "));
    }
    emitter.addKernel(llvm::formatv(
        "{10}__global__ void {0}({1}const {2} *__restrict__ x, const {3} "
        "*__restrict__ gamma{14}{16}{4}{6}) {{\n"
        "  long long c = blockIdx.x;\n"
        "  const {2} *xc = x + c * {11}LL;\n"
        "{9}"
        "{15}"
        "  mpc_sum sdy = 0.0f, sdyx = 0.0f;\n"
        "  MPC_SUM_CHANNEL2_OF({8}, d, {12}, sdy, d, sdyx, d * (mpc_load(xc + "
        "at) - mean) * rstd);\n"
        "  float tdy = mpc_block_reduce_sum(sdy);\n"
        "  float tdyx = mpc_block_reduce_sum(sdyx);\n"
        "  if (threadIdx.x == 0) {{\n"
        "{5}"
        "  }\n"
        "{13}"
        "}\n",
        name, leading(dy->parameters), elementCType(op.getInput()),
        elementCType(op.getGamma()), parameterGradParameters,
        storeParameterGrads("tdyx", "tdy", "    "), dxParameter, count, channel,
        statistics, dy->functions(), spatial,
        masked(dy->load(at), "mpc_load(xc + at)", "relu_g"),
        writesDx || dy->stored
            ? llvm::formatv("{3}"
                            "  MPC_FOR_CHANNEL({0}) {{\n"
                            "    long long i = c * {1}LL + at;\n"
                            "{2}"
                            "  }\n",
                            channel, spatial, inputGradient(*dy, "    "),
                            dxConstants(count, "  "))
                  .str()
            : std::string(),
        savedParameter, inRegisters, reluParameter));
    SmallVector<std::string> arguments(dy->arguments);
    arguments.append({emitter.constPointer(op.getInput()),
                      emitter.constPointer(op.getGamma())});
    // Mean and variance unless saved (4 FLOPs an element), the two sums
    // (5), dx (7); x and dy are read from DRAM once (the block's later
    // passes over its channel find them in L2).
    KernelCost cost =
        KernelCost()
            .reads(op.getInput())
            .reads(op.getGamma())
            .flopsPer(count * channels, (saved ? 12 : 16) + reluMaskFlops)
            .flopsPer(channels, 10);
    addSaved(arguments, cost);
    addReluBeta(arguments, cost);
    readsDy(cost, *dy);
    addParameterGrads(arguments, cost);
    addDx(arguments, cost);
    emitter.launch(name, channels, block, arguments, cost);
    if (!inRegisters.empty())
      emitter.limitRegisters(name, channelRegisterBudget);
    return success();
  }

  // Without the forward's statistics, as the forward computes them
  // (EmitRow.cpp): per slice the sums of x and dy, then the squares and the
  // sum of dy * x about the slice's mean; per channel, Chan et al.'s
  // combination, and
  //   sum dy (x - mean) = sum_s [sum dy (x - mean_s)
  //                              + (mean_s - mean) sum_s dy].
  // With them, one pass a slice: the sums of dy and dy * (x - mean).
  int64_t slice = (count + splits - 1) / splits;
  int64_t sums = saved ? 2 : 4;
  // The sliced kernels' blocks: as many threads as hold a slice in
  // registers (the cluster form's, so that both sum in the same order).
  int sliceBlock = batchNormBlockSize(slice);

  // On GPUs with thread-block clusters, with the forward's statistics: the
  // channel's blocks are one cluster. Each block sums its slice as
  // batch_norm_grad_partials does, keeping dy and x in registers (two to a
  // register where both are 2-byte: dy there is a 2-byte tensor's value,
  // exact in it); after the cluster's barrier every block combines the
  // channel's partials as batch_norm_grad_params does and computes dx from
  // its registers. The same values as the sliced kernels, bit for bit, and
  // x and dy's operands are read once (the sliced form reads x and dy
  // twice, and stores a shortcut's dy to read it back).
  int64_t heldElements = (slice + sliceBlock - 1) / sliceBlock;
  bool heldInPairs = elementBytes(op.getInput()) == 2 &&
                     elementBytes(op.getGrad()) == 2;
  int64_t heldRegisters = heldInPairs ? (heldElements + 1) / 2 : heldElements;
  if (saved && splits <= maxClusterBlocks &&
      emitter.getPlan().threadBlockClusters &&
      heldRegisters <= maxChannelRegisters) {
    std::string name = emitter.kernelName("batch_norm_grad_cluster");
    FailureOr<RowAccess> dy =
        rowInput(emitter, step, op, op.getGrad(), "dy", name);
    if (failed(dy))
      return failure();
    // After the channels' four values (Codegen.cpp's scratchBytes), where
    // the sliced form keeps them.
    std::string partials = emitter.scratchPointer(
        step, "float", 4 * channels * 4, 2 * channels * splits * 4);
    std::string xType = elementCType(op.getInput());
    std::string dyType = elementCType(op.getGrad());
    std::string offset = llvm::formatv("t / {0}LL * {1}LL + t % {0}LL",
                                       spatial, channels * spatial);
    std::string firstDy = dy->load(at);
    if (dy->stored)
      firstDy = llvm::formatv("mpc_store_and_use({0} + {1}, {2})",
                              *dy->stored, at, firstDy);
    // Nothing is held where dx is not written (only the sums are).
    auto hold = [&](StringRef array, StringRef type, StringRef value) {
      if (!writesDx)
        return std::string();
      return heldInPairs ? llvm::formatv("mpc_hold_pair<{0}>({1}, k, {2});",
                                         type, array, value)
                               .str()
                         : llvm::formatv("{0}[k] = {1};", array, value).str();
    };
    auto heldValue = [&](StringRef array, StringRef type) {
      return heldInPairs
                 ? llvm::formatv("mpc_held_pair<{0}>({1}, k)", type, array)
                       .str()
                 : llvm::formatv("{0}[k]", array).str();
    };
    // dy at element i for the passes: as the sliced input kernel reads it.
    std::string passDy =
        dy->stored ? llvm::formatv("mpc_load({0} + i)", *dy->stored).str()
                   : dy->load("i");
    std::string gradient;
    if (writesDx)
      gradient = llvm::formatv(
          "  float meanDy = csdy / {0}.0f, meanDyXhat = channelDyXhat / {0}.0f, "
          "gamma_c = mpc_load(gamma + c);\n"
          "  if (held) {{\n"
          "    MPC_FOR_THREAD_UNROLLED(k, j, end - begin, {1}) {{\n"
          "      long long t = begin + j;\n"
          "      long long i = c * {2}LL + {3};\n"
          "      float d = {4};\n"
          "      float xhat = ({5} - mean) * rstd;\n"
          "      float g = d - meanDy - xhat * meanDyXhat;\n"
          "      mpc_store(dx + i, gamma_c * rstd * g);\n"
          "    }\n"
          "  } else {{\n"
          "    for (long long t = begin + threadIdx.x; t < end; t += "
          "blockDim.x) {{\n"
          "      long long i = c * {2}LL + {3};\n"
          "      float d = {6};\n"
          "      float xhat = (mpc_load(x + i) - mean) * rstd;\n"
          "      float g = d - meanDy - xhat * meanDyXhat;\n"
          "      mpc_store(dx + i, gamma_c * rstd * g);\n"
          "    }\n"
          "  }\n",
          count, heldElements, spatial, offset, heldValue("dv", dyType),
          heldValue("xv", xType),
          masked(passDy, "mpc_load(x + i)", "gamma_c"));
    std::string heldArrays =
        writesDx ? llvm::formatv("  {0} xv[{1}], dv[{1}];\n",
                                 heldInPairs ? "mpc_pair" : "float",
                                 heldRegisters)
                       .str()
                 : std::string();
    emitter.addKernel(llvm::formatv(
        "{0}__global__ void {1}({2}const {3} *__restrict__ x, const float "
        "*__restrict__ saved, const {4} *__restrict__ gamma{5}, float "
        "*__restrict__ partials{6}{7}) {{\n"
        "  long long c = blockIdx.x / {8}LL, s = blockIdx.x % {8}LL;\n"
        "  const {3} *xc = x + c * {9}LL;\n"
        "  long long begin = s * {10}LL;\n"
        "  long long end = begin + {10}LL < {11}LL ? begin + {10}LL : "
        "{11}LL;\n"
        "  float mean = saved[c], rstd = saved[{12}LL + c];\n"
        "{13}"
        // The block's threads hold its slice (an emulated block of fewer
        // threads reads it again).
        "  bool held = blockDim.x * {14}LL >= end - begin;\n"
        "{15}"
        "  mpc_sum sdy = 0.0f, sdyx = 0.0f;\n"
        "  if (held) {{\n"
        "    MPC_FOR_THREAD_UNROLLED(k, j, end - begin, {14}) {{\n"
        "      long long t = begin + j;\n"
        "      long long at = {16};\n"
        "      float xk = mpc_load(xc + at);\n"
        "      float d = {17};\n"
        "      {18}\n"
        "      {19}\n"
        "      sdy += d;\n"
        "      sdyx += d * (xk - mean);\n"
        "    }\n"
        "  } else {{\n"
        "    MPC_SUM_CHANNEL_SLICE2_OF(begin, end, {9}LL, {20}LL, at, d, "
        "{21}, sdy, d, sdyx, d * (mpc_load(xc + at) - mean));\n"
        "  }\n"
        "  float tdy = mpc_block_reduce_sum(sdy);\n"
        "  float dyx = mpc_block_reduce_sum(sdyx);\n"
        "  if (threadIdx.x == 0) {{\n"
        "    partials[2LL * blockIdx.x] = tdy;\n"
        "    partials[2LL * blockIdx.x + 1] = dyx;\n"
        "  }\n"
        // Every block of the channel has stored its partials.
        "  mpc_cluster_sync();\n"
        "  const float *p = partials + 2LL * {8}LL * c;\n"
        "  float csdy = 0.0f, cdyx = 0.0f;\n"
        "  for (long long r = 0; r < {8}LL; ++r) {{\n"
        "    csdy += p[2 * r];\n"
        "    cdyx += p[2 * r + 1];\n"
        "  }\n"
        "  float channelDyXhat = cdyx * rstd;\n"
        "  if (s == 0 && threadIdx.x == 0) {{\n"
        "{22}"
        "  }\n"
        "{23}"
        "}\n",
        dy->functions(), name, leading(dy->parameters), xType,
        elementCType(op.getGamma()), reluParameter, parameterGradParameters,
        dxParameter, splits, spatial, slice, count, channels,
        reluConstants("  "), heldElements, heldArrays, offset,
        masked(firstDy, "xk", "relu_g"), hold("xv", xType, "xk"),
        hold("dv", dyType, "d"), channels * spatial,
        masked(firstDy, "mpc_load(xc + at)", "relu_g"),
        storeParameterGrads("channelDyXhat", "csdy", "    "), gradient));
    SmallVector<std::string> arguments(dy->arguments);
    arguments.append({emitter.constPointer(op.getInput()),
                      emitter.constPointer(saved),
                      emitter.constPointer(op.getGamma())});
    // The two sums (4 FLOPs an element, and the mask's), dx (7); x and dy's
    // operands read once, the partials written and read by the channel's
    // blocks from L2.
    KernelCost cost = KernelCost()
                          .reads(op.getInput())
                          .reads(saved)
                          .reads(op.getGamma())
                          .writesBytes(2 * channels * splits * 4)
                          .readsBytes(2 * channels * splits * 4)
                          .flopsPer(count * channels, 4 + reluMaskFlops)
                          .flopsPer(channels * splits, 2)
                          .flopsPer(channels, 8);
    if (writesDx)
      cost.flopsPer(count * channels, 7);
    addReluBeta(arguments, cost);
    arguments.push_back(partials);
    readsDy(cost, *dy);
    addParameterGrads(arguments, cost);
    addDx(arguments, cost);
    emitter.launchCluster(name, channels * splits, sliceBlock,
                          static_cast<int>(splits), arguments, cost);
    emitter.limitRegisters(name, channelRegisterBudget);
    return success();
  }

  // After the channels' four values (Codegen.cpp's scratchBytes).
  std::string partials = emitter.scratchPointer(step, "float", 4 * channels * 4,
                                                sums * channels * splits * 4);
  std::string partialsName = emitter.kernelName("batch_norm_grad_partials");
  // Where a prologue's dy is read after the group (a shortcut's gradient),
  // this kernel stores it as its first pass computes it, and the input
  // kernel reads it back: the prologue's operands (the gradients it sums,
  // the ReLU's output) are read once, not once a kernel.
  FailureOr<RowAccess> slicedDy =
      rowInput(emitter, step, op, op.getGrad(), "dy", partialsName);
  if (failed(slicedDy))
    return failure();
  std::string firstDy = slicedDy->load(at), secondDy = firstDy;
  if (slicedDy->stored) {
    firstDy = llvm::formatv("mpc_store_and_use({0} + {1}, {2})",
                            *slicedDy->stored, at, firstDy);
    secondDy = llvm::formatv("mpc_load({0} + {1})", *slicedDy->stored, at);
  }
  std::string slicePrologue = llvm::formatv(
      "  long long c = blockIdx.x / {0}LL, s = blockIdx.x % {0}LL;\n"
      "  const {1} *xc = x + c * {2}LL;\n"
      "  long long begin = s * {3}LL;\n"
      "  long long end = begin + {3}LL < {4}LL ? begin + {3}LL : {4}LL;\n",
      splits, elementCType(op.getInput()), spatial, slice, count);
  std::string sliceSums =
      saved
          ? llvm::formatv(
                "  float mean = saved[c];\n"
                "{3}"
                "  mpc_sum sdy = 0.0f, sdyx = 0.0f;\n"
                "  MPC_SUM_CHANNEL_SLICE2_OF(begin, end, {0}LL, {1}LL, at, d, "
                "{2}, sdy, d, sdyx, d * (mpc_load(xc + at) - mean));\n"
                "  float tdy = mpc_block_reduce_sum(sdy);\n"
                "  float dyx = mpc_block_reduce_sum(sdyx);\n"
                "  if (threadIdx.x == 0) {{\n"
                "    partials[2LL * blockIdx.x] = tdy;\n"
                "    partials[2LL * blockIdx.x + 1] = dyx;\n"
                "  }\n",
                spatial, channels * spatial,
                masked(firstDy, "mpc_load(xc + at)", "relu_g"),
                reluBeta
                    ? llvm::formatv("  float rstd = saved[{0}LL + c];\n{1}",
                                    channels, reluConstants("  "))
                          .str()
                    : std::string())
                .str()
          : llvm::formatv(
                "  mpc_sum sx = 0.0f, sdy = 0.0f;\n"
                "  MPC_SUM_CHANNEL_SLICE2(begin, end, {0}LL, {1}LL, at, sx, "
                "mpc_load(xc + at), sdy, {2});\n"
                "  float tx = mpc_block_reduce_sum(sx);\n"
                "  float tdy = mpc_block_reduce_sum(sdy);\n"
                "  float mean = tx / (float)(end - begin);\n"
                "  mpc_sum squares = 0.0f, sdyx = 0.0f;\n"
                "  MPC_SUM_CHANNEL_SLICE2(begin, end, {0}LL, {1}LL, at, "
                "squares, mpc_square(mpc_load(xc + at) - mean), sdyx, {3} * "
                "(mpc_load(xc + at) - mean));\n"
                "  float m2 = mpc_block_reduce_sum(squares);\n"
                "  float dyx = mpc_block_reduce_sum(sdyx);\n"
                "  if (threadIdx.x == 0) {{\n"
                "    float *p = partials + 4LL * blockIdx.x;\n"
                "    p[0] = tx;\n"
                "    p[1] = m2;\n"
                "    p[2] = tdy;\n"
                "    p[3] = dyx;\n"
                "  }\n",
                spatial, channels * spatial, firstDy, secondDy)
                .str();
  emitter.addKernel(llvm::formatv(
      "{0}__global__ void {1}({2}const {3} *__restrict__ x{4}{7}, float "
      "*__restrict__ partials) {{\n"
      "{5}{6}"
      "}\n",
      slicedDy->functions(), partialsName, leading(slicedDy->parameters),
      elementCType(op.getInput()), savedParameter, slicePrologue, sliceSums,
      reluBeta ? ", const " + elementCType(op.getGamma()) +
                     " *__restrict__ gamma" + reluParameter
               : std::string()));
  SmallVector<std::string> partialsArguments(slicedDy->arguments);
  partialsArguments.push_back(emitter.constPointer(op.getInput()));
  KernelCost partialsCost =
      KernelCost()
          .reads(op.getInput())
          .writesBytes(sums * channels * splits * 4)
          .flopsPer(count * channels, (saved ? 4 : 8) + reluMaskFlops);
  addSaved(partialsArguments, partialsCost);
  if (reluBeta) {
    partialsArguments.push_back(emitter.constPointer(op.getGamma()));
    partialsCost.reads(op.getGamma());
  }
  addReluBeta(partialsArguments, partialsCost);
  partialsArguments.push_back(partials);
  readsDy(partialsCost, *slicedDy);
  emitter.launch(partialsName, channels * splits, sliceBlock,
                 partialsArguments, partialsCost);

  // Per channel: the parameters' gradients, and the statistics dx needs.
  std::string channelSums =
      saved ? llvm::formatv(
                  "    const float *p = partials + 2LL * {0}LL * c;\n"
                  "    float sdy = 0.0f, dyx = 0.0f;\n"
                  "    for (long long s = 0; s < {0}LL; ++s) {{\n"
                  "      sdy += p[2 * s];\n"
                  "      dyx += p[2 * s + 1];\n"
                  "    }\n"
                  "    float mean = saved[c], rstd = saved[{1}LL + c];\n",
                  splits, channels)
                  .str()
            : llvm::formatv(
                  "    const float *p = partials + 4LL * {0}LL * c;\n"
                  "    float total = 0.0f;\n"
                  "    for (long long s = 0; s < {0}LL; ++s) total += p[4 * "
                  "s];\n"
                  "    float mean = total / {1}.0f;\n"
                  "    float m2 = 0.0f, sdy = 0.0f, dyx = 0.0f;\n"
                  "    for (long long s = 0; s < {0}LL; ++s) {{\n"
                  "      long long n = {1}LL - s * {2}LL < {2}LL ? {1}LL - s * "
                  "{2}LL : {2}LL;\n"
                  "      float d = p[4 * s] / (float)n - mean;\n"
                  "      m2 += p[4 * s + 1] + (float)n * d * d;\n"
                  "      sdy += p[4 * s + 2];\n"
                  "      dyx += p[4 * s + 3] + d * p[4 * s + 2];\n"
                  "    }\n"
                  "    float rstd = mpc_rsqrt(m2 / {1}.0f + {3});\n",
                  splits, count, slice, eps)
                  .str();
  std::string statsName = emitter.kernelName("batch_norm_grad_params");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const float *__restrict__ partials{5}, float "
      "*__restrict__ stats{1}) {{\n"
      "  MPC_FOR_EACH(c, {3}LL) {{\n"
      "{6}"
      "    float sdyx = dyx * rstd;\n"
      "{2}"
      "    stats[c] = mean;\n"
      "    stats[{3}LL + c] = rstd;\n"
      "    stats[2LL * {3}LL + c] = sdy / {4}.0f;\n"
      "    stats[3LL * {3}LL + c] = sdyx / {4}.0f;\n"
      "  }\n"
      "}\n",
      statsName, parameterGradParameters,
      storeParameterGrads("sdyx", "sdy", "    "), channels, count,
      savedParameter, channelSums));
  SmallVector<std::string> statsArguments{partials};
  KernelCost statsCost = KernelCost()
                             .readsBytes(sums * channels * splits * 4)
                             .writesBytes(4 * channels * 4)
                             .flopsPer(channels * splits, saved ? 2 : 10)
                             .flopsPer(channels, 8);
  addSaved(statsArguments, statsCost);
  statsArguments.push_back(stats);
  addParameterGrads(statsArguments, statsCost);
  emitter.launch(statsName, elementwiseGrid(channels), rowBlockSize,
                 statsArguments, statsCost);

  std::string name = emitter.kernelName("batch_norm_grad_input");
  FailureOr<RowAccess> dy = RowAccess();
  if (slicedDy->stored) {
    if (!writesDx)
      return success();
    dy->pointer = "dy";
    dy->parameters.push_back("const " + elementCType(op.getGrad()) +
                             " *__restrict__ dy");
    dy->arguments.push_back(emitter.constPointer(op.getGrad()));
  } else {
    dy = rowInput(emitter, step, op, op.getGrad(), "dy", name);
    if (failed(dy))
      return failure();
    if (!writesDx && !dy->stored)
      return success();
  }
  emitter.addKernel(llvm::formatv(
      "{8}__global__ void {0}({1}const {2} *__restrict__ x, const {3} "
      "*__restrict__ gamma, const float *__restrict__ stats{11}{4}) {{\n"
      "#ifdef MPC_DEVICE_BLOCKS\n"
      // A thread's channel changes once in a plane of its elements: its
      // values are loaded then, not with every element.
      "  long long cached = -1;\n"
      "  float mean = 0.0f, rstd = 0.0f, meanDy = 0.0f, meanDyXhat = 0.0f, "
      "gamma_c = 0.0f{12};\n"
      "  MPC_FOR_EACH(i, {5}LL) {{\n"
      "    long long c = (i / {6}LL) % {7}LL;\n"
      "    if (c != cached) {{\n"
      "      cached = c;\n"
      "      mean = stats[c];\n"
      "      rstd = stats[{7}LL + c];\n"
      "      meanDy = stats[2LL * {7}LL + c];\n"
      "      meanDyXhat = stats[3LL * {7}LL + c];\n"
      "      gamma_c = mpc_load(gamma + c);\n"
      "{13}"
      "    }\n"
      "{9}"
      "  }\n"
      "#else\n"
      // The same arithmetic, a channel's values loaded once a run.
      "  MPC_FOR_EACH_PLANE_RUN(i0, i1, {5}LL, {6}LL) {{\n"
      "    long long c = (i0 / {6}LL) % {7}LL;\n"
      "    float mean = stats[c], rstd = stats[{7}LL + c], meanDy = "
      "stats[2LL * {7}LL + c], meanDyXhat = stats[3LL * {7}LL + c], gamma_c "
      "= mpc_load(gamma + c){14};\n"
      "    MPC_SIMD for (long long i = i0; i < i1; ++i) {{\n"
      "{10}"
      "    }\n"
      "  }\n"
      "#endif\n"
      "}\n",
      name, leading(dy->parameters), elementCType(op.getInput()),
      elementCType(op.getGamma()), dxParameter, type.getNumElements(), spatial,
      channels, dy->functions(), inputGradient(*dy, "    "),
      inputGradient(*dy, "      "), reluParameter,
      reluBeta ? ", relu_b = 0.0f" : "",
      reluBeta ? "      relu_b = mpc_load(relu_beta + c);\n" : "",
      reluBeta ? ", relu_b = mpc_load(relu_beta + c)" : ""));
  SmallVector<std::string> arguments(dy->arguments);
  arguments.append({emitter.constPointer(op.getInput()),
                    emitter.constPointer(op.getGamma()), stats});
  KernelCost cost = KernelCost()
                        .reads(op.getInput())
                        .reads(op.getGamma())
                        .readsBytes(4 * channels * 4)
                        .flopsPer(type.getNumElements(), 7 + reluMaskFlops);
  addReluBeta(arguments, cost);
  readsDy(cost, *dy);
  addDx(arguments, cost);
  emitter.launch(name, elementwiseGrid(type.getNumElements()), 256, arguments,
                 cost);
  return success();
}

//===----------------------------------------------------------------------===//
// Embedding
//===----------------------------------------------------------------------===//

/// embedding_grad: each row of the [V, D] table gradient the sum of the rows
/// of dy whose index names it, in position order (indices may repeat), or
/// zeros. Out-of-range indices are skipped; the forward lookup has already
/// raised the step's index error for them. The sums are f32, rounded once
/// into the table's type where it is half, and written straight into the
/// step's result (the f32 widening where that is in the step).
void emitEmbeddingGrad(StepEmitter &emitter, const Step &step,
                       EmbeddingGradOp op) {
  auto table = op.getResult().getType();
  int64_t rows = table.getDimSize(0), width = table.getDimSize(1);
  int64_t tableElements = table.getNumElements();
  int64_t n = op.getGrad().getType().getNumElements();
  int64_t positions = n / width;
  Value written = writtenResult(step);
  std::string output = elementCType(written);

  // On the GPU (and emulated) the rows no position names are zeroed first;
  // the cpu target's kernel writes every row.
  std::string zeroName = emitter.kernelName("embedding_grad_zero");
  emitter.addKernel(
      llvm::formatv("__global__ void {0}({1} *__restrict__ table) {{\n"
                    "#ifdef MPC_DEVICE_BLOCKS\n"
                    "  MPC_FOR_EACH(i, {2}LL) mpc_store(table + i, 0.0f);\n"
                    "#endif\n"
                    "}\n",
                    zeroName, output, tableElements));
  emitter.launch(zeroName, elementwiseGrid(tableElements), 256,
                 {emitter.pointer(written)}, KernelCost().writes(written));

  // On the GPU (and emulated) a warp a position, the first of each index
  // summing its rows in position order in registers, up to 32 columns a
  // lane a pass (mpc_embedding_grad_rows); on the cpu target one thread,
  // each index's positions linked in order (mpc_embedding_grad_lists): the
  // same additions in the same order, so the same bits, and neither
  // depends on the order blocks run in.
  constexpr int64_t block = 256, warpsPerBlock = block / 32;
  int64_t columnsPerLane = std::clamp<int64_t>((width + 31) / 32, 1, 32);
  std::string links = emitter.scratchPointer(
      step, "long long", 0, saturatingProduct({rows + positions, 8}));
  std::string sums = emitter.scratchPointer(
      step, "float", saturatingProduct({rows + positions, 8}), width * 4);
  std::string name = emitter.kernelName("embedding_grad");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ dy, const {2} "
      "*__restrict__ indices, {3} *__restrict__ table, long long "
      "*__restrict__ links, float *__restrict__ sums) {{\n"
      "#ifdef MPC_DEVICE_BLOCKS\n"
      "  mpc_embedding_grad_rows<{7}>(dy, indices, table, {4}LL, {5}LL, "
      "{6}LL);\n"
      "#else\n"
      "  if (blockIdx.x == 0)\n"
      "    mpc_embedding_grad_lists(dy, indices, table, links, sums, {4}LL, "
      "{5}LL, {6}LL);\n"
      "#endif\n"
      "}\n",
      name, elementCType(op.getGrad()), elementCType(op.getIndices()), output,
      positions, width, rows, columnsPerLane));
  emitter.launch(
      name, (positions + warpsPerBlock - 1) / warpsPerBlock, block,
      {emitter.constPointer(op.getGrad()),
       emitter.constPointer(op.getIndices()), emitter.pointer(written), links,
       sums},
      // Each row of dy is read once and each named row of the table written
      // once (at most a row a position).
      KernelCost()
          .reads(op.getGrad())
          .reads(op.getIndices())
          .writesElements(
              n, cast<RankedTensorType>(written.getType()).getElementType())
          .flopsPer(n, 1));
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// Kernel code that loops `oy`, `ox` over the output windows that contain
/// input pixel (iy, ix): oy * stride - pad <= iy < oy * stride - pad + kernel.
/// In `integer` arithmetic (literals with `suffix`): int where the tensors'
/// offsets fit it, as a 64-bit division by a constant is several
/// instructions.
std::string windowsContaining(ArrayRef<int64_t> kernel,
                              ArrayRef<int64_t> stride,
                              ArrayRef<int64_t> padding, int64_t oh,
                              int64_t ow, StringRef integer = "long long",
                              StringRef suffix = "LL") {
  auto range = [&](StringRef o, StringRef in, int64_t k, int64_t s, int64_t p,
                   int64_t extent) {
    return llvm::formatv(
               "    {6} {0}_lo_num = {1} + {4}{7} - {2}{7} + 1;\n"
               "    {6} {0}_lo = {0}_lo_num <= 0 ? 0 : ({0}_lo_num + "
               "{3}{7} - 1) / {3}{7};\n"
               "    {6} {0}_hi = ({1} + {4}{7}) / {3}{7};\n"
               "    if ({0}_hi > {5}{7} - 1) {0}_hi = {5}{7} - 1;\n",
               o, in, k, s, p, extent, integer, suffix)
        .str();
  };
  return range("oy", "iy", kernel[0], stride[0], padding[0], oh) +
         range("ox", "ix", kernel[1], stride[1], padding[1], ow) +
         llvm::formatv("    for ({0} oy = oy_lo; oy <= oy_hi; ++oy)\n"
                       "      for ({0} ox = ox_lo; ox <= ox_hi; ++ox) {{\n",
                       integer)
             .str();
}

/// The second kernel of max_pool2d_grad, shared with
/// max_pool2d_indices_grad: routes each window's dy to its argmax, which
/// `pixel(window, oy, ox)` reads from `argmax` (of C type `indexType`,
/// `indexBytes` in all) as an index into the input plane, negative for
/// none; `isArgmax(window)`, whether it is input pixel (iy, ix) of the
/// window at (oy, ox), which contains it.
/// Each input pixel sums its windows in the same order (oy, then ox) on
/// every path, so overlapping windows need no atomics and the result is
/// deterministic.
void routeMaxPoolGrad(
    StepEmitter &emitter, TypedValue<RankedTensorType> dy,
    TypedValue<RankedTensorType> dx, ArrayRef<int64_t> kernel,
    ArrayRef<int64_t> stride, ArrayRef<int64_t> padding, StringRef indexType,
    StringRef argmax, int64_t indexBytes,
    llvm::function_ref<std::string(StringRef, StringRef, StringRef)> pixel,
    llvm::function_ref<std::string(StringRef)> isArgmax) {
  auto in = dx.getType();
  auto out = dy.getType();
  int64_t h = in.getDimSize(2), w = in.getDimSize(3);
  int64_t oh = out.getDimSize(2), ow = out.getDimSize(3);
  std::string name = emitter.kernelName("max_pool2d_grad");
  if (in.getElementType().isF32()) {
    // An fp32 dx accumulates in place, one input row (plane, iy) per
    // iteration: the row is zeroed, then the windows that contain row iy are
    // visited in order (oy, then ox) and add their dy to the pixel of the
    // row that is their argmax. Each pixel thus sums its windows in the same
    // order, and from 0, as the per-pixel gather below.
    // The cpu target scatters instead, a plane at a time: each window in
    // turn adds its dy to its argmax, so each pixel sums the same windows
    // in the same order, without a row's scan of windows that miss it.
    int64_t planes = in.getDimSize(0) * in.getDimSize(1);
    int64_t grid = tiledGrid(in.getNumElements() / w, imageRowTile);
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const {1} *__restrict__ dy, const {2} "
        "*__restrict__ argmax, float *__restrict__ dx) {{\n"
        "#ifndef MPC_DEVICE_BLOCKS\n"
        "  MPC_FOR_EACH_TILED(plane, {13}LL, {14}LL) {{\n"
        "    float *out = dx + plane * {15}LL;\n"
        "    for (long long i = 0; i < {15}LL; ++i) out[i] = 0.0f;\n"
        "    const {1} *g = dy + plane * {6}LL;\n"
        "    const {2} *best = argmax + plane * {6}LL;\n"
        "    for (long long oy = 0; oy < {10}LL; ++oy)\n"
        "      for (long long ox = 0; ox < {11}LL; ++ox) {{\n"
        "        long long a = {16};\n"
        "        if (a >= 0) out[a] += mpc_load(g + oy * {11}LL + ox);\n"
        "      }\n"
        "  }\n"
        "#else\n"
        "  MPC_FOR_EACH_TILED(r, {3}LL, {12}LL) {{\n"
        "    long long plane = r / {4}LL, iy = r % {4}LL;\n"
        "    float *out = dx + r * {5}LL;\n"
        "    for (long long ix = 0; ix < {5}LL; ++ix) out[ix] = 0.0f;\n"
        "    const {1} *g = dy + plane * {6}LL;\n"
        "    const {2} *best = argmax + plane * {6}LL;\n"
        "    long long rowStart = iy * {5}LL;\n"
        "    long long oy_lo_num = iy + {9}LL - {7}LL + 1;\n"
        "    long long oy_lo = oy_lo_num <= 0 ? 0 : (oy_lo_num + {8}LL - 1) / "
        "{8}LL;\n"
        "    long long oy_hi = (iy + {9}LL) / {8}LL;\n"
        "    if (oy_hi > {10}LL - 1) oy_hi = {10}LL - 1;\n"
        "    for (long long oy = oy_lo; oy <= oy_hi; ++oy)\n"
        "      for (long long ox = 0; ox < {11}LL; ++ox) {{\n"
        "        long long a = {16};\n"
        "        a = a < 0 ? -1 : a - rowStart;\n"
        "        if (a >= 0 && a < {5}LL) out[a] += mpc_load(g + oy * {11}LL + "
        "ox);\n"
        "      }\n"
        "  }\n"
        "#endif\n"
        "}\n",
        name, elementCType(dy), indexType, in.getNumElements() / w, h, w,
        oh * ow, kernel[0], stride[0], padding[0], oh, ow, imageRowTile,
        planes, (planes + grid - 1) / grid, h * w,
        pixel("oy * " + std::to_string(ow) + "LL + ox", "oy", "ox")));
    emitter.launch(name, grid, 256,
                   {emitter.constPointer(dy), argmax.str(),
                    emitter.pointer(dx)},
                   // Each window's dy is added once, at its maximum.
                   KernelCost()
                       .reads(dy)
                       .readsBytes(indexBytes)
                       .writes(dx)
                       .flopsPer(out.getNumElements(), 1));
    return;
  }
  // A thread an input pixel. Its offsets in int where the tensors' fit:
  // the gather is bound by its instructions, not its bytes.
  bool narrow = std::max(in.getNumElements(), out.getNumElements()) <=
                INT32_MAX;
  StringRef integer = narrow ? "int" : "long long";
  StringRef suffix = narrow ? "" : "LL";
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ dy, const {2} "
      "*__restrict__ argmax, {3} *__restrict__ dx) {{\n"
      "  MPC_FOR_EACH(i, {4}LL) {{\n"
      "    {12} at = ({12})i;\n"
      "    {12} plane = at / {5}{13}, iy = (at / {6}{13}) % {7}{13}, ix = at "
      "% {6}{13};\n"
      "    const {1} *g = dy + plane * {8}{13};\n"
      "    const {2} *best = argmax + plane * {8}{13};\n"
      "    float acc = 0.0f;\n{9}"
      "        if ({11}) acc += mpc_load(g + oy * {10}{13} + ox);\n"
      "      }\n"
      "    mpc_store(dx + i, acc);\n"
      "  }\n"
      "}\n",
      name, elementCType(dy), indexType, elementCType(dx), in.getNumElements(),
      h * w, w, h, oh * ow,
      windowsContaining(kernel, stride, padding, oh, ow, integer, suffix), ow,
      isArgmax("oy * " + std::to_string(ow) + suffix.str() + " + ox"),
      integer, suffix));
  emitter.launch(name, elementwiseGrid(in.getNumElements()), 256,
                 {emitter.constPointer(dy), argmax.str(), emitter.pointer(dx)},
                 KernelCost()
                     .reads(dy)
                     .readsBytes(indexBytes)
                     .writes(dx)
                     .flopsPer(out.getNumElements(), 1));
}

/// max_pool2d_grad in two kernels. Kernel 1, one thread per output window:
/// the window's first maximum (the forward's scan order and comparison,
/// padding excluded) as an index into its input plane, kept in scratch (-1
/// for a window of padding only). Kernel 2, a gather over input pixels: each
/// pixel sums dy over the windows that contain it and whose stored maximum
/// it is, in the same window order as before, so overlapping windows need no
/// atomics and the result is deterministic.
void emitMaxPoolGrad(StepEmitter &emitter, const Step &step,
                     MaxPool2dGradOp op) {
  auto in = op.getInput().getType();
  auto out = op.getGrad().getType();
  int64_t h = in.getDimSize(2), w = in.getDimSize(3);
  int64_t oh = out.getDimSize(2), ow = out.getDimSize(3);
  ArrayRef<int64_t> kernel = op.getKernel(), stride = op.getStride(),
                    padding = op.getPadding();
  std::string indexType = maxPoolIndexType(op);
  std::string argmax = emitter.scratchPointer(step, indexType);

  std::string argmaxName = emitter.kernelName("max_pool2d_argmax");
  int64_t argmaxGrid = elementwiseGrid(out.getNumElements());
  PoolShape shape{in.getDimSize(0) * in.getDimSize(1),
                  h,
                  w,
                  oh,
                  ow,
                  kernel,
                  stride,
                  padding};
  emitter.addKernel(argmaxPoolKernel(
      argmaxName,
      llvm::formatv("const {0} *__restrict__ x, {1} *__restrict__ argmax",
                    elementCType(op.getInput()), indexType)
          .str(),
      shape, elementCType(op.getInput()), argmaxGrid, /*inWindow=*/false,
      llvm::formatv("    argmax[i] = ({0})best;\n", indexType).str(),
      llvm::formatv("      argmax[r * {0}LL + ox] = ({1})best[ox];\n", ow,
                    indexType)
          .str()));
  emitter.launch(
      argmaxName, argmaxGrid, 256,
      {emitter.constPointer(op.getInput()), argmax},
      KernelCost()
          .reads(op.getInput())
          .writesBytes(out.getNumElements() * (indexType == "int" ? 4 : 8)));

  routeMaxPoolGrad(emitter, op.getGrad(), op.getResult(), kernel, stride,
                   padding, indexType, argmax,
                   out.getNumElements() * (indexType == "int" ? 4 : 8),
                   [](StringRef window, StringRef, StringRef) {
                     return "(long long)best[" + window.str() + "]";
                   },
                   [&](StringRef window) {
                     return llvm::formatv("best[{0}] == iy * {1} + ix",
                                          window, w)
                         .str();
                   });
}

/// max_pool2d_indices_grad: the routing of max_pool2d_grad, each window's
/// argmax its position in the window, as the forward stored it.
void emitMaxPoolIndicesGrad(StepEmitter &emitter,
                            MaxPool2dIndicesGradOp op) {
  auto in = op.getResult().getType();
  int64_t w = in.getDimSize(3);
  ArrayRef<int64_t> kernel = op.getKernel(), stride = op.getStride(),
                    padding = op.getPadding();
  routeMaxPoolGrad(
      emitter, op.getGrad(), op.getResult(), kernel, stride, padding,
      "signed char", emitter.constPointer(op.getIndices()),
      storageBytes(op.getIndices().getType()),
      [&](StringRef window, StringRef oy, StringRef ox) {
        // -1 (no input in the window) stays out of every plane.
        return llvm::formatv(
                   "mpc_window_pixel(best[{0}], {1} * {2}LL - {3}LL, {4} * "
                   "{5}LL - {6}LL, {7}LL, {8}LL)",
                   window, oy, stride[0], padding[0], ox, stride[1],
                   padding[1], kernel[1], w)
            .str();
      },
      // The pixel's position in the window, which contains it.
      [&](StringRef window) {
        return llvm::formatv("best[{0}] == (iy - (oy * {1} - {2})) * {3} + "
                             "ix - (ox * {4} - {5})",
                             window, stride[0], padding[0], kernel[1],
                             stride[1], padding[1])
            .str();
      });
}

/// avg_pool2d_grad as a gather: each input pixel sums dy / (KH * KW) over
/// the windows that contain it (padding counts in the divisor, as the
/// forward's count_include_pad).
void emitAvgPoolGrad(StepEmitter &emitter, AvgPool2dGradOp op) {
  auto in = op.getResult().getType();
  auto out = op.getGrad().getType();
  int64_t h = in.getDimSize(2), w = in.getDimSize(3);
  int64_t oh = out.getDimSize(2), ow = out.getDimSize(3);
  ArrayRef<int64_t> kernel = op.getKernel();
  // One divisor for every window is applied once a pixel; a window that
  // ceil_mode clipped divides its own dy.
  std::optional<std::string> clipped = clippedAvgPoolDivisor(
      kernel, op.getStride(), op.getPadding(), h, w, oh, ow);
  std::string name = emitter.kernelName("avg_pool2d_grad");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ dy, {2} *__restrict__ dx) "
      "{{\n"
      "  MPC_FOR_EACH(i, {3}LL) {{\n"
      "    long long plane = i / {4}LL, iy = (i / {5}LL) % {6}LL, ix = i % "
      "{5}LL;\n"
      "    const {1} *g = dy + plane * {7}LL;\n"
      "    float acc = 0.0f;\n{8}"
      "        acc += mpc_load(g + oy * {9}LL + ox){10};\n"
      "      }\n"
      "    mpc_store(dx + i, acc{11});\n"
      "  }\n"
      "}\n",
      name, elementCType(op.getGrad()), elementCType(op.getResult()),
      in.getNumElements(), h * w, w, h, oh * ow,
      windowsContaining(kernel, op.getStride(), op.getPadding(), oh, ow), ow,
      clipped ? " / " + *clipped : "",
      clipped ? "" : llvm::formatv(" / {0}.0f", kernel[0] * kernel[1]).str()));
  emitter.launch(
      name, elementwiseGrid(in.getNumElements()), 256,
      {emitter.constPointer(op.getGrad()), emitter.pointer(op.getResult())},
      // Each window's dy reaches its KH * KW pixels; one divide a pixel.
      KernelCost()
          .reads(op.getGrad())
          .writes(op.getResult())
          .flopsPer(out.getNumElements(), kernel[0] * kernel[1])
          .flopsPer(in.getNumElements(), 1));
}

//===----------------------------------------------------------------------===//
// Reductions and data movement
//===----------------------------------------------------------------------===//

/// reduce_max_grad: dy is split evenly among the elements equal to their
/// output's maximum, as torch.amax. Kernel 1, one block per output, counts
/// the ties into scratch; kernel 2 writes every input element once.
void emitReduceMaxGrad(StepEmitter &emitter, const Step &step,
                       ReduceMaxGradOp op) {
  auto type = op.getInput().getType();
  ArrayRef<int64_t> shape = type.getShape();
  SmallVector<int64_t> kept, reducedDims;
  int64_t reduced = 1;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (llvm::is_contained(op.getDims(), d)) {
      reduced *= shape[d];
      reducedDims.push_back(d);
    } else {
      kept.push_back(d);
    }
  }
  int64_t outputs = type.getNumElements() / reduced;
  std::string counts = emitter.scratchPointer(step, "float");

  std::string countName = emitter.kernelName("reduce_max_ties");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ x, const {2} "
      "*__restrict__ y, float *__restrict__ counts) {{\n"
      "  long long o = blockIdx.x;\n"
      "  long long base = 0;\n{3}"
      "  float m = mpc_load(y + o), count = 0.0f;\n"
      "  MPC_FOR_THREAD(t, {4}LL) {{\n"
      "    long long offset = base;\n{5}"
      "    count += mpc_load(x + offset) == m ? 1.0f : 0.0f;\n"
      "  }\n"
      "  count = mpc_block_reduce_sum(count);\n"
      "  if (threadIdx.x == 0) counts[o] = count;\n"
      "}\n",
      countName, elementCType(op.getInput()), elementCType(op.getOutput()),
      offsetCode("base", "o", shape, kept), reduced,
      offsetCode("offset", "t", shape, reducedDims)));
  emitter.launch(countName, outputs, rowBlockSize,
                 {emitter.constPointer(op.getInput()),
                  emitter.constPointer(op.getOutput()), counts},
                 KernelCost()
                     .reads(op.getInput())
                     .reads(op.getOutput())
                     .writesBytes(outputs * 4)
                     .flopsPer(type.getNumElements(), 1));

  // The output index of input element i: its kept coordinates, row-major
  // (keepdim only inserts extents of 1, which leave the order unchanged).
  std::string outputIndex;
  int64_t keptStride = 1;
  for (int64_t d : llvm::reverse(kept)) {
    outputIndex +=
        llvm::formatv("{0}c{1} * {2}LL", outputIndex.empty() ? "" : " + ", d,
                      keptStride)
            .str();
    keptStride *= shape[d];
  }
  std::string name = emitter.kernelName("reduce_max_grad");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ dy, const {2} "
      "*__restrict__ x, const {3} *__restrict__ y, const float *__restrict__ "
      "counts, {4} *__restrict__ dx) {{\n"
      "  MPC_FOR_EACH(i, {5}LL) {{\n{6}"
      "    long long o = {7};\n"
      "    float v = mpc_load(x + i);\n"
      "    mpc_store(dx + i, v == mpc_load(y + o) ? mpc_load(dy + o) / "
      "counts[o] : 0.0f);\n"
      "  }\n"
      "}\n",
      name, elementCType(op.getGrad()), elementCType(op.getInput()),
      elementCType(op.getOutput()), elementCType(op.getResult()),
      type.getNumElements(), coordinateCode(shape),
      outputIndex.empty() ? "0" : outputIndex));
  emitter.launch(name, elementwiseGrid(type.getNumElements()), 256,
                 {emitter.constPointer(op.getGrad()),
                  emitter.constPointer(op.getInput()),
                  emitter.constPointer(op.getOutput()), counts,
                  emitter.pointer(op.getResult())},
                 KernelCost()
                     .reads(op.getGrad())
                     .reads(op.getInput())
                     .reads(op.getOutput())
                     .readsBytes(outputs * 4)
                     .writes(op.getResult())
                     .flopsPer(type.getNumElements(), 1));
}

/// slice_grad: every element of the input-shaped result is written once,
/// with its slice element's gradient when the slice took it, else 0.
void emitSliceGrad(StepEmitter &emitter, SliceGradOp op) {
  auto resultType = op.getResult().getType();
  auto gradType = op.getGrad().getType();
  SmallVector<int64_t> gradStrides = rowMajorStrides(gradType.getShape());
  std::string taken = "true", source;
  for (int64_t d = 0; d < resultType.getRank(); ++d) {
    int64_t start = op.getStarts()[d], stride = op.getStrides()[d];
    std::string relative = llvm::formatv("(c{0} - {1}LL)", d, start).str();
    taken += llvm::formatv(" && {0} >= 0 && {0} % {1}LL == 0 && {0} / {1}LL "
                           "< {2}LL",
                           relative, stride, gradType.getDimSize(d))
                 .str();
    source +=
        llvm::formatv("{0}({1} / {2}LL) * {3}LL", source.empty() ? "" : " + ",
                      relative, stride, gradStrides[d])
            .str();
  }
  std::string name = emitter.kernelName("slice_grad");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ dy, {2} *__restrict__ dx) "
      "{{\n"
      "  MPC_FOR_EACH(i, {3}LL) {{\n{4}"
      "    mpc_store(dx + i, ({5}) ? mpc_load(dy + {6}) : 0.0f);\n"
      "  }\n"
      "}\n",
      name, elementCType(op.getGrad()), elementCType(op.getResult()),
      resultType.getNumElements(), coordinateCode(resultType.getShape()), taken,
      source.empty() ? "0" : source));
  emitter.launch(
      name, elementwiseGrid(resultType.getNumElements()), 256,
      {emitter.constPointer(op.getGrad()), emitter.pointer(op.getResult())},
      KernelCost().reads(op.getGrad()).writes(op.getResult()));
}

} // namespace

FailureOr<bool> mlir::mpc::emitBackwardOp(Operation *op, const Step &step,
                                          StepEmitter &emitter) {
  if (auto grad = dyn_cast<RmsNormGradOp>(op)) {
    emitRmsNormGrad(emitter, step, grad);
    return true;
  }
  if (auto grad = dyn_cast<LayerNormGradOp>(op)) {
    if (failed(emitLayerNormGrad(emitter, step, grad)))
      return failure();
    return true;
  }
  if (auto grad = dyn_cast<BatchNormGradOp>(op)) {
    if (failed(emitBatchNormGrad(emitter, step, grad)))
      return failure();
    return true;
  }
  if (auto grad = dyn_cast<EmbeddingGradOp>(op)) {
    emitEmbeddingGrad(emitter, step, grad);
    return true;
  }
  if (auto grad = dyn_cast<MaxPool2dGradOp>(op)) {
    emitMaxPoolGrad(emitter, step, grad);
    return true;
  }
  if (auto grad = dyn_cast<MaxPool2dIndicesGradOp>(op)) {
    // Gathered by its reader's loads (MemoryPlan::gatheredWhereRead).
    if (!emitter.getPlan().gatheredWhereRead(grad.getResult()))
      emitMaxPoolIndicesGrad(emitter, grad);
    return true;
  }
  if (auto grad = dyn_cast<AvgPool2dGradOp>(op)) {
    emitAvgPoolGrad(emitter, grad);
    return true;
  }
  if (auto grad = dyn_cast<ReduceMaxGradOp>(op)) {
    emitReduceMaxGrad(emitter, step, grad);
    return true;
  }
  if (auto grad = dyn_cast<SliceGradOp>(op)) {
    emitSliceGrad(emitter, grad);
    return true;
  }
  return false;
}
