//===- EmitConv.cpp - conv2d and its gradients over the whole batch -------===//
//
// This file implements emitConvolution: conv2d, conv2d_grad_input and
// conv2d_grad_weight, on NCHW tensors, each direction one GEMM call for the
// whole batch and every group (never one per image or per group, so the
// generated code grows with the ops, not with the batch or the groups).
//
// Dense and grouped convolutions unfold the input into one column matrix for
// the batch, [C*KH*KW, N*OH*OW]: row (c, ky, kx), column (n, oy, ox). Group
// g's rows are the g-th (C/groups)*KH*KW of them, so every GEMM is batched
// over groups with plain strides:
//   forward      y[g]    = W[g] · col[g]
//   grad input   dcol[g] = W[g]ᵀ · dy[g], then col2im (a gather, in f32)
//   grad weight  dW[g]   = dy[g] · col[g]ᵀ, k = N*OH*OW: the sum over the
//                batch is the GEMM's own f32 accumulation, rounded once
// where dy[g] is the gradient regrouped by channel, [O, N*OH*OW]. Without
// groups, the forward GEMM and grad input's are batched over images instead
// (one image's columns are every N*OH*OW-th stretch of OH*OW), which reads
// NCHW tensors as they are and needs no regrouping; a grouped forward writes
// its product [O, N*OH*OW] in f32 and a regrouping kernel adds the bias and
// rounds once into NCHW. A dense 1x1 convolution with stride 1 and no
// padding (half of ResNet-50's) reads its input as its columns and writes
// its input gradient straight from the GEMM: no im2col, no col2im.
//
// Depthwise convolutions (one input channel per group, MobileNet's and
// EfficientNet's) are direct kernels: a GEMM with k = KH*KW would be all
// overhead. Their weight gradient is a block reduction per weight, so its
// sums have one order for any block count and thread count.
//
// On the cuda target every direction of every convolution whose tensors
// share an element type is one cuDNN call instead (mpc_rt_cuda_conv, an
// execution plan the session builds at creation from the model's table of
// mpc_conv_desc): cuDNN's implicit-GEMM engines read the input where it
// is, so no column matrix, regrouped gradient or scratch exists, and
// groups and depthwise convolutions are cuDNN's own.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace mlir::mpc;

namespace {

/// The shape bookkeeping of one conv2d, shared by forward and backward.
struct ConvGeometry {
  int64_t n, c, h, w, o, kh, kw, oh, ow, groups;
  SmallVector<int64_t, 2> stride, padding, dilation;

  ConvGeometry(RankedTensorType input, RankedTensorType weight,
               RankedTensorType output, ArrayRef<int64_t> stride,
               ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation,
               int64_t groups)
      : n(input.getDimSize(0)), c(input.getDimSize(1)),
        h(input.getDimSize(2)), w(input.getDimSize(3)),
        o(weight.getDimSize(0)), kh(weight.getDimSize(2)),
        kw(weight.getDimSize(3)), oh(output.getDimSize(2)),
        ow(output.getDimSize(3)), groups(groups), stride(stride),
        padding(padding), dilation(dilation) {}
  explicit ConvGeometry(Conv2dOp op)
      : ConvGeometry(op.getInput().getType(), op.getWeight().getType(),
                     op.getResult().getType(), op.getStrideOrDefault(),
                     op.getPaddingOrDefault(), op.getDilationOrDefault(),
                     op.getGroupsOrDefault()) {}
  explicit ConvGeometry(Conv2dGradInputOp op)
      : ConvGeometry(op.getResult().getType(), op.getWeight().getType(),
                     op.getGrad().getType(), op.getStride(), op.getPadding(),
                     op.getDilation(), op.getGroups()) {}
  explicit ConvGeometry(Conv2dGradWeightOp op)
      : ConvGeometry(op.getInput().getType(), op.getResult().getType(),
                     op.getGrad().getType(), op.getStride(), op.getPadding(),
                     op.getDilation(), op.getGroups()) {}

