//===- Passes.td - mpc passes ------------------------------*- tablegen -*-===//
//
// Every pass of the project, with its options. Flags are mpc-<verb>-<noun>;
// analysis-only passes that exist for tests are mpc-test-<noun>.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_PASSES_PASSES_TD
#define MPC_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def MpcAutodiffPass : Pass<"mpc-autodiff", "mlir::ModuleOp"> {
  let summary = "Derive the training step: append the reverse-mode backward "
                "pass and return every parameter's gradient";
  let description = [{
    Rewrites each `mpc.model` so that its body computes the loss and, after
    it, the gradient of the loss with respect to every parameter, returned
    in `mpc.output`'s `gradients(...)` group in parameter order.

    Each op supplies its own vector-Jacobian product through
    DifferentiableOpInterface. Only ops on a path from a parameter to the
    loss get backward work; a parameter the loss does not depend on gets a
    zero gradient. Batch-norm running statistics are updated, not
    differentiated; integer inputs have no gradient.

    Before:
    ```mlir
    %h = mpc.relu %x : tensor<4x8xf32>
    %s = mpc.reduce_sum %h dims [0, 1] : tensor<4x8xf32>
    mpc.output loss(%s : tensor<f32>)
    ```
    After (for a parameter %x):
    ```mlir
    %one = mpc.constant dense<1.0> : tensor<f32>
    %0 = mpc.reshape %one : tensor<f32> to tensor<1x1xf32>
    %1 = mpc.broadcast %0 : tensor<1x1xf32> to tensor<4x8xf32>
    %2 = mpc.relu_grad %1, %x : tensor<4x8xf32>
    mpc.output loss(%s : tensor<f32>) gradients(%2 : tensor<4x8xf32>)
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let statistics = [
    Statistic<"numBackwardOps", "num-backward-ops",
              "Ops created for the backward pass">];
}

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
