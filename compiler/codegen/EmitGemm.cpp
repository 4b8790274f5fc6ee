//===- EmitGemm.cpp - GEMM-like ops as runtime GEMM calls ---------*- C++
//-*-===//
//
// This file implements emitGemmLike: linear, matmul and batch_matmul become
// calls to mpc_rt_gemm (fp32 accumulation; the cpu runtime's blocked GEMM,
// cuBLASLt on the cuda target). A linear's bias (one value per output
// column, of the output's type) is fused into the GEMM: mpc_rt_gemm_bias,
// cuBLASLt's bias epilogue on cuda, so C is written once and never read.
// conv2d's bias, which runs along the other dimension (one value per output
// channel, broadcast over pixels), and a bias of another type are broadcast
// into the output by a bias_fill kernel first, and the GEMM accumulates onto
// them (beta = 1). A tanh GELU of a biased linear's output is applied in
// the same epilogue where mpc-form-kernels grouped it with the linear
// (mpc_rt_gemm_bias_gelu, cuBLASLt's GELU_AUX_BIAS): the GEMM writes the
// GELU's input, which the backward pass reads, and its output. The GEMM
// call, the conv geometry and im2col are shared with EmitBackward.cpp
// through Codegen.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::mpc;

//===----------------------------------------------------------------------===//
// Helpers shared with EmitBackward.cpp (declared in Codegen.h)
//===----------------------------------------------------------------------===//

int64_t mlir::mpc::gemmWorkspaceBytes(int smVersion) {
  // cuBLAS's guide (cublasSetWorkspace) recommends 32 MiB on Hopper, whose
  // kernels split work across more of the GPU, and 4 MiB elsewhere.
  return smVersion / 10 == 9 ? int64_t{32} << 20 : int64_t{4} << 20;
}

const char *mlir::mpc::gemmDtype(Value value) {
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  if (element.isF16())
    return "MPC_F16";
  if (element.isBF16())
    return "MPC_BF16";
  return "MPC_F32";
}

void mlir::mpc::emitGemmCall(StepEmitter &emitter, const GemmCall &call) {
  assert(!(call.accumulate && !call.bias.empty()) &&
         "a fused bias replaces C; it cannot accumulate onto it");
  // 2·m·n·k FLOPs per product (KernelCost's GEMM convention, which leaves
  // out the epilogue's adds, of C or of a bias, as it always has); an
  // operand with stride 0 is shared by the whole batch and read once, and
  // so is a fused bias (every batch matrix adds the same n values).
  auto operandBytes = [&](StringRef dtype, int64_t elements, int64_t stride) {
    return elements * (stride == 0 ? 1 : call.batch) * gemmDtypeBytes(dtype);
  };
  bool hasBias = !call.bias.empty();
  bool hasGelu = !call.geluOut.empty();
  assert((!hasGelu || hasBias) && "the GELU epilogue comes with a bias");
  int64_t cBytes = operandBytes(call.cType, call.m * call.n, call.strideC);
  KernelCost cost;
  cost.flopsPer(call.batch, KernelCost::product({2, call.m, call.n, call.k}))
      .flopsPer(KernelCost::product({call.batch, call.m, call.n}),
                call.epilogueFlops)
      .readsBytes(operandBytes(call.aType, call.m * call.k, call.strideA) +
                  operandBytes(call.bType, call.k * call.n, call.strideB) +
                  (call.accumulate ? cBytes : 0) +
                  (hasBias ? call.n * gemmDtypeBytes(call.cType) : 0))
      .writesBytes(hasGelu ? 2 * cBytes : cBytes);
  bool halfInputs = call.aType != "MPC_F32" && call.bType != "MPC_F32";
  // One plain matrix with an epilogue of its own: mpc_rt_gemm_dgelu reads
  // the GELU's input (C's type and layout) before C, mpc_rt_gemm_bgrad
  // writes the m f32 sums of op(A)'s rows after it.
  bool dgelu = !call.dgeluInput.empty(), bgrad = !call.biasGrad.empty();
  if (dgelu || bgrad) {
    assert(!(dgelu && bgrad) && !hasBias && !call.accumulate &&
           call.batch == 1 && "a single-matrix epilogue on one plain GEMM");
    if (dgelu)
      cost.readsBytes(call.m * call.n * gemmDtypeBytes(call.cType));
    else // m * k adds
      cost.flopsPer(call.m, call.k).writesBytes(call.m * 4);
    StringRef entry = dgelu ? "mpc_rt_gemm_dgelu" : "mpc_rt_gemm_bgrad";
    emitter.recordCall(entry, KernelKind::Gemm, halfInputs, cost);
    emitter.checkedCall(llvm::formatv(
        "{0}({1}, {2}, {3}, {4}, {5}, {6}LL, {7}LL, {8}LL, 1.0f, {9}, {10}LL, "
        "{11}, {12}LL, {13}{14}, {15}LL{16})",
        entry, call.aType, call.bType, call.cType, call.transA ? 1 : 0,
        call.transB ? 1 : 0, call.m, call.n, call.k, call.a, call.lda, call.b,
        call.ldb, dgelu ? call.dgeluInput + ", " : std::string(), call.c,
        call.ldc, bgrad ? ", " + call.biasGrad : std::string()));
    return;
  }
  StringRef entry = hasGelu   ? "mpc_rt_gemm_bias_gelu"
                    : hasBias ? "mpc_rt_gemm_bias"
                              : "mpc_rt_gemm";
  emitter.recordCall(entry, KernelKind::Gemm, halfInputs, cost);
  // mpc_rt_gemm takes beta where mpc_rt_gemm_bias takes the bias;
  // mpc_rt_gemm_bias_gelu takes the GELU output last.
  std::string betaOrBias =
      hasBias ? call.bias : (call.accumulate ? "1.0f" : "0.0f");
  emitter.checkedCall(llvm::formatv(
      "{19}({0}, {1}, {2}, {3}, {4}, {5}LL, {6}LL, {7}LL, 1.0f, {8}, "
      "{9}LL, {10}LL, {11}, {12}LL, {13}LL, {14}, {15}, {16}LL, {17}LL, "
      "{18}LL{20})",
      call.aType, call.bType, call.cType, call.transA ? 1 : 0,
      call.transB ? 1 : 0, call.m, call.n, call.k, call.a, call.lda,
      call.strideA, call.b, call.ldb, call.strideB, betaOrBias, call.c,
      call.ldc, call.strideC, call.batch,
      entry, hasGelu ? ", " + call.geluOut : std::string()));
}

