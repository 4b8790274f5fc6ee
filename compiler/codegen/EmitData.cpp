//===- EmitData.cpp - data movement, gathers and pooling ----------*- C++ -*-===//
//
// This file implements emitDataMovement: transpose, slice, concat,
// embedding, pooling and non-splat constants. Each is one loop over the
// output elements (MPC_FOR_EACH) that computes where its source lives.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::mpc;

namespace {

/// A kernel `out[i] = in[<source>]` over every output element, where
/// `source` is C++ in the output coordinates c0, c1, ...
void emitGather(StepEmitter &emitter, StringRef hint, Value input,
                Value output, StringRef source) {
  auto outType = cast<RankedTensorType>(output.getType());
  std::string name = emitter.kernelName(hint);
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ in, {2} *__restrict__ "
      "out) {{\n"
      "  MPC_FOR_EACH(i, {3}LL) {{\n{4}"
      "    out[i] = in[{5}];\n"
      "  }\n"
      "}\n",
      name, elementCType(input), elementCType(output), outType.getNumElements(),
      coordinateCode(outType.getShape()), source));
  emitter.launch(
      name, elementwiseGrid(outType.getNumElements()), 256,
      {emitter.constPointer(input), emitter.pointer(output)},
      // One input element read for each output element.
      KernelCost()
          .readsElements(
              outType.getNumElements(),
              cast<RankedTensorType>(input.getType()).getElementType())
          .writes(output));
}

void emitTranspose(StepEmitter &emitter, TransposeOp op) {
  SmallVector<int64_t> inStrides =
      rowMajorStrides(op.getInput().getType().getShape());
  std::string source;
  for (auto [d, p] : llvm::enumerate(op.getPermutation()))
    source += llvm::formatv("{0}c{1} * {2}LL", source.empty() ? "" : " + ", d,
                            inStrides[p])
                  .str();
  emitGather(emitter, "transpose", op.getInput(), op.getResult(),
             source.empty() ? "0" : source);
}

void emitSlice(StepEmitter &emitter, SliceOp op) {
  SmallVector<int64_t> inStrides =
      rowMajorStrides(op.getInput().getType().getShape());
  SmallVector<int64_t> strides = op.getStridesOrDefault();
  std::string source;
  for (auto [d, start] : llvm::enumerate(op.getStarts()))
    source += llvm::formatv("{0}({1}LL + c{2} * {3}LL) * {4}LL",
                            source.empty() ? "" : " + ", start, d, strides[d],
                            inStrides[d])
                  .str();
  emitGather(emitter, "slice", op.getInput(), op.getResult(),
             source.empty() ? "0" : source);
}

/// One copy per input into its band of the output along `dim`.
void emitConcat(StepEmitter &emitter, ConcatOp op) {
  auto outType = op.getResult().getType();
  int64_t dim = op.getDim();
  SmallVector<int64_t> outStrides = rowMajorStrides(outType.getShape());
  int64_t start = 0;
  for (Value input : op.getInputs()) {
    auto inType = cast<RankedTensorType>(input.getType());
    std::string target;
    for (int64_t d = 0; d < inType.getRank(); ++d)
      target += llvm::formatv("{0}(c{1}{2}) * {3}LL",
                              target.empty() ? "" : " + ", d,
                              d == dim ? " + " + std::to_string(start) + "LL"
                                       : std::string(),
                              outStrides[d])
                    .str();
    std::string name = emitter.kernelName("concat");
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const {1} *__restrict__ in, {1} *__restrict__ "
        "out) {{\n"
        "  MPC_FOR_EACH(i, {2}LL) {{\n{3}"
        "    out[{4}] = in[i];\n"
        "  }\n"
        "}\n",
        name, elementCType(input), inType.getNumElements(),
        coordinateCode(inType.getShape()), target));
    emitter.launch(
        name, elementwiseGrid(inType.getNumElements()), 256,
        {emitter.constPointer(input), emitter.pointer(op.getResult())},
        KernelCost().reads(input).writesElements(inType.getNumElements(),
                                                 inType.getElementType()));
    start += inType.getDimSize(dim);
  }
}

