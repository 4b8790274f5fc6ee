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

def AttentionLayout : I32EnumAttr<"AttentionLayout",
    "how mpc.attention's operands order batch, heads, sequence and head dim", [
      I32EnumAttrCase<"BHTD", 0, "bhtd">,
      I32EnumAttrCase<"BTHD", 1, "bthd">]> {
  let cppNamespace = "::mlir::mpc";
}

def FusionKind : I32EnumAttr<"FusionKind",
    "what one kernel of the training step computes", [
      I32EnumAttrCase<"Loop", 0, "loop">,
      I32EnumAttrCase<"Gemm", 1, "gemm">,
      I32EnumAttrCase<"Reduce", 2, "reduce">,
      I32EnumAttrCase<"Row", 3, "row">,
      I32EnumAttrCase<"Attention", 4, "attention">,
      I32EnumAttrCase<"Classifier", 5, "classifier">,
      I32EnumAttrCase<"LinearClassifier", 6, "linear_classifier">]> {
  let cppNamespace = "::mlir::mpc";
}

def LossScaleMode : I32EnumAttr<"LossScaleMode", "how the loss is scaled", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Static", 1, "static">,
      I32EnumAttrCase<"Dynamic", 2, "dynamic">]> {
  let cppNamespace = "::mlir::mpc";
  let genSpecializedAttr = 0;
}

def OptimizerKind : I32EnumAttr<"OptimizerKind", "the fused optimizer", [
      I32EnumAttrCase<"Sgd", 0, "sgd">,
      I32EnumAttrCase<"Adam", 1, "adam">,
      I32EnumAttrCase<"AdamW", 2, "adamw">]> {
  let cppNamespace = "::mlir::mpc";
  let genSpecializedAttr = 0;
}

def LrSchedule : I32EnumAttr<"LrSchedule", "the built-in learning-rate schedule", [
      I32EnumAttrCase<"Constant", 0, "constant">,
      I32EnumAttrCase<"WarmupCosine", 1, "warmup_cosine">]> {
  let cppNamespace = "::mlir::mpc";
  let genSpecializedAttr = 0;
}

def MasterWeights : I32EnumAttr<"MasterWeights",
    "what the optimizer updates when the parameters are stored in half", [
      I32EnumAttrCase<"F32", 0, "f32">,
      I32EnumAttrCase<"None", 1, "none">,
      I32EnumAttrCase<"Kahan", 2, "kahan">,
      I32EnumAttrCase<"Nearest", 3, "nearest">]> {
  let cppNamespace = "::mlir::mpc";
  let genSpecializedAttr = 0;
}

#endif // MPC_DIALECT_MPCENUMS_TD