ConvGeometry
mlir::mpc::convGeometry(RankedTensorType input, RankedTensorType weight,
                        RankedTensorType output, ArrayRef<int64_t> stride,
                        ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation,
                        int64_t groups) {
  return {input.getDimSize(0),
          input.getDimSize(1),
          input.getDimSize(2),
          input.getDimSize(3),
          weight.getDimSize(0),
          weight.getDimSize(2),
          weight.getDimSize(3),
          output.getDimSize(2),
          output.getDimSize(3),
          groups,
          SmallVector<int64_t, 2>(stride),
          SmallVector<int64_t, 2>(padding),
          SmallVector<int64_t, 2>(dilation)};
}

void mlir::mpc::emitIm2col(StepEmitter &emitter, Value input,
                           const ConvGeometry &g, const std::string &columns) {
  // One loop iteration per column row segment (plane, ky, kx, oy): the
  // input row iy and the range of ox whose ix falls inside the image are
  // worked out once, then OW elements are written in order.
  int64_t rows = g.n * g.c * g.kh * g.kw * g.oh;
  std::string element =
      cType(cast<RankedTensorType>(input.getType()).getElementType());
  std::string name = emitter.kernelName("im2col");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ x, {1} *__restrict__ "
      "columns) {{\n"
      "  MPC_FOR_EACH_TILED(r, {2}LL, {16}LL) {{\n"
      "    long long oy = r % {4}LL, kx = (r / {4}LL) % {6}LL;\n"
      "    long long ky = (r / ({4}LL * {6}LL)) % {7}LL;\n"
      "    long long plane = r / ({4}LL * {6}LL * {7}LL);\n"
      "    {1} *out = columns + r * {3}LL;\n"
      "    long long iy = oy * {8}LL - {10}LL + ky * {12}LL;\n"
      "    if (iy < 0 || iy >= {14}LL) {{\n"
      "      for (long long ox = 0; ox < {3}LL; ++ox) out[ox] = {1}{{};\n"
      "      continue;\n"
      "    }\n"
      "    const {1} *src = x + (plane * {14}LL + iy) * {15}LL;\n"
      "    long long shift = kx * {13}LL - {11}LL;\n"
      // ix = ox * stride + shift is inside the row for ox in [lo, hi): a
      // plain copy there, which the host compiler vectorises, and padding
      // on either side.
      "    long long lo = shift >= 0 ? 0 : (-shift + {9}LL - 1) / {9}LL;\n"
      "    long long last = {15}LL - 1 - shift;\n"
      "    long long hi = last < 0 ? 0 : last / {9}LL + 1;\n"
      "    if (hi > {3}LL) hi = {3}LL;\n"
      "    if (lo > hi) lo = hi;\n"
      "    for (long long ox = 0; ox < lo; ++ox) out[ox] = {1}{{};\n"
      "    for (long long ox = lo; ox < hi; ++ox) out[ox] = src[ox * {9}LL + "
      "shift];\n"
      "    for (long long ox = hi; ox < {3}LL; ++ox) out[ox] = {1}{{};\n"
      "  }\n"
      "}\n",
      name, element, rows, g.ow, g.oh, g.outputPixels(), g.kw, g.kh,
      g.stride[0], g.stride[1], g.padding[0], g.padding[1], g.dilation[0],
      g.dilation[1], g.h, g.w, imageRowTile));
  // Reads the input, writes every column element (padding included).
  emitter.launch(
      name, tiledGrid(rows, imageRowTile), 256,
      {emitter.constPointer(input), columns},
      KernelCost().reads(input).writesBytes(
          g.columnElements() *
          storageBytes(RankedTensorType::get(
              {1}, cast<RankedTensorType>(input.getType()).getElementType()))));
}