void emitEmbedding(StepEmitter &emitter, EmbeddingOp op) {
  auto table = op.getTable().getType();
  int64_t rows = table.getDimSize(0), width = table.getDimSize(1);
  int64_t n = op.getResult().getType().getNumElements();
  std::string name = emitter.kernelName("embedding");
  // Rows of whole 16-byte runs are copied a run at a time: one index load
  // and one 16-byte load and store a run, where an element at a time had
  // GPT-2 small's embedding issue-bound at 1.35x its bound in the model.
  int64_t run = 16 / elementBytes(op.getTable());
  if (width % run != 0)
    run = 1;
  std::string copy =
      run > 1 ? "mpc_copy16(out + i, table + index * {4}LL + i % {4}LL);"
              : "out[i] = table[index * {4}LL + i % {4}LL];";
  emitter.addKernel(llvm::formatv(
      ("__global__ void {0}(const {1} *__restrict__ table, const {2} "
       "*__restrict__ indices, {1} *__restrict__ out, int *index_error) {{\n"
       "  MPC_FOR_EACH(c, {3}LL) {{\n"
       "    long long i = c * {6}LL;\n"
       "    long long index = indices[i / {4}LL];\n"
       "    if (index < 0 || index >= {5}LL) {{\n"
       "      mpc_raise_flag(index_error);\n"
       "      for (int k = 0; k < {6}; ++k) out[i + k] = table[0];\n"
       "      continue;\n"
       "    }\n"
       "    " +
       copy +
       "\n"
       "  }\n"
       "}\n")
          .c_str(),
      name, elementCType(op.getTable()), elementCType(op.getIndices()),
      n / run, width, rows, run));
  emitter.launch(name, elementwiseGrid(n / run), 256,
                 {emitter.constPointer(op.getTable()),
                  emitter.constPointer(op.getIndices()),
                  emitter.pointer(op.getResult()), "ctx->index_error"},
                 KernelCost()
                     .readsElements(n, table.getElementType())
                     .reads(op.getIndices())
                     .writes(op.getResult()));
}

} // namespace

std::string mlir::mpc::PoolInput::at(StringRef offset) const {
  return llvm::formatv(load.c_str(), offset).str();
}

std::optional<std::string>
mlir::mpc::poolRowsOnCpu(const PoolShape &shape, StringRef elementType,
                         int64_t grid, StringRef state, StringRef tap,
                         StringRef finish, const PoolInput &input) {
  // A row's state lives on the stack: a few KB at most.
  constexpr int64_t widestRow = 1024;
  if (shape.ow > widestRow)
    return std::nullopt;
  int64_t rows = shape.planes * shape.oh;
  return llvm::formatv(
             "  MPC_FOR_EACH_TILED(r, {0}LL, {1}LL) {{\n"
             "    long long plane = r / {2}LL, oy = r % {2}LL;\n"
             "    const {3} *src = x + plane * {4}LL;\n"
             "{17}"
             "{5}"
             "    for (long long ky = 0; ky < {6}LL; ++ky) {{\n"
             "      long long iy = oy * {7}LL - {8}LL + ky;\n"
             "      if (iy < 0 || iy >= {9}LL) continue;\n"
             "      for (long long kx = 0; kx < {10}LL; ++kx) {{\n"
             // The outputs whose tap kx lies inside the row:
             // 0 <= ox * stride + shift < W.
             "        long long shift = kx - {11}LL;\n"
             "        long long lo = shift >= 0 ? 0 : (-shift + {12}LL - 1) / "
             "{12}LL;\n"
             "        long long hi = {13}LL - 1 - shift < 0 ? 0 : ({13}LL - 1 "
             "- shift) / {12}LL + 1;\n"
             "        if (hi > {14}LL) hi = {14}LL;\n"
             "        MPC_SIMD for (long long ox = lo; ox < hi; ++ox) {{\n"
             "          long long index = iy * {13}LL + ox * {12}LL + shift;\n"
             "          float v = {18};\n"
             "{15}"
             "        }\n"
             "      }\n"
             "    }\n"
             "{16}"
             "  }\n",
             rows, (rows + grid - 1) / grid, shape.oh, elementType,
             shape.h * shape.w, state, shape.kernel[0], shape.stride[0],
             shape.padding[0], shape.h, shape.kernel[1], shape.padding[1],
             shape.stride[1], shape.w, shape.ow, tap, finish, input.setup,
             input.at("index"))
      .str();
}