  int64_t channelsPerGroup() const { return c / groups; }
  int64_t outputsPerGroup() const { return o / groups; }
  /// One input channel per group: the direct kernels.
  bool depthwise() const { return groups > 1 && channelsPerGroup() == 1; }
  /// A dense 1x1 convolution with stride 1 and no padding: each image is
  /// already its own column matrix [C, H*W], so there is no im2col in the
  /// forward pass and no col2im in grad input.
  bool pointwise() const {
    return groups == 1 && kh == 1 && kw == 1 && stride[0] == 1 &&
           stride[1] == 1 && padding[0] == 0 && padding[1] == 0;
  }
  int64_t taps() const { return kh * kw; }
  /// Rows of the column matrix per group: (C / groups) * KH * KW.
  int64_t columnRows() const { return channelsPerGroup() * taps(); }
  int64_t outputPixels() const { return oh * ow; }
  /// Columns of the column matrix: one per output pixel of the batch.
  int64_t columnWidth() const { return n * outputPixels(); }
  /// Elements of the column matrix: C * KH * KW * N * OH * OW.
  int64_t columnElements() const { return c * taps() * columnWidth(); }
  /// Elements of the output (and of dy regrouped by channel).
  int64_t outputElements() const { return o * columnWidth(); }
};

/// A step's scratch: a first buffer, and optionally a second one after it
/// (256-byte aligned).
struct ConvScratch {
  int64_t firstBytes = 0;
  int64_t secondBytes = 0;
  int64_t secondOffset() const { return llvm::alignTo(firstBytes, 256); }
  int64_t total() const {
    return secondBytes ? std::min(saturatedBytes,
                                  secondOffset() + secondBytes)
                       : firstBytes;
  }
};

/// What each convolution op keeps in its step's scratch (nothing for a
/// depthwise one):
///   conv2d               columns (input's type; not pointwise); grouped,
///                        the f32 product
///   conv2d_grad_input    f32 column gradients (not pointwise); grouped, dy
///                        by channel
///   conv2d_grad_weight   columns (input's type); dy by channel, N > 1
ConvScratch convScratch(Operation *op, bool cudnnConvolutions) {
  ConvScratch scratch;
  if (runsOnCudnn(op, cudnnConvolutions))
    return scratch;
  auto bytes = [](int64_t elements, int64_t size) {
    return saturatingProduct({elements, size});
  };
  if (auto conv = dyn_cast<Conv2dOp>(op)) {
    ConvGeometry g(conv);
    if (g.depthwise() || g.pointwise())
      return scratch;
    scratch.firstBytes =
        bytes(g.columnElements(), elementBytes(conv.getInput()));
    if (g.groups > 1)
      scratch.secondBytes = bytes(g.outputElements(), 4);
  } else if (auto grad = dyn_cast<Conv2dGradInputOp>(op)) {
    ConvGeometry g(grad);
    if (g.depthwise() || g.pointwise())
      return scratch;
    scratch.firstBytes = bytes(g.columnElements(), 4);
    if (g.groups > 1 && g.n > 1)
      scratch.secondBytes =
          bytes(g.outputElements(), elementBytes(grad.getGrad()));
  } else if (auto grad = dyn_cast<Conv2dGradWeightOp>(op)) {
    ConvGeometry g(grad);
    if (g.depthwise())
      return scratch;
    scratch.firstBytes =
        bytes(g.columnElements(), elementBytes(grad.getInput()));
    if (g.n > 1)
      scratch.secondBytes =
          bytes(g.outputElements(), elementBytes(grad.getGrad()));
  }
  return scratch;
}

//===----------------------------------------------------------------------===//
// Column matrix and regrouping
//===----------------------------------------------------------------------===//

/// Unfolds `input` into the column matrix `columns` (a pointer expression of
/// the input's element type), [C*KH*KW, N*OH*OW]: element (c, ky, kx; n, oy,
/// ox) is the input pixel that tap (ky, kx) of output pixel (oy, ox) sees in
/// channel c of image n, or 0 in the padding.
void emitIm2col(StepEmitter &emitter, Value input, const ConvGeometry &g,
                const std::string &columns) {
  // The cpu target (one thread a block): one loop iteration per column row
  // segment (c, ky, kx, n, oy), whose input row iy and range of ox inside
  // the image are worked out once, then OW elements written in order.
  // Blocks of threads (cuda, emulation): a thread an element, so that a
  // warp's stores run along a row; a thread a row segment wrote 32 rows at
  // once (ResNet-50 batch 32 on an H100: 16.3 ms of im2col a step, 17 times
  // its bound). Both write the same values.
  int64_t rows = g.c * g.taps() * g.n * g.oh;
  std::string element = elementCType(input);
  std::string name = emitter.kernelName("im2col");
  std::string segment = llvm::formatv(
      "    long long oy = r % {0}LL, image = (r / {0}LL) % {1}LL;\n"
      "    long long kx = (r / ({0}LL * {1}LL)) % {2}LL;\n"
      "    long long ky = (r / ({0}LL * {1}LL * {2}LL)) % {3}LL;\n"
      "    long long channel = r / ({0}LL * {1}LL * {2}LL * {3}LL);\n"
      "    long long iy = oy * {4}LL - {5}LL + ky * {6}LL;\n"
      "    long long shift = kx * {7}LL - {8}LL;\n"
      "    long long plane = (image * {9}LL + channel) * {10}LL;\n",
      g.oh, g.n, g.kw, g.kh, g.stride[0], g.padding[0], g.dilation[0],
      g.dilation[1], g.padding[1], g.c, g.h);
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ x, {1} *__restrict__ "
      "columns) {{\n"
      "#ifdef MPC_DEVICE_BLOCKS\n"
      "  MPC_FOR_EACH(e, {2}LL * {3}LL) {{\n"
      "    long long r = e / {3}LL, ox = e % {3}LL;\n"
      "{4}"
      "    long long ix = ox * {5}LL + shift;\n"
      "    columns[e] = iy >= 0 && iy < {6}LL && ix >= 0 && ix < {7}LL\n"
      "                     ? x[(plane + iy) * {7}LL + ix] : {1}{{};\n"
      "  }\n"
      "#else\n"
      "  MPC_FOR_EACH_TILED(r, {2}LL, {8}LL) {{\n"
      "{4}"
      "    {1} *out = columns + r * {3}LL;\n"
      "    if (iy < 0 || iy >= {6}LL) {{\n"
      "      for (long long ox = 0; ox < {3}LL; ++ox) out[ox] = {1}{{};\n"
      "      continue;\n"
      "    }\n"
      "    const {1} *src = x + (plane + iy) * {7}LL;\n"
      // ix = ox * stride + shift is inside the row for ox in [lo, hi): a
      // plain copy there (memcpy's, mpc_copy_run, at stride 1), and padding
      // on either side.
      "    long long lo = shift >= 0 ? 0 : (-shift + {5}LL - 1) / {5}LL;\n"
      "    long long last = {7}LL - 1 - shift;\n"
      "    long long hi = last < 0 ? 0 : last / {5}LL + 1;\n"
      "    if (hi > {3}LL) hi = {3}LL;\n"
      "    if (lo > hi) lo = hi;\n"
      "    for (long long ox = 0; ox < lo; ++ox) out[ox] = {1}{{};\n"
      "{9}"
      "    for (long long ox = hi; ox < {3}LL; ++ox) out[ox] = {1}{{};\n"
      "  }\n"
      "#endif\n"
      "}\n",
      name, element, rows, g.ow, segment, g.stride[1], g.h, g.w, imageRowTile,
      g.stride[1] == 1
          ? "    mpc_copy_run(out + lo, src + lo + shift, hi - lo);\n"
          : llvm::formatv("    for (long long ox = lo; ox < hi; ++ox) out[ox] "
                          "= src[ox * {0}LL + shift];\n",
                          g.stride[1])
                .str()));
  // Reads the input, writes every column element (padding included).
  emitter.launch(name, tiledGrid(rows, imageRowTile), 256,
                 {emitter.constPointer(input), columns},
                 KernelCost().reads(input).writesBytes(g.columnElements() *
                                                       elementBytes(input)));
}