namespace {

/// One row-major GEMM: C = op(A) · op(B) (+ C when accumulate, + bias[j]
/// with a bias), batched.
struct Gemm {
  Value a, b, c;
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool accumulate = false;
  Value bias;
  Operation *gelu = nullptr; ///< applied in the epilogue (with a bias)
  Value biasGrad; ///< written by the epilogue: sums of op(A)'s rows, f32
  Value dgeluInput; ///< GELU's input, at which the epilogue's derivative is
  Operation *dgelu = nullptr; ///< the gelu_grad the epilogue computes
};

/// A contiguous row-major GEMM between whole values.
void emitWholeGemm(StepEmitter &emitter, const Gemm &gemm) {
  GemmCall call;
  call.aType = gemmDtype(gemm.a);
  call.bType = gemmDtype(gemm.b);
  call.cType = gemmDtype(gemm.c);
  call.transA = gemm.transA;
  call.transB = gemm.transB;
  call.m = gemm.m;
  call.n = gemm.n;
  call.k = gemm.k;
  call.a = emitter.constPointer(gemm.a);
  call.b = emitter.constPointer(gemm.b);
  call.c = emitter.pointer(gemm.c);
  call.lda = gemm.transA ? gemm.m : gemm.k;
  call.ldb = gemm.transB ? gemm.k : gemm.n;
  call.ldc = gemm.n;
  call.strideA = gemm.m * gemm.k;
  call.strideB = gemm.k * gemm.n;
  call.strideC = gemm.m * gemm.n;
  call.batch = gemm.batch;
  call.accumulate = gemm.accumulate;
  if (gemm.bias)
    call.bias = emitter.constPointer(gemm.bias);
  if (gemm.gelu) {
    call.geluOut = emitter.pointer(gemm.gelu->getResult(0));
    call.epilogueFlops = elementwiseFlops(gemm.gelu, emitter.isTraining());
  }
  if (gemm.biasGrad)
    call.biasGrad = emitter.pointer(gemm.biasGrad);
  if (gemm.dgelu) {
    call.dgeluInput = emitter.constPointer(gemm.dgeluInput);
    call.epilogueFlops = elementwiseFlops(gemm.dgelu, emitter.isTraining());
  }
  emitGemmCall(emitter, call);
}

/// out[r, j, p] = bias[j] for every row r and inner position p: the GEMM
/// then adds its product onto the bias.
void emitBiasFill(StepEmitter &emitter, Value bias, Value out, int64_t rows,
                  int64_t columns, int64_t inner = 1) {
  auto outType = cast<RankedTensorType>(out.getType());
  std::string name = emitter.kernelName("bias_fill");
  emitter.addKernel(llvm::formatv(
      "__global__ void {0}(const {1} *__restrict__ bias, {2} *__restrict__ "
      "out) {{\n"
      "  MPC_FOR_EACH(i, {3}LL) mpc_store(out + i, mpc_load(bias + (i / "
      "{5}LL) % {4}LL));\n"
      "}\n",
      name,
      cType(cast<RankedTensorType>(bias.getType()).getElementType()),
      cType(outType.getElementType()), rows * columns * inner, columns,
      inner));
  emitter.launch(name, elementwiseGrid(rows * columns * inner), 256,
                 {emitter.constPointer(bias), emitter.pointer(out)},
                 KernelCost().reads(bias).writes(out));
}

void emitConv2d(StepEmitter &emitter, const Step &step, Conv2dOp op) {
  ConvGeometry g =
      convGeometry(op.getInput().getType(), op.getWeight().getType(),
                   op.getResult().getType(), op.getStrideOrDefault(),
                   op.getPaddingOrDefault(), op.getDilationOrDefault(),
                   op.getGroupsOrDefault());
  std::string element = cType(op.getInput().getType().getElementType());
  std::string columns = emitter.scratchPointer(step, element);
  emitIm2col(emitter, op.getInput(), g, columns);
  if (Value bias = op.getBias())
    emitBiasFill(emitter, bias, op.getResult(), g.n, g.o, g.outputPixels());
  // out[n, group] = W[group] · columns[n, group], batched over n.
  for (int64_t group = 0; group < g.groups; ++group) {
    GemmCall call;
    call.aType = call.bType = gemmDtype(op.getInput());
    call.cType = gemmDtype(op.getResult());
    call.m = g.outputsPerGroup();
    call.n = g.outputPixels();
    call.k = g.columnRows();
    call.a = llvm::formatv("{0} + {1}LL", emitter.constPointer(op.getWeight()),
                           group * g.outputsPerGroup() * g.columnRows());
    call.lda = g.columnRows();
    call.b = llvm::formatv("{0} + {1}LL", columns,
                           group * g.columnRows() * g.outputPixels());
    call.ldb = g.outputPixels();
    call.strideB = g.c * g.kh * g.kw * g.outputPixels();
    call.c = llvm::formatv("{0} + {1}LL", emitter.pointer(op.getResult()),
                           group * g.outputsPerGroup() * g.outputPixels());
    call.ldc = g.outputPixels();
    call.strideC = g.o * g.outputPixels();
    call.batch = g.n;
    call.accumulate = static_cast<bool>(op.getBias());
    emitGemmCall(emitter, call);
  }
}

} // namespace

