//===- MpcBase.td - mpc dialect and op base class ----------*- tablegen -*-===//
//
// The mpc dialect describes a model for mixed-precision training: named
// parameters, inputs and state, a forward body, and a scalar loss.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_MPCBASE_TD
#define MPC_DIALECT_MPCBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Mpc_Dialect : Dialect {
  let name = "mpc";
  let summary = "Models for ahead-of-time mixed-precision training";
  let description = [{
    A model is one `mpc.model` op. Its block arguments are the model's named
    inputs, trainable parameters (each with an initialiser) and non-trainable
    state (batch-norm running statistics); its body computes the forward pass
    and ends in `mpc.output` with a scalar loss and optional named outputs.

    No precision appears in a model: every op declares its precision category
    (`lower`, `keep_f32`, `promote`, `follow`) through
    `PrecisionPolicyOpInterface`, and the compiler assigns types from it.
  }];
  let cppNamespace = "::mlir::mpc";
  let useDefaultAttributePrinterParser = 1;
}

// Every tensor an mpc op reads or writes has elements. An extent of 0 would
// mean reductions over nothing and GEMMs without a k, which no training step
// needs, so it is rejected where it is written rather than met by code
// generation (mlir::OpTrait::mpc::HasElements, MpcOps.h).
def Mpc_HasElements : NativeOpTrait<"HasElements"> {
  let cppNamespace = "::mlir::OpTrait::mpc";
}

class Mpc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Mpc_Dialect, mnemonic, !listconcat(traits, [Mpc_HasElements])>;

class Mpc_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Mpc_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

#endif // MPC_DIALECT_MPCBASE_TD