/// dy [N, O, OH*OW] regrouped by channel into `byChannel` [O, N*OH*OW] (the
/// GEMMs' operand whose k or n runs over the whole batch).
void emitGradByChannel(StepEmitter &emitter, Value grad, const ConvGeometry &g,
                       const std::string &byChannel) {
  std::string name = emitter.kernelName("conv_grad_by_channel");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ dy, {1} *__restrict__ "
      "out) {{\n"
      "  MPC_FOR_EACH(i, {2}LL) {{\n"
      "    long long pixel = i % {3}LL, image = (i / {3}LL) % {4}LL;\n"
      "    long long channel = i / ({3}LL * {4}LL);\n"
      "    out[i] = dy[(image * {5}LL + channel) * {3}LL + pixel];\n"
      "  }\n"
      "}\n",
      name, elementCType(grad), g.outputElements(), g.outputPixels(), g.n,
      g.o));
  emitter.launch(name, elementwiseGrid(g.outputElements()), 256,
                 {emitter.constPointer(grad), byChannel},
                 KernelCost().reads(grad).writesBytes(g.outputElements() *
                                                      elementBytes(grad)));
}

/// A grouped forward's f32 product [O, N*OH*OW] into the NCHW output, plus
/// the bias, rounded once.
void emitOutputFromProduct(StepEmitter &emitter, Conv2dOp op,
                           const ConvGeometry &g, const std::string &product) {
  Value bias = op.getBias();
  std::string name = emitter.kernelName("conv_output");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const float *__restrict__ product, {1} "
      "*__restrict__ y{2}) {{\n"
      "  MPC_FOR_EACH(i, {3}LL) {{\n"
      "    long long pixel = i % {4}LL, channel = (i / {4}LL) % {5}LL;\n"
      "    long long image = i / ({4}LL * {5}LL);\n"
      "    mpc_store(y + i, product[(channel * {6}LL + image) * {4}LL + "
      "pixel]{7});\n"
      "  }\n"
      "}\n",
      name, elementCType(op.getResult()),
      bias ? ", const " + elementCType(bias) + " *__restrict__ bias"
           : std::string(),
      g.outputElements(), g.outputPixels(), g.o, g.n,
      bias ? " + mpc_load(bias + channel)" : ""));
  SmallVector<std::string, 3> args{product, emitter.pointer(op.getResult())};
  KernelCost cost;
  cost.readsBytes(g.outputElements() * 4).writes(op.getResult());
  if (bias) {
    args.push_back(emitter.constPointer(bias));
    cost.reads(bias).flopsPer(g.outputElements(), 1);
  }
  emitter.launch(name, elementwiseGrid(g.outputElements()), 256, args, cost);
}

//===----------------------------------------------------------------------===//
// Dense and grouped convolutions: one GEMM call per direction
//===----------------------------------------------------------------------===//

