//===- MpcEnums.td - mpc enums -----------------------------*- tablegen -*-===//
//
// Enums shared by the dialect, its interfaces and the passes.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_MPCENUMS_TD
#define MPC_DIALECT_MPCENUMS_TD

include "mlir/IR/EnumAttr.td"

def PrecisionClass : I32EnumAttr<"PrecisionClass",
    "how an op may use reduced precision", [
      I32EnumAttrCase<"Lower", 0, "lower">,
      I32EnumAttrCase<"KeepF32", 1, "keep_f32">,
      I32EnumAttrCase<"Promote", 2, "promote">,
      I32EnumAttrCase<"Follow", 3, "follow">]> {
  let cppNamespace = "::mlir::mpc";
  let genSpecializedAttr = 0;
}

def InitKind : I32EnumAttr<"InitKind", "parameter initialiser", [
      I32EnumAttrCase<"Zeros", 0, "zeros">,
      I32EnumAttrCase<"Ones", 1, "ones">,
      I32EnumAttrCase<"Constant", 2, "constant">,
      I32EnumAttrCase<"Normal", 3, "normal">,
      I32EnumAttrCase<"Uniform", 4, "uniform">,
      I32EnumAttrCase<"KaimingUniform", 5, "kaiming_uniform">,
      I32EnumAttrCase<"KaimingNormal", 6, "kaiming_normal">,
      I32EnumAttrCase<"XavierUniform", 7, "xavier_uniform">,
      I32EnumAttrCase<"XavierNormal", 8, "xavier_normal">]> {
  let cppNamespace = "::mlir::mpc";
  let genSpecializedAttr = 0;
}

def GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu evaluates the normal CDF", [
      I32EnumAttrCase<"Erf", 0, "erf">,
      I32EnumAttrCase<"Tanh", 1, "tanh">]> {
  let cppNamespace = "::mlir::mpc";
}

#endif // MPC_DIALECT_MPCENUMS_TD