std::string mlir::mpc::argmaxPoolKernel(StringRef name, StringRef parameters,
                                        const PoolShape &shape,
                                        StringRef elementType, int64_t grid,
                                        bool inWindow, StringRef storeOutput,
                                        StringRef storeRow,
                                        const PoolInput &input) {
  std::string position =
      inWindow ? llvm::formatv("ky * {0}LL + kx", shape.kernel[1]).str()
               : llvm::formatv("iy * {0}LL + ix", shape.w).str();
  // Arithmetic, not an `if`: a branch on the data is mispredicted half the
  // time on a CPU.
  std::string onCpu =
      poolRowsOnCpu(
          shape, elementType, grid,
          llvm::formatv("    float bestValue[{0}];\n"
                        "    long long best[{0}];\n"
                        "    for (long long ox = 0; ox < {0}LL; ++ox) {{ "
                        "bestValue[ox] = -INFINITY; best[ox] = -1; }\n",
                        shape.ow)
              .str(),
          llvm::formatv(
              "          long long take = (long long)((best[ox] < 0) | (v > "
              "bestValue[ox]) | (v != v));\n"
              "          best[ox] += take * ({0} - best[ox]);\n"
              "          bestValue[ox] = mpc_max_nan(bestValue[ox], v);\n",
              inWindow ? StringRef(position) : StringRef("index"))
              .str(),
          llvm::formatv("    for (long long ox = 0; ox < {0}LL; ++ox) {{\n"
                        "{1}"
                        "    }\n",
                        shape.ow, storeRow)
              .str(),
          input)
          .value_or("");
  return llvm::formatv(
      "__global__ void {0}({1}) {{\n"
      "{17}"
      "  MPC_FOR_EACH(i, {2}LL) {{\n"
      "    long long plane = i / {3}LL, oy = (i / {4}LL) % {5}LL, ox = i % "
      "{4}LL;\n"
      "    const {6} *src = x + plane * {7}LL;\n"
      "{20}"
      "    long long best = -1;\n"
      "    float bestValue = -INFINITY;\n"
      "    for (long long ky = 0; ky < {8}LL; ++ky) {{\n"
      "      long long iy = oy * {10}LL - {12}LL + ky;\n"
      "      if (iy < 0 || iy >= {14}LL) continue;\n"
      "      for (long long kx = 0; kx < {9}LL; ++kx) {{\n"
      "        long long ix = ox * {11}LL - {13}LL + kx;\n"
      "        if (ix < 0 || ix >= {15}LL) continue;\n"
      "        float v = {21};\n"
      "        long long take = (long long)((best < 0) | (v > bestValue) | "
      "(v != v));\n"
      "        best += take * ({16} - best);\n"
      "        bestValue = mpc_max_nan(bestValue, v);\n"
      "      }\n"
      "    }\n"
      "{19}"
      "  }\n"
      "{18}"
      "}\n",
      name, parameters, shape.planes * shape.oh * shape.ow,
      shape.oh * shape.ow, shape.ow, shape.oh, elementType, shape.h * shape.w,
      shape.kernel[0], shape.kernel[1], shape.stride[0], shape.stride[1],
      shape.padding[0], shape.padding[1], shape.h, shape.w, position,
      onCpu.empty() ? "" : "#ifdef MPC_DEVICE_BLOCKS\n",
      onCpu.empty() ? "" : "#else\n" + onCpu + "#endif\n", storeOutput,
      input.setup, input.at(llvm::formatv("iy * {0}LL + ix", shape.w).str()));
}