void emitConv2d(StepEmitter &emitter, const Step &step, Conv2dOp op,
                const ConvGeometry &g) {
  ConvScratch scratch = convScratch(op, false);
  GemmCall call;
  call.aType = gemmDtype(op.getWeight());
  call.bType = gemmDtype(op.getInput());
  call.a = emitter.constPointer(op.getWeight());
  if (g.pointwise()) {
    // Image n's columns are x[n] itself, [C, H*W].
    call.b = emitter.constPointer(op.getInput());
    call.ldb = g.outputPixels();
  } else {
    call.b = emitter.scratchPointer(step, elementCType(op.getInput()));
    call.ldb = g.columnWidth();
    emitIm2col(emitter, op.getInput(), g, call.b);
  }
  if (g.groups == 1) {
    // y[n] = W · col[:, n*OH*OW : (n+1)*OH*OW], batched over images, into
    // the NCHW output itself; a bias is broadcast there first.
    if (Value bias = op.getBias())
      emitBiasFill(emitter, bias, op.getResult(), g.n, g.o, g.outputPixels());
    call.cType = gemmDtype(op.getResult());
    call.m = g.o;
    call.n = g.outputPixels();
    call.k = g.columnRows();
    call.lda = g.columnRows();
    call.strideA = 0;
    call.strideB = g.pointwise() ? g.c * g.outputPixels() : g.outputPixels();
    call.c = emitter.pointer(op.getResult());
    call.ldc = g.outputPixels();
    call.strideC = g.o * g.outputPixels();
    call.batch = g.n;
    call.accumulate = static_cast<bool>(op.getBias());
    emitGemmCall(emitter, call);
    return;
  }
  // product[g] = W[g] · col[g], [O/groups, N*OH*OW] each, batched over
  // groups; then into NCHW with the bias.
  std::string product =
      emitter.scratchPointer(step, "float", scratch.secondOffset());
  call.cType = "MPC_F32";
  call.m = g.outputsPerGroup();
  call.n = g.columnWidth();
  call.k = g.columnRows();
  call.lda = g.columnRows();
  call.strideA = g.outputsPerGroup() * g.columnRows();
  call.strideB = g.columnRows() * g.columnWidth();
  call.c = product;
  call.ldc = g.columnWidth();
  call.strideC = g.outputsPerGroup() * g.columnWidth();
  call.batch = g.groups;
  emitGemmCall(emitter, call);
  emitOutputFromProduct(emitter, op, g, product);
}

