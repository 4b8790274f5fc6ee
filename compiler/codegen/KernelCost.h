//===- KernelCost.h - what each kernel of a step costs ------------*- C++
//-*-===//
//
// This file declares the per-kernel accounting of code generation: every
// kernel launch and every runtime GEMM call of a step function records its
// FLOPs and the bytes it reads and writes, computed from shapes and storage
// types, together with the op(s) it was emitted for. `mpc compile --report`
// lists these records and bounds the step's time with a roofline.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_COMPILER_CODEGEN_KERNELCOST_H
#define MPC_COMPILER_CODEGEN_KERNELCOST_H

#include "dialect/MpcOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <initializer_list>
#include <string>

namespace mlir::mpc {

/// Byte size of a tensor's storage (i1 is one byte per element). The
/// verifier keeps every tensor of a model within 64-bit byte counts.
int64_t storageBytes(RankedTensorType type);
/// Byte size of one element of a tensor value's storage.
int64_t elementBytes(Value value);

/// FLOPs and bytes moved by one kernel or runtime call. Bytes count every
/// operand read once and every result written once, at their storage types
/// (the minimum traffic, as a roofline assumes; scratch traffic included);
/// FLOPs count the float arithmetic the kernel's source performs, a
/// library function (expf, logf, tanhf, erff) counting as one and compares
/// and selects as none. A GEMM is 2·m·n·k per product.
struct KernelCost {
  int64_t flops = 0;
  int64_t bytesRead = 0;
  int64_t bytesWritten = 0;

  /// Reads the whole of `value` (its storage bytes).
  KernelCost &reads(Value value);
  /// Writes the whole of `value`.
  KernelCost &writes(Value value);
  /// Reads `elements` elements stored as `element` (part of a tensor, a
  /// gather).
  KernelCost &readsElements(int64_t elements, Type element);
  KernelCost &writesElements(int64_t elements, Type element);
  KernelCost &readsBytes(int64_t bytes) {
    bytesRead += bytes;
    return *this;
  }
  KernelCost &writesBytes(int64_t bytes) {
    bytesWritten += bytes;
    return *this;
  }
  /// `perElement` FLOPs for each of `elements`. Saturates at INT64_MAX:
  /// a GEMM whose operands fit in memory can still do more than 2^63
  /// FLOPs (m = n = k = 2^22).
  KernelCost &flopsPer(int64_t elements, int64_t perElement) {
    int64_t product = 0;
    if (__builtin_mul_overflow(elements, perElement, &product) ||
        __builtin_add_overflow(flops, product, &flops))
      flops = INT64_MAX;
    return *this;
  }
  /// The product of `factors`, saturated at INT64_MAX (for flopsPer).
  static int64_t product(std::initializer_list<int64_t> factors) {
    int64_t result = 1;
    for (int64_t factor : factors)
      if (__builtin_mul_overflow(result, factor, &result))
        return INT64_MAX;
    return result;
  }
  int64_t bytes() const { return bytesRead + bytesWritten; }
  KernelCost &operator+=(const KernelCost &other) {
    if (__builtin_add_overflow(flops, other.flops, &flops))
      flops = INT64_MAX;
    bytesRead += other.bytesRead;
    bytesWritten += other.bytesWritten;
    return *this;
  }
};

/// Whether a kernel runs on the tensor cores (a GEMM, or a generated kernel
/// whose products are mma.sync: attention's) or the vector units: the roofline
/// takes a different peak for each.
enum class KernelKind { Kernel, Gemm, TensorCoreKernel };

/// One launch (or runtime call) of a step function, in program order.
struct KernelRecord {
  /// The kernel's name, or the runtime function for a call (mpc_rt_gemm).
  std::string name;
  KernelKind kind = KernelKind::Kernel;
  /// The ops it was emitted for; empty for whole-step work (the optimizer).
  SmallVector<Operation *, 2> ops;
  /// What the kernel does when `ops` is empty ("optimizer: sgd").
  std::string origin;
  /// The element type the work runs in for a GEMM (its inputs'), which
  /// selects the tensor-core peak: f16/bf16 or f32.
  bool halfInputs = false;
  /// A GEMM of FP8 operands (mpc.scaled_matmul): FP8 tensor cores, where
  /// the GPU has them.
  bool fp8Inputs = false;
  KernelCost cost;
};

/// `file:line:col` of the first file location in `loc`, file name only,
/// or "-" when it has none; followed by the name when `loc` is a NameLoc
/// (an imported op's ONNX node: `m.onnx:3:1 /fc1/Gemm (Gemm)`).
std::string fileLineCol(Location loc);

/// Bytes per element of an mpc_dtype enumerator as GemmCall spells it
/// ("MPC_F16" -> 2).
int64_t gemmDtypeBytes(StringRef dtype);

} // namespace mlir::mpc

#endif // MPC_COMPILER_CODEGEN_KERNELCOST_H