void mlir::mpc::emitMaxPoolWithIndices(
    StepEmitter &emitter, MaxPool2dWithIndicesOp op, StringRef name, Value x,
    const PoolInput &input, ArrayRef<std::string> extraParameters,
    ArrayRef<std::string> extraArguments, const ElementFunction *prologue,
    KernelCost cost) {
  auto in = op.getInput().getType();
  auto out = op.getResult().getType();
  int64_t grid = elementwiseGrid(out.getNumElements());
  int64_t ow = out.getDimSize(3);
  SmallVector<int64_t, 2> stride = op.getStrideOrDefault(),
                          padding = op.getPaddingOrDefault();
  PoolShape shape{in.getDimSize(0) * in.getDimSize(1),
                  in.getDimSize(2),
                  in.getDimSize(3),
                  out.getDimSize(2),
                  ow,
                  op.getKernel(),
                  stride,
                  padding};
  std::string parameters =
      llvm::formatv("const {0} *__restrict__ x, {1} *__restrict__ y, signed "
                    "char *__restrict__ argmax",
                    elementCType(x), elementCType(op.getResult()))
          .str();
  SmallVector<std::string> arguments{emitter.constPointer(x),
                                     emitter.pointer(op.getResult()),
                                     emitter.pointer(op.getIndices())};
  for (const std::string &parameter : extraParameters)
    parameters += ", " + parameter;
  llvm::append_range(arguments, extraArguments);
  std::string functions;
  if (prologue) {
    for (const std::string &parameter : prologue->parameters)
      parameters += ", " + parameter;
    llvm::append_range(arguments, prologue->arguments);
    functions = prologue->source;
    cost += prologue->cost;
  }
  emitter.addKernel(
      functions +
      argmaxPoolKernel(
          name, parameters, shape, elementCType(x), grid, /*inWindow=*/true,
          "    mpc_store(y + i, bestValue);\n"
          "    argmax[i] = (signed char)best;\n",
          llvm::formatv("      mpc_store(y + r * {0}LL + ox, bestValue[ox]);\n"
                        "      argmax[r * {0}LL + ox] = (signed "
                        "char)best[ox];\n",
                        ow)
              .str(),
          input));
  emitter.launch(name, grid, 256, arguments,
                 cost.reads(x).writes(op.getResult()).writes(op.getIndices()));
}