/// conv2d_grad_input: the f32 column gradient dcol = Wᵀ · dy (per group),
/// then col2im as a gather: input pixel (n, c, iy, ix) sums the column
/// entries of every tap (ky, kx) that reads it, i.e. iy = oy * stride - pad
/// + ky * dilation for an output row oy.
void emitConv2dGradInput(StepEmitter &emitter, const Step &step,
                         Conv2dGradInputOp op, const ConvGeometry &g) {
  ConvScratch scratch = convScratch(op, false);
  GemmCall call;
  call.aType = gemmDtype(op.getWeight());
  call.bType = gemmDtype(op.getGrad());
  call.cType = "MPC_F32";
  call.transA = true; // W[g] is stored [O/groups, columnRows]
  call.a = emitter.constPointer(op.getWeight());
  call.lda = g.columnRows();
  call.m = g.columnRows();
  if (g.pointwise()) {
    // dx[n] = Wᵀ · dy[n], batched over images, straight into dx: its
    // columns are its pixels.
    call.cType = gemmDtype(op.getResult());
    call.n = g.outputPixels();
    call.k = g.o;
    call.strideA = 0;
    call.b = emitter.constPointer(op.getGrad());
    call.ldb = g.outputPixels();
    call.strideB = g.o * g.outputPixels();
    call.c = emitter.pointer(op.getResult());
    call.ldc = g.outputPixels();
    call.strideC = g.c * g.outputPixels();
    call.batch = g.n;
    emitGemmCall(emitter, call);
    return;
  }
  std::string columns = emitter.scratchPointer(step, "float");
  call.c = columns;
  call.ldc = g.columnWidth();
  if (g.groups == 1) {
    // dcol[:, image] = Wᵀ · dy[image], batched over images.
    call.n = g.outputPixels();
    call.k = g.o;
    call.strideA = 0;
    call.b = emitter.constPointer(op.getGrad());
    call.ldb = g.outputPixels();
    call.strideB = g.o * g.outputPixels();
    call.strideC = g.outputPixels();
    call.batch = g.n;
  } else {
    // dcol[g] = W[g]ᵀ · dy[g], batched over groups, dy by channel.
    std::string byChannel = emitter.constPointer(op.getGrad());
    if (g.n > 1) {
      byChannel = emitter.scratchPointer(step, elementCType(op.getGrad()),
                                         scratch.secondOffset());
      emitGradByChannel(emitter, op.getGrad(), g, byChannel);
    }
    call.n = g.columnWidth();
    call.k = g.outputsPerGroup();
    call.strideA = g.outputsPerGroup() * g.columnRows();
    call.b = byChannel;
    call.ldb = g.columnWidth();
    call.strideB = g.outputsPerGroup() * g.columnWidth();
    call.strideC = g.columnRows() * g.columnWidth();
    call.batch = g.groups;
  }
  emitGemmCall(emitter, call);

  // Input pixel (image, channel, iy, ix) sums its taps, ky then kx. The cpu
  // target (one thread a block): one loop iteration per input row, then
  // its W pixels in order. Blocks of threads: a thread a pixel, so that a
  // warp's loads and stores run along a row (a thread a row took 9.8 ms of
  // ResNet-50's step on an H100). The same sums in the same order.
  int64_t rows = g.n * g.c * g.h;
  std::string name = emitter.kernelName("col2im");
  std::string row = llvm::formatv(
      "    long long iy = r % {0}LL, channel = (r / {0}LL) % {1}LL;\n"
      "    long long image = r / ({0}LL * {1}LL);\n"
      "    const float *pixels = columns + channel * {2}LL * {3}LL * {4}LL + "
      "image * {5}LL;\n",
      g.h, g.c, g.kh, g.kw, g.columnWidth(), g.outputPixels());
  std::string pixel = llvm::formatv(
      "      float acc = 0.0f;\n"
      "      for (long long ky = 0; ky < {0}LL; ++ky) {{\n"
      "        long long ty = iy + {2}LL - ky * {4}LL;\n"
      "        if (ty < 0 || ty % {6}LL != 0 || ty / {6}LL >= {8}LL) "
      "continue;\n"
      "        const float *tapRow = pixels + ky * {1}LL * {10}LL + "
      "(ty / {6}LL) * {9}LL;\n"
      "        for (long long kx = 0; kx < {1}LL; ++kx) {{\n"
      "          long long tx = ix + {3}LL - kx * {5}LL;\n"
      "          if (tx < 0 || tx % {7}LL != 0 || tx / {7}LL >= {9}LL) "
      "continue;\n"
      "          acc += tapRow[kx * {10}LL + tx / {7}LL];\n"
      "        }\n"
      "      }\n",
      g.kh, g.kw, g.padding[0], g.padding[1], g.dilation[0], g.dilation[1],
      g.stride[0], g.stride[1], g.oh, g.ow, g.columnWidth());
  // The cpu target keeps a row's W sums in an array and visits the taps
  // outside: for each (ky, kx), the pixels it reaches (tx = ix + pad - kx *
  // dilation a multiple of the stride, inside the output row) in a strided
  // run, bounds found once a tap instead of a branch a pixel and tap. Each
  // pixel still adds its taps in (ky, kx) order from 0. Rows wider than
  // the stack allows keep the pixel loop.
  constexpr int64_t widestRow = 1024;
  std::string rowOnCpu =
      g.w > widestRow
          ? llvm::formatv("    for (long long ix = 0; ix < {0}LL; ++ix) {{\n"
                          "{1}"
                          "      mpc_store(out + ix, acc);\n"
                          "    }\n",
                          g.w, pixel)
                .str()
          : llvm::formatv(
                "    float acc[{0}];\n"
                "    for (long long ix = 0; ix < {0}LL; ++ix) acc[ix] = 0.0f;\n"
                "    for (long long ky = 0; ky < {1}LL; ++ky) {{\n"
                "      long long ty = iy + {3}LL - ky * {5}LL;\n"
                "      if (ty < 0 || ty % {7}LL != 0 || ty / {7}LL >= {9}LL) "
                "continue;\n"
                "      const float *tapRow = pixels + ky * {2}LL * {11}LL + "
                "(ty / {7}LL) * {10}LL;\n"
                "      for (long long kx = 0; kx < {2}LL; ++kx) {{\n"
                "        long long offset = {4}LL - kx * {6}LL;\n"
                // The first ix with tx >= 0 and tx a multiple of the
                // stride; tx / stride < OW is tx < OW * stride.
                "        long long first = offset >= 0 ? 0 : -offset;\n"
                "        first += ({8}LL - (first + offset) % {8}LL) % {8}LL;\n"
                "        long long end = {10}LL * {8}LL - offset;\n"
                "        if (end > {0}LL) end = {0}LL;\n"
                "        const float *tap = tapRow + kx * {11}LL;\n"
                "        for (long long ix = first; ix < end; ix += {8}LL) "
                "acc[ix] += tap[(ix + offset) / {8}LL];\n"
                "      }\n"
                "    }\n"
                "    for (long long ix = 0; ix < {0}LL; ++ix) mpc_store(out + "
                "ix, acc[ix]);\n",
                g.w, g.kh, g.kw, g.padding[0], g.padding[1], g.dilation[0],
                g.dilation[1], g.stride[0], g.stride[1], g.oh, g.ow,
                g.columnWidth())
                .str();
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const float *__restrict__ columns, {1} "
      "*__restrict__ dx) {{\n"
      "#ifdef MPC_DEVICE_BLOCKS\n"
      "  MPC_FOR_EACH(e, {2}LL * {3}LL) {{\n"
      "    long long r = e / {3}LL, ix = e % {3}LL;\n"
      "{4}"
      "{5}"
      "      mpc_store(dx + e, acc);\n"
      "  }\n"
      "#else\n"
      "  MPC_FOR_EACH_TILED(r, {2}LL, {6}LL) {{\n"
      "{4}"
      "    {1} *out = dx + r * {3}LL;\n"
      "{7}"
      "  }\n"
      "#endif\n"
      "}\n",
      name, elementCType(op.getResult()), rows, g.w, row, pixel, imageRowTile,
      rowOnCpu));
  emitter.launch(name, tiledGrid(rows, imageRowTile), 256,
                 {columns, emitter.pointer(op.getResult())},
                 // Every fp32 column entry is added into its input pixel once.
                 KernelCost()
                     .readsBytes(g.columnElements() * 4)
                     .writes(op.getResult())
                     .flopsPer(g.columnElements(), 1));
}

