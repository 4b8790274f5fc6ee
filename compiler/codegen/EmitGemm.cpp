//===- EmitGemm.cpp - GEMM-like ops as runtime GEMM calls ---------*- C++
//-*-===//
//
// This file implements emitGemmLike: linear, matmul and batch_matmul become
// calls to mpc_rt_gemm (fp32 accumulation; the cpu runtime's blocked GEMM,
// cuBLASLt on the cuda target). A linear's bias (one value per output
// column, of the output's type) is fused into the GEMM: mpc_rt_gemm_bias,
// cuBLASLt's bias epilogue on cuda, so C is written once and never read.
// A bias of another type is broadcast into the output by a bias_fill kernel
// first, and the GEMM accumulates onto it (beta = 1), as conv2d's bias is
// (EmitConv.cpp). A tanh GELU of a biased linear's output is applied in
// the same epilogue where mpc-form-kernels grouped it with the linear
// (mpc_rt_gemm_bias_gelu, cuBLASLt's GELU_AUX_BIAS): the GEMM writes the
// GELU's input, which the backward pass reads, and its output. The GEMM
// call and bias_fill are shared with EmitConv.cpp through Emitter.h.
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
  if (isa<Float8E4M3FNType>(element))
    return "MPC_F8E4M3";
  if (isa<Float8E5M2Type>(element))
    return "MPC_F8E5M2";
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
  // writes the m sums of op(A)'s rows after it (f32, or rounded once to
  // C's half type).
  bool dgelu = !call.dgeluInput.empty(), bgrad = !call.biasGrad.empty();
  if (dgelu || bgrad) {
    assert(!(dgelu && bgrad) && !hasBias && !call.accumulate &&
           call.batch == 1 && "a single-matrix epilogue on one plain GEMM");
    if (dgelu)
      cost.readsBytes(call.m * call.n * gemmDtypeBytes(call.cType));
    else // m * k adds
      cost.flopsPer(call.m, call.k)
          .writesBytes(call.m * gemmDtypeBytes(call.biasGradType));
    StringRef entry = dgelu ? "mpc_rt_gemm_dgelu" : "mpc_rt_gemm_bgrad";
    emitter.recordCall(entry, KernelKind::Gemm, halfInputs, cost);
    emitter.checkedCall(llvm::formatv(
        "{0}({1}, {2}, {3}, {4}, {5}, {6}LL, {7}LL, {8}LL, 1.0f, {9}, {10}LL, "
        "{11}, {12}LL, {13}{14}, {15}LL{16})",
        entry, call.aType, call.bType, call.cType, call.transA ? 1 : 0,
        call.transB ? 1 : 0, call.m, call.n, call.k, call.a, call.lda, call.b,
        call.ldb, dgelu ? call.dgeluInput + ", " : std::string(), call.c,
        call.ldc,
        bgrad ? ", " + call.biasGradType + ", " + call.biasGrad
              : std::string()));
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

void mlir::mpc::emitBiasFill(StepEmitter &emitter, Value bias, Value out,
                             int64_t rows, int64_t columns, int64_t inner) {
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
  if (gemm.biasGrad) {
    call.biasGrad = emitter.pointer(gemm.biasGrad);
    call.biasGradType = gemmDtype(gemm.biasGrad);
  }
  if (gemm.dgelu) {
    call.dgeluInput = emitter.constPointer(gemm.dgeluInput);
    call.epilogueFlops = elementwiseFlops(gemm.dgelu, emitter.isTraining());
  }
  emitGemmCall(emitter, call);
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
    // operand, widened to f32 or in its half type) into this step: the
    // epilogue writes it.
    for (Operation *member : step.ops)
      if (auto sum = dyn_cast<ReduceSumOp>(member)) {
        gemm.biasGrad = sum.getResult();
        for (Operation *widen : sum->getUsers())
          if (isa<CastOp>(widen) && llvm::is_contained(step.ops, widen))
            gemm.biasGrad = widen->getResult(0);
      }
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