namespace {

/// Max or average pooling of NCHW; padding never wins a maximum and counts
/// towards an average's divisor (count_include_pad).
void emitPool(StepEmitter &emitter, Operation *op, Value input, Value output,
              ArrayRef<int64_t> kernel, ArrayRef<int64_t> stride,
              ArrayRef<int64_t> padding, bool isMax) {
  auto in = cast<RankedTensorType>(input.getType());
  auto out = cast<RankedTensorType>(output.getType());
  int64_t h = in.getDimSize(2), w = in.getDimSize(3);
  int64_t oh = out.getDimSize(2), ow = out.getDimSize(3);
  std::string name = emitter.kernelName(isMax ? "max_pool2d" : "avg_pool2d");
  // A window that is the whole plane (a global pooling before a
  // classifier): a warp a plane, its lanes' partial results combined by
  // shuffles. A thread a plane had a warp's loads land in 32 planes (6 %
  // of each sector used on ResNet-50's 7 x 7 maps); the cpu target's one
  // lane takes its block's planes in turn, each in order.
  if (oh == 1 && ow == 1 && kernel[0] == h && kernel[1] == w &&
      padding[0] == 0 && padding[1] == 0) {
    int64_t planes = out.getNumElements(), plane = h * w;
    constexpr int64_t planesPerBlock = 8; // a warp each at 256 threads
    emitter.addKernel(llvm::formatv(
        "__global__ void {0}(const {1} *__restrict__ x, {2} *__restrict__ y) "
        "{{\n"
        "  MPC_FOR_WARP_ROW(r, {3}LL, {4}LL) {{\n"
        "    const {1} *src = x + r * {5}LL;\n"
        "    float acc = {6};\n"
        "    MPC_FOR_LANE(j, {5}LL) {{\n"
        "      float v = mpc_load(src + j);\n"
        "      {7}\n"
        "    }\n"
        "    acc = {8}(acc);\n"
        "    if (MPC_ROW_LANE == 0) mpc_store(y + r, {9});\n"
        "  }\n"
        "}\n",
        name, elementCType(input), elementCType(output), planes, planesPerBlock,
        plane, isMax ? "-INFINITY" : "0.0f",
        isMax ? "acc = mpc_max_nan(acc, v);" : "acc += v;",
        isMax ? "mpc_row_reduce_max" : "mpc_row_reduce_sum",
        isMax ? std::string("acc")
              : llvm::formatv("acc / {0}.0f", plane).str()));
    emitter.launch(name, (planes + planesPerBlock - 1) / planesPerBlock,
                   planesPerBlock * 32,
                   {emitter.constPointer(input), emitter.pointer(output)},
                   KernelCost().reads(input).writes(output).flopsPer(
                       isMax ? 0 : planes, plane + 1));
    return;
  }
  std::string divisor =
      clippedAvgPoolDivisor(kernel, stride, padding, h, w, oh, ow)
          .value_or(std::to_string(kernel[0] * kernel[1]) + ".0f");
  int64_t grid = elementwiseGrid(out.getNumElements());
  std::string onCpu =
      poolRowsOnCpu(
          PoolShape{in.getDimSize(0) * in.getDimSize(1), h, w, oh, ow, kernel,
                    stride, padding},
          elementCType(input), grid,
          llvm::formatv("    float acc[{0}];\n"
                        "    for (long long ox = 0; ox < {0}LL; ++ox) acc[ox] "
                        "= {1};\n",
                        ow, isMax ? "-INFINITY" : "0.0f")
              .str(),
          isMax ? "          acc[ox] = mpc_max_nan(acc[ox], v);\n"
                : "          acc[ox] += v;\n",
          llvm::formatv("    for (long long ox = 0; ox < {0}LL; ++ox) "
                        "mpc_store(y + r * {0}LL + ox, {1});\n",
                        ow,
                        isMax ? std::string("acc[ox]") : "acc[ox] / " + divisor)
              .str())
          .value_or("");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ x, {2} *__restrict__ y) "
      "{{\n"
      "{19}"
      "  MPC_FOR_EACH(i, {3}LL) {{\n"
      "    long long plane = i / {4}LL, oy = (i / {5}LL) % {6}LL, ox = i % "
      "{5}LL;\n"
      "    const {1} *src = x + plane * {7}LL;\n"
      "    float acc = {8};\n"
      "    for (long long ky = 0; ky < {9}LL; ++ky) {{\n"
      "      long long iy = oy * {11}LL - {13}LL + ky;\n"
      "      if (iy < 0 || iy >= {15}LL) continue;\n"
      "      for (long long kx = 0; kx < {10}LL; ++kx) {{\n"
      "        long long ix = ox * {12}LL - {14}LL + kx;\n"
      "        if (ix < 0 || ix >= {16}LL) continue;\n"
      "        float v = mpc_load(src + iy * {16}LL + ix);\n"
      "        {17}\n"
      "      }\n"
      "    }\n"
      "    mpc_store(y + i, {18});\n"
      "  }\n"
      "{20}"
      "}\n",
      name, elementCType(input), elementCType(output), out.getNumElements(),
      oh * ow, ow, oh, h * w, isMax ? "-INFINITY" : "0.0f", kernel[0],
      kernel[1], stride[0], stride[1], padding[0], padding[1], h, w,
      isMax ? "acc = mpc_max_nan(acc, v);" : "acc += v;",
      isMax ? std::string("acc") : "acc / " + divisor,
      onCpu.empty() ? "" : "#ifdef MPC_DEVICE_BLOCKS\n",
      onCpu.empty() ? "" : "#else\n" + onCpu + "#endif\n"));
  emitter.launch(
      name, grid, 256, {emitter.constPointer(input), emitter.pointer(output)},
      // An average adds each window element and divides once.
      KernelCost().reads(input).writes(output).flopsPer(
          isMax ? 0 : out.getNumElements(), kernel[0] * kernel[1] + 1));
}