FailureOr<bool> mlir::mpc::emitGemmLike(Operation *op, const Step &step,
                                        StepEmitter &emitter) {
  if (auto linear = dyn_cast<LinearOp>(op)) {
    // [..., K] · [N, K]ᵀ: one GEMM over all leading dims.
    auto weight = linear.getWeight().getType();
    Gemm gemm{linear.getInput(), linear.getWeight(), linear.getResult()};
    gemm.transB = true;
    gemm.n = weight.getDimSize(0);
    gemm.k = weight.getDimSize(1);
    gemm.m = linear.getInput().getType().getNumElements() / gemm.k;
    gemm.c = writtenResult(step);
    if (Value bias = linear.getBias()) {
      // The GEMM's epilogue adds a bias of C's type (cuBLASLt's bias has
      // D's type); another type is converted by bias_fill on the way.
      if (cast<RankedTensorType>(bias.getType()).getElementType() ==
          linear.getResult().getType().getElementType()) {
        gemm.bias = bias;
        // mpc-form-kernels put a GELU the epilogue applies into this step.
        if (step.ops.size() == 2 && isa<GeluOp>(step.ops[1]))
          gemm.gelu = step.ops[1];
      } else {
        emitBiasFill(emitter, bias, linear.getResult(), gemm.m, gemm.n);
        gemm.accumulate = true;
      }
    }
    emitWholeGemm(emitter, gemm);
    return true;
  }
  if (auto conv = dyn_cast<Conv2dOp>(op)) {
    emitConv2d(emitter, step, conv);
    return true;
  }
  if (isa<MatmulOp, BatchMatmulOp>(op)) {
    bool transA = op->hasAttr("transpose_lhs");
    bool transB = op->hasAttr("transpose_rhs");
    auto lhs = cast<RankedTensorType>(op->getOperand(0).getType());
    auto result = cast<RankedTensorType>(op->getResult(0).getType());
    int64_t rank = lhs.getRank();
    Gemm gemm{op->getOperand(0), op->getOperand(1), op->getResult(0), transA,
              transB};
    gemm.m = result.getDimSize(rank - 2);
    gemm.n = result.getDimSize(rank - 1);
    gemm.k = lhs.getDimSize(transA ? rank - 2 : rank - 1);
    gemm.batch = result.getNumElements() / (gemm.m * gemm.n);
    gemm.c = writtenResult(step);
    // mpc-form-kernels put the bias gradient (the reduce_sum of the left
    // operand, widened to f32) into this step: the epilogue writes it.
    for (Operation *member : step.ops)
      if (auto widen = dyn_cast<CastOp>(member);
          widen && widen.getInput().getDefiningOp<ReduceSumOp>())
        gemm.biasGrad = widen.getResult();
    // ... or the GELU gradient of its product: the epilogue writes that.
    for (Operation *member : step.ops)
      if (auto grad = dyn_cast<GeluGradOp>(member)) {
        gemm.dgelu = grad;
        gemm.dgeluInput = grad.getInput();
        gemm.c = grad.getResult();
      }
    emitWholeGemm(emitter, gemm);
    return true;
  }
  return false;
}
