//===- TestPrecisionPolicy.cpp - remarks with each op's policy ----*- C++ -*-===//
//
// This file implements mpc-test-precision-policy, which makes the precision
// category of every op visible to lit tests.
//
//===----------------------------------------------------------------------===//

#include "dialect/MpcOps.h"
#include "passes/Passes.h"

namespace mlir::mpc {
#define GEN_PASS_DEF_MPCTESTPRECISIONPOLICYPASS
#include "passes/Passes.h.inc"

namespace {
struct MpcTestPrecisionPolicyPass
    : impl::MpcTestPrecisionPolicyPassBase<MpcTestPrecisionPolicyPass> {
  using Base::Base;

  /// Algorithm:
  /// 1. Walk every op that implements PrecisionPolicyOpInterface.
  /// 2. Emit its category and its accumulator type for an f16 compute type.
  void runOnOperation() override {
    Type half = Float16Type::get(&getContext());
    getOperation().walk([&](PrecisionPolicyOpInterface op) {
      op->emitRemark() << "precision: "
                       << stringifyPrecisionClass(op.getPrecisionClass())
                       << ", accumulate: " << op.getAccumulatorType(half);
    });
  }
};
} // namespace
} // namespace mlir::mpc
