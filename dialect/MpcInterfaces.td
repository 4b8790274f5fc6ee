//===- MpcInterfaces.td - mpc op interfaces ----------------*- tablegen -*-===//
//
// PrecisionPolicyOpInterface: every op says how it may use reduced precision,
// so the precision pass reads a typed answer from the op rather than a table.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_MPCINTERFACES_TD
#define MPC_DIALECT_MPCINTERFACES_TD

include "mlir/IR/OpBase.td"

def PrecisionPolicyOpInterface : OpInterface<"PrecisionPolicyOpInterface"> {
  let description = [{
    The precision category of an op (see DESIGN.md, Precision policy):
    - `lower`: GEMM-like; runs on half inputs with fp32 accumulation;
    - `keep_f32`: numerically sensitive; always computes in fp32;
    - `promote`: binary elementwise; computes in its widest input type;
    - `follow`: unary elementwise and data movement; its input's type.
  }];
  let cppNamespace = "::mlir::mpc";
  let methods = [
    InterfaceMethod<
      /*desc=*/"Whether and how this op may run in reduced precision",
      /*retType=*/"::mlir::mpc::PrecisionClass",
      /*methodName=*/"getPrecisionClass", /*args=*/(ins), /*methodBody=*/[{}],
      /*defaultImpl=*/[{ return ::mlir::mpc::PrecisionClass::Follow; }]>,
    InterfaceMethod<
      /*desc=*/[{Accumulator type for a given compute type: f32 for `lower`
                 and `keep_f32` ops, the compute type otherwise}],
      /*retType=*/"::mlir::Type", /*methodName=*/"getAccumulatorType",
      /*args=*/(ins "::mlir::Type":$computeType), /*methodBody=*/[{}],
      /*defaultImpl=*/[{
        ::mlir::mpc::PrecisionClass cls = $_op.getPrecisionClass();
        if (cls == ::mlir::mpc::PrecisionClass::Lower ||
            cls == ::mlir::mpc::PrecisionClass::KeepF32)
          return ::mlir::Float32Type::get(computeType.getContext());
        return computeType;
      }]>];
}

def DifferentiableOpInterface : OpInterface<"DifferentiableOpInterface"> {
  let description = [{
    Reverse-mode differentiation rule of an op with one result. mpc-autodiff
    walks the body backwards and asks each op on the path from the
    parameters to the loss for its vector-Jacobian product.
  }];
  let cppNamespace = "::mlir::mpc";
  let methods = [
    InterfaceMethod<
      /*desc=*/[{Builds, at the builder's insertion point, the gradients of
        the loss with respect to the operands, given `resultGrad`, its
        gradient with respect to the result. `operandGrads` gets one entry per
        operand: a value where `needed` is set and the operand is
        differentiable, null otherwise (integer indices, the condition of
        `where`, running statistics).}],
      /*retType=*/"::llvm::LogicalResult", /*methodName=*/"buildVjp",
      /*args=*/(ins "::mlir::OpBuilder &":$builder,
                    "::mlir::Value":$resultGrad,
                    "::llvm::ArrayRef<bool>":$needed,
                    "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>];
}

#endif // MPC_DIALECT_MPCINTERFACES_TD