/// conv2d_grad_weight: im2col of the input again, dy by channel, then
/// dW[g] = dy[g] · col[g]ᵀ batched over groups: k runs over the whole
/// batch's pixels, so the images' sum is the GEMM's f32 accumulation and a
/// half dW is rounded once, at the end. (Accumulating image by image into a
/// half dW rounded the running sum after every image: a relative error of
/// 0.105 at O2 bf16 on a batch of 256 in e2e.long_sums_conv_O2_bf16, 75
/// times that of rounding once.)
void emitConv2dGradWeight(StepEmitter &emitter, const Step &step,
                          Conv2dGradWeightOp op, const ConvGeometry &g) {
  ConvScratch scratch = convScratch(op, false);
  std::string columns =
      emitter.scratchPointer(step, elementCType(op.getInput()));
  emitIm2col(emitter, op.getInput(), g, columns);
  // One image's gradient is already [O, OH*OW].
  std::string byChannel = emitter.constPointer(op.getGrad());
  if (g.n > 1) {
    byChannel = emitter.scratchPointer(step, elementCType(op.getGrad()),
                                       scratch.secondOffset());
    emitGradByChannel(emitter, op.getGrad(), g, byChannel);
  }
  GemmCall call;
  call.aType = gemmDtype(op.getGrad());
  call.bType = gemmDtype(op.getInput());
  call.cType = gemmDtype(op.getResult());
  call.transB = true; // col[g] is stored [columnRows, N*OH*OW]
  call.m = g.outputsPerGroup();
  call.n = g.columnRows();
  call.k = g.columnWidth();
  call.a = byChannel;
  call.lda = g.columnWidth();
  call.strideA = g.outputsPerGroup() * g.columnWidth();
  call.b = columns;
  call.ldb = g.columnWidth();
  call.strideB = g.columnRows() * g.columnWidth();
  call.c = emitter.pointer(op.getResult());
  call.ldc = g.columnRows();
  call.strideC = g.outputsPerGroup() * g.columnRows();
  call.batch = g.groups;
  emitGemmCall(emitter, call);
}

//===----------------------------------------------------------------------===//
// Depthwise convolutions: direct kernels
//===----------------------------------------------------------------------===//

/// y[n, o, oy, ox] = bias[o] + sum over taps of w[o, ky, kx] * x[n, c, iy,
/// ix], c = o / (O / C): one thread per output element, the taps in order.
void emitDepthwiseConv2d(StepEmitter &emitter, Conv2dOp op,
                         const ConvGeometry &g) {
  Value bias = op.getBias();
  int64_t outputs = g.outputElements();
  std::string name = emitter.kernelName("depthwise_conv2d");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ x, const {2} "
      "*__restrict__ w, {3} *__restrict__ y{4}) {{\n"
      "  MPC_FOR_EACH(i, {5}LL) {{\n"
      "    long long ox = i % {6}LL, oy = (i / {6}LL) % {7}LL;\n"
      "    long long channel = (i / ({6}LL * {7}LL)) % {8}LL;\n"
      "    long long image = i / ({6}LL * {7}LL * {8}LL);\n"
      "    const {1} *plane = x + (image * {9}LL + channel / {10}LL) * "
      "{11}LL * {12}LL;\n"
      "    const {2} *taps = w + channel * {13}LL * {14}LL;\n"
      "    float acc = 0.0f;\n"
      "    for (long long ky = 0; ky < {13}LL; ++ky) {{\n"
      "      long long iy = oy * {15}LL - {17}LL + ky * {19}LL;\n"
      "      if (iy < 0 || iy >= {11}LL) continue;\n"
      "      for (long long kx = 0; kx < {14}LL; ++kx) {{\n"
      "        long long ix = ox * {16}LL - {18}LL + kx * {20}LL;\n"
      "        if (ix < 0 || ix >= {12}LL) continue;\n"
      "        acc += mpc_load(taps + ky * {14}LL + kx) * "
      "mpc_load(plane + iy * {12}LL + ix);\n"
      "      }\n"
      "    }\n"
      "    mpc_store(y + i, acc{21});\n"
      "  }\n"
      "}\n",
      name, elementCType(op.getInput()), elementCType(op.getWeight()),
      elementCType(op.getResult()),
      bias ? ", const " + elementCType(bias) + " *__restrict__ bias"
           : std::string(),
      outputs, g.ow, g.oh, g.o, g.c, g.outputsPerGroup(), g.h, g.w, g.kh,
      g.kw, g.stride[0], g.stride[1], g.padding[0], g.padding[1],
      g.dilation[0], g.dilation[1],
      bias ? " + mpc_load(bias + channel)" : ""));
  SmallVector<std::string, 4> args{emitter.constPointer(op.getInput()),
                                   emitter.constPointer(op.getWeight()),
                                   emitter.pointer(op.getResult())};
  KernelCost cost;
  cost.reads(op.getInput())
      .reads(op.getWeight())
      .writes(op.getResult())
      .flopsPer(outputs, 2 * g.taps());
  if (bias) {
    args.push_back(emitter.constPointer(bias));
    cost.reads(bias).flopsPer(outputs, 1);
  }
  emitter.launch(name, elementwiseGrid(outputs), 256, args, cost);
}

