// A batch norm whose channels are summed in slices (32 images of 56x56: 7
// slices of 14,336), inside a residual block, regressed onto targets, for
// the cuda target against the cpu target (tests/cuda): its output is added
// to its own input and a ReLU follows, so the forward stores through that
// epilogue, and the backward's dy is the ReLU's gradient, which the
// shortcut reads too (the gradient kernels store it as they compute it).
mpc.model @residual_batch_norm
    inputs(%x: tensor<32x2x56x56xf32>, %target: tensor<32x2x56x56xf32>)
    params(%scale: tensor<2x1x1xf32> = normal(1.0, 0.5),
           %bn.weight: tensor<2xf32> = ones, %bn.bias: tensor<2xf32> = zeros)
    state(%bn.running_mean: tensor<2xf32> = zeros,
          %bn.running_var: tensor<2xf32> = ones) {
  %sb = mpc.broadcast %scale : tensor<2x1x1xf32> to tensor<32x2x56x56xf32>
  %xs = mpc.mul %sb, %x : tensor<32x2x56x56xf32>, tensor<32x2x56x56xf32>
  %y = mpc.batch_norm %xs, %bn.weight, %bn.bias, %bn.running_mean,
      %bn.running_var : tensor<32x2x56x56xf32>, tensor<2xf32>
  %sum = mpc.add %y, %xs : tensor<32x2x56x56xf32>, tensor<32x2x56x56xf32>
  %r = mpc.relu %sum : tensor<32x2x56x56xf32>
  %loss = mpc.mse_loss %r, %target
      : tensor<32x2x56x56xf32>, tensor<32x2x56x56xf32>
  mpc.output loss(%loss : tensor<f32>)
}
