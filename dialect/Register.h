//===- Register.h - dialects the mpc tools load -------------------*- C++ -*-===//
//
// One place that lists the dialects `mpc` and `mpc-opt` parse, so the two
// tools cannot drift apart (as stablehlo/dialect/Register.h).
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_REGISTER_H
#define MPC_DIALECT_REGISTER_H

namespace mlir {
class DialectRegistry;
namespace mpc {

/// Adds the mpc dialect and every dialect an mpc model may contain.
void registerAllDialects(DialectRegistry &registry);

} // namespace mpc
} // namespace mlir

#endif // MPC_DIALECT_REGISTER_H