/// dx[n, c, iy, ix] sums w[o, ky, kx] * dy[n, o, oy, ox] over the outputs o
/// of channel c and every tap that reads the pixel (iy = oy * stride - pad +
/// ky * dilation): a gather, one thread per input element.
void emitDepthwiseConv2dGradInput(StepEmitter &emitter,
                                  Conv2dGradInputOp op,
                                  const ConvGeometry &g) {
  int64_t inputs = g.n * g.c * g.h * g.w;
  std::string name = emitter.kernelName("depthwise_conv2d_grad_input");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ dy, const {2} "
      "*__restrict__ w, {3} *__restrict__ dx) {{\n"
      "  MPC_FOR_EACH(i, {4}LL) {{\n"
      "    long long ix = i % {5}LL, iy = (i / {5}LL) % {6}LL;\n"
      "    long long channel = (i / ({5}LL * {6}LL)) % {7}LL;\n"
      "    long long image = i / ({5}LL * {6}LL * {7}LL);\n"
      "    float acc = 0.0f;\n"
      "    for (long long j = 0; j < {8}LL; ++j) {{\n"
      "      long long output = channel * {8}LL + j;\n"
      "      const {1} *plane = dy + (image * {9}LL + output) * {10}LL * "
      "{11}LL;\n"
      "      const {2} *taps = w + output * {12}LL * {13}LL;\n"
      "      for (long long ky = 0; ky < {12}LL; ++ky) {{\n"
      "        long long ty = iy + {16}LL - ky * {18}LL;\n"
      "        if (ty < 0 || ty % {14}LL != 0 || ty / {14}LL >= {10}LL) "
      "continue;\n"
      "        for (long long kx = 0; kx < {13}LL; ++kx) {{\n"
      "          long long tx = ix + {17}LL - kx * {19}LL;\n"
      "          if (tx < 0 || tx % {15}LL != 0 || tx / {15}LL >= {11}LL) "
      "continue;\n"
      "          acc += mpc_load(taps + ky * {13}LL + kx) * "
      "mpc_load(plane + (ty / {14}LL) * {11}LL + tx / {15}LL);\n"
      "        }\n"
      "      }\n"
      "    }\n"
      "    mpc_store(dx + i, acc);\n"
      "  }\n"
      "}\n",
      name, elementCType(op.getGrad()), elementCType(op.getWeight()),
      elementCType(op.getResult()), inputs, g.w, g.h, g.c,
      g.outputsPerGroup(), g.o, g.oh, g.ow, g.kh, g.kw, g.stride[0],
      g.stride[1], g.padding[0], g.padding[1], g.dilation[0],
      g.dilation[1]));
  emitter.launch(name, elementwiseGrid(inputs), 256,
                 {emitter.constPointer(op.getGrad()),
                  emitter.constPointer(op.getWeight()),
                  emitter.pointer(op.getResult())},
                 KernelCost()
                     .reads(op.getGrad())
                     .reads(op.getWeight())
                     .writes(op.getResult())
                     .flopsPer(g.outputElements(), 2 * g.taps()));
}

/// dw[o, ky, kx] = sum over n, oy, ox of dy[n, o, oy, ox] * x[n, c, iy, ix]:
/// one block per weight, its threads striding over the batch's output
/// pixels, combined by mpc_block_reduce_sum and rounded once.
void emitDepthwiseConv2dGradWeight(StepEmitter &emitter,
                                   Conv2dGradWeightOp op,
                                   const ConvGeometry &g) {
  int64_t weights = g.o * g.taps();
  std::string name = emitter.kernelName("depthwise_conv2d_grad_weight");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ dy, const {2} "
      "*__restrict__ x, {3} *__restrict__ dw) {{\n"
      "  long long weight = blockIdx.x, output = weight / {4}LL;\n"
      "  long long ky = (weight / {5}LL) % {6}LL, kx = weight % {5}LL;\n"
      "  long long channel = output / {7}LL;\n"
      "  mpc_sum sum = 0.0f;\n"
      "  MPC_FOR_THREAD(t, {8}LL) {{\n"
      "    long long ox = t % {9}LL, oy = (t / {9}LL) % {10}LL;\n"
      "    long long image = t / ({9}LL * {10}LL);\n"
      "    long long iy = oy * {11}LL - {13}LL + ky * {15}LL;\n"
      "    long long ix = ox * {12}LL - {14}LL + kx * {16}LL;\n"
      "    if (iy < 0 || iy >= {17}LL || ix < 0 || ix >= {18}LL) continue;\n"
      "    sum += mpc_load(dy + ((image * {19}LL + output) * {10}LL + oy) * "
      "{9}LL + ox) * mpc_load(x + ((image * {20}LL + channel) * {17}LL + iy) "
      "* {18}LL + ix);\n"
      "  }\n"
      "  float total = mpc_block_reduce_sum(sum);\n"
      "  if (threadIdx.x == 0) mpc_store(dw + weight, total);\n"
      "}\n",
      name, elementCType(op.getGrad()), elementCType(op.getInput()),
      elementCType(op.getResult()), g.taps(), g.kw, g.kh,
      g.outputsPerGroup(), g.columnWidth(), g.ow, g.oh, g.stride[0],
      g.stride[1], g.padding[0], g.padding[1], g.dilation[0], g.dilation[1],
      g.h, g.w, g.o, g.c));
  emitter.launch(name, weights, rowBlockSize,
                 {emitter.constPointer(op.getGrad()),
                  emitter.constPointer(op.getInput()),
                  emitter.pointer(op.getResult())},
                 // Each weight's block reads its output channel's gradient
                 // and input plane; caches serve the other taps.
                 KernelCost()
                     .reads(op.getGrad())
                     .reads(op.getInput())
                     .writes(op.getResult())
                     .flopsPer(g.outputElements(), 2 * g.taps()));
}

//===----------------------------------------------------------------------===//
// cuDNN (cuda target)
//===----------------------------------------------------------------------===//