/// A constant that is not a splat is copied from the program's data at the
/// start of every step that uses it. The data are f32 bit patterns: a static
/// array needs constant initialisers, and NVRTC has no constant expression
/// for inf or NaN (the bits also keep a NaN's payload).
void emitDenseConstant(StepEmitter &emitter, ConstantOp op) {
  auto type = op.getResult().getType();
  auto dense = dyn_cast<DenseFPElementsAttr>(op.getValue());
  std::string name = emitter.kernelName("constant_data");
  std::string data;
  llvm::raw_string_ostream os(data);
  os << "static const unsigned int " << name << "[] = {";
  llvm::interleaveComma(dense.getValues<APFloat>(), os, [&](APFloat value) {
    bool losesInfo = false;
    value.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven,
                  &losesInfo);
    os << llvm::format_hex(value.bitcastToAPInt().getZExtValue(), 10) << "u";
  });
  os << "};\n";
  std::string fill = emitter.kernelName("constant");
  emitter.addKernel(
      data +
      llvm::formatv("__global__ void {0}({1} *__restrict__ out) {{\n"
                    "  MPC_FOR_EACH(i, {2}LL) mpc_store(out + i, "
                    "mpc_float_from_bits({3}[i]));\n"
                    "}\n",
                    fill, elementCType(op.getResult()), type.getNumElements(),
                    name)
          .str());
  emitter.launch(fill, elementwiseGrid(type.getNumElements()), 256,
                 {emitter.pointer(op.getResult())},
                 // The data is kept as f32 in the program.
                 KernelCost()
                     .readsBytes(type.getNumElements() * 4)
                     .writes(op.getResult()));
}

} // namespace

std::optional<std::string> mlir::mpc::clippedAvgPoolDivisor(
    ArrayRef<int64_t> kernel, ArrayRef<int64_t> stride,
    ArrayRef<int64_t> padding, int64_t h, int64_t w, int64_t oh, int64_t ow) {
  int64_t extent[2] = {h, w}, windows[2] = {oh, ow};
  const char *coordinate[2] = {"oy", "ox"};
  bool clipped = false;
  std::string factors[2];
  for (int d = 0; d < 2; ++d) {
    int64_t end = extent[d] + padding[d];
    factors[d] = std::to_string(kernel[d]);
    if ((windows[d] - 1) * stride[d] - padding[d] + kernel[d] <= end)
      continue;
    clipped = true;
    // The window's extent up to the end of the padding.
    factors[d] = llvm::formatv("({0} * {1}LL + {2}LL > {3}LL ? {3}LL - {0} * "
                               "{1}LL + {4}LL : {2}LL)",
                               coordinate[d], stride[d], kernel[d] - padding[d],
                               end, padding[d])
                     .str();
  }
  if (!clipped)
    return std::nullopt;
  return "(float)(" + factors[0] + " * " + factors[1] + ")";
}

FailureOr<bool> mlir::mpc::emitDataMovement(Operation *op, const Step &step,
                                            StepEmitter &emitter) {
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    emitTranspose(emitter, transpose);
    return true;
  }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    emitSlice(emitter, slice);
    return true;
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    emitConcat(emitter, concat);
    return true;
  }
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    emitEmbedding(emitter, embedding);
    return true;
  }
  if (auto pool = dyn_cast<MaxPool2dOp>(op)) {
    emitPool(emitter, op, pool.getInput(), pool.getResult(), pool.getKernel(),
             pool.getStrideOrDefault(), pool.getPaddingOrDefault(), true);
    return true;
  }
  if (auto pool = dyn_cast<MaxPool2dWithIndicesOp>(op)) {
    // Max pooling that also stores each window's argmax as its position in
    // the window (ky * KW + kx; -1 for a window of padding only), found
    // with the comparison max_pool2d_grad's argmax kernel used: the first
    // maximum, the last NaN.
    emitMaxPoolWithIndices(emitter, pool,
                           emitter.kernelName("max_pool2d_with_indices"),
                           pool.getInput());
    return true;
  }
  if (auto pool = dyn_cast<AvgPool2dOp>(op)) {
    emitPool(emitter, op, pool.getInput(), pool.getResult(), pool.getKernel(),
             pool.getStrideOrDefault(), pool.getPaddingOrDefault(), false);
    return true;
  }
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    if (!isa<DenseFPElementsAttr>(constant.getValue()))
      return constant.emitError() << "only float constants have code yet";
    emitDenseConstant(emitter, constant);
    return true;
  }
  return false;
}
