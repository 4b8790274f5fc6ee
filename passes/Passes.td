//===- Passes.td - mpc passes ------------------------------*- tablegen -*-===//
//
// Every pass of the project, with its options. Flags are mpc-<verb>-<noun>;
// analysis-only passes that exist for tests are mpc-test-<noun>.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_PASSES_PASSES_TD
#define MPC_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def MpcTestPrecisionPolicyPass
    : Pass<"mpc-test-precision-policy", "mlir::ModuleOp"> {
  let summary = "Emit a remark with each op's precision category";
  let description = [{
    Test-only analysis. For every op that implements
    PrecisionPolicyOpInterface, emits a remark at the op's location naming its
    category and the accumulator type it would use with a half compute type,
    so lit tests can pin the policy of every op with `expected-remark`:

    ```mlir
    // expected-remark@+1 {{precision: lower, accumulate: f32}}
    %0 = mpc.matmul %a, %b : tensor<4x8xf32>, tensor<8x2xf32>
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
}

#endif // MPC_PASSES_PASSES_TD