/// One direction of a convolution as a cuDNN call: the model's table gets
/// its mpc_conv_desc (runtime/mpc_model.h), the step calls
/// mpc_rt_cuda_conv(index, x, w, y) with the three tensors as the forward
/// pass names them. A forward convolution with a bias adds onto the bias
/// broadcast into its output (cuDNN's beta = 1), as the GEMM path does.
void emitCudnnConvolution(StepEmitter &emitter, Operation *op) {
  Value x, w, y;
  StringRef direction;
  std::optional<ConvGeometry> geometry;
  Value bias;
  if (auto conv = dyn_cast<Conv2dOp>(op)) {
    x = conv.getInput(), w = conv.getWeight(), y = conv.getResult();
    bias = conv.getBias();
    direction = "MPC_CONV_FORWARD";
    geometry.emplace(conv);
  } else if (auto grad = dyn_cast<Conv2dGradInputOp>(op)) {
    x = grad.getResult(), w = grad.getWeight(), y = grad.getGrad();
    direction = "MPC_CONV_BACKWARD_DATA";
    geometry.emplace(grad);
  } else {
    auto filter = cast<Conv2dGradWeightOp>(op);
    x = filter.getInput(), w = filter.getResult(), y = filter.getGrad();
    direction = "MPC_CONV_BACKWARD_FILTER";
    geometry.emplace(filter);
  }
  const ConvGeometry &g = *geometry;
  if (bias)
    emitBiasFill(emitter, bias, y, g.n, g.o, g.outputPixels());
  std::string origin =
      (op->getName().getStringRef() + " at " + fileLineCol(op->getLoc())).str();
  int index = emitter.convolutionIndex(llvm::formatv(
      "{{{0}, {1}, {2}, {3}, {4}, {{{5}LL, {6}LL, {7}LL, {8}LL}, "
      "{{{9}LL, {10}LL, {11}LL, {12}LL}, {{{5}LL, {9}LL, {13}LL, {14}LL}, "
      "{{{15}LL, {16}LL}, {{{17}LL, {18}LL}, {{{19}LL, {20}LL}, {21}}",
      cStringLiteral(origin), direction, gemmDtype(x), gemmDtype(w),
      gemmDtype(y), g.n, g.c, g.h, g.w, g.o, g.channelsPerGroup(), g.kh, g.kw,
      g.oh, g.ow, g.stride[0], g.stride[1], g.padding[0], g.padding[1],
      g.dilation[0], g.dilation[1], bias ? 1 : 0));
  // 2 FLOPs per tap of every output pixel and output channel, in every
  // direction; the ideal bytes read the two operands once and write the
  // result once (implicit GEMM: no column matrix), plus the bias read back.
  KernelCost cost;
  cost.flopsPer(g.outputElements(), 2 * g.columnRows());
  Value result = op->getResult(0);
  for (Value operand : {x, w, y})
    if (operand != result)
      cost.reads(operand);
  cost.writes(result);
  if (bias)
    cost.reads(result);
  emitter.recordCall("mpc_rt_cuda_conv", KernelKind::Gemm,
                     gemmDtype(result) != StringRef("MPC_F32"), cost);
  emitter.checkedCall(llvm::formatv(
      "mpc_rt_cuda_conv({0}, {1}, {2}, {3})", index,
      direction == "MPC_CONV_BACKWARD_DATA" ? emitter.pointer(x)
                                            : emitter.constPointer(x),
      direction == "MPC_CONV_BACKWARD_FILTER" ? emitter.pointer(w)
                                              : emitter.constPointer(w),
      direction == "MPC_CONV_FORWARD" ? emitter.pointer(y)
                                      : emitter.constPointer(y)));
}

} // namespace

int64_t mlir::mpc::convolutionScratchBytes(Operation *op,
                                           bool cudnnConvolutions) {
  return convScratch(op, cudnnConvolutions).total();
}

bool mlir::mpc::runsOnCudnn(Operation *op, bool cudnnConvolutions) {
  if (!cudnnConvolutions)
    return false;
  auto elementType = [](Value value) {
    return cast<RankedTensorType>(value.getType()).getElementType();
  };
  Type result = elementType(op->getResult(0));
  return llvm::all_of(op->getOperands().take_front(2), [&](Value operand) {
    return elementType(operand) == result;
  });
}

FailureOr<bool> mlir::mpc::emitConvolution(Operation *op, const Step &step,
                                           StepEmitter &emitter) {
  if (isa<Conv2dOp, Conv2dGradInputOp, Conv2dGradWeightOp>(op) &&
      runsOnCudnn(op, emitter.getPlan().cudnnConvolutions)) {
    emitCudnnConvolution(emitter, op);
    return true;
  }
  if (auto conv = dyn_cast<Conv2dOp>(op)) {
    ConvGeometry g(conv);
    if (g.depthwise())
      emitDepthwiseConv2d(emitter, conv, g);
    else
      emitConv2d(emitter, step, conv, g);
    return true;
  }
  if (auto grad = dyn_cast<Conv2dGradInputOp>(op)) {
    ConvGeometry g(grad);
    if (g.depthwise())
      emitDepthwiseConv2dGradInput(emitter, grad, g);
    else
      emitConv2dGradInput(emitter, step, grad, g);
    return true;
  }
  if (auto grad = dyn_cast<Conv2dGradWeightOp>(op)) {
    ConvGeometry g(grad);
    if (g.depthwise())
      emitDepthwiseConv2dGradWeight(emitter, grad, g);
    else
      emitConv2dGradWeight(emitter, step, grad, g);
    return true;
  }
  return false;
}
