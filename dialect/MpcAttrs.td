//===- MpcAttrs.td - mpc attributes ------------------------*- tablegen -*-===//
//
// The parameter initialiser attribute, `#mpc.init<normal(0.02)>`. Inside
// `mpc.model` it is written bare: `%w: tensor<8x4xf32> = normal(0.02)`.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_MPCATTRS_TD
#define MPC_DIALECT_MPCATTRS_TD

include "dialect/MpcBase.td"
include "dialect/MpcEnums.td"

def Mpc_InitializerAttr : Mpc_Attr<"Initializer", "init"> {
  let summary = "How a parameter or state tensor is initialised";
  let description = [{
    `zeros`, `ones`, `constant(v)`, `normal(std)` or `normal(mean, std)`,
    `uniform(low, high)`, `kaiming_uniform` / `kaiming_normal` with an
    optional negative slope `a` (PyTorch's `kaiming_*_(a=...)`, fan-in mode),
    `xavier_uniform` / `xavier_normal` with an optional gain. Fans are
    computed as PyTorch does: dim 1 times the receptive field is fan-in, dim 0
    times the receptive field is fan-out. Arguments are finite numbers.
  }];
  let parameters = (ins "::mlir::mpc::InitKind":$kind,
                        "::mlir::DenseF64ArrayAttr":$args);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Parses `kind` or `kind(arg, ...)`, as written inside `mpc.model`.
    static ::mlir::Attribute parseBare(::mlir::AsmParser &parser);
    /// Prints `kind` or `kind(arg, ...)`.
    void printBare(::mlir::AsmPrinter &printer) const;
  }];
}

#endif // MPC_DIALECT_MPCATTRS_TD
