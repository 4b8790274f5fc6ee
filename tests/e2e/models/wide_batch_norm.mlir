// A batch norm whose block holds 25,088 elements of a channel (32 images of
// 28x28, 1,024 threads: 25 a thread), regressed onto a target, for the
// cuda target against the cpu target (tests/cuda): at O2 its half input is
// kept in pairs of elements on the GPU (EmitRow.cpp), which no other model
// of the tests reaches.
mpc.model @wide_batch_norm
    inputs(%x: tensor<32x2x28x28xf32>, %target: tensor<32x2x28x28xf32>)
    params(%bn.weight: tensor<2xf32> = ones, %bn.bias: tensor<2xf32> = zeros)
    state(%bn.running_mean: tensor<2xf32> = zeros,
          %bn.running_var: tensor<2xf32> = ones) {
  %y = mpc.batch_norm %x, %bn.weight, %bn.bias, %bn.running_mean,
      %bn.running_var : tensor<32x2x28x28xf32>, tensor<2xf32>
  %r = mpc.relu %y : tensor<32x2x28x28xf32>
  %loss = mpc.mse_loss %r, %target
      : tensor<32x2x28x28xf32>, tensor<32x2x28x28xf32>
  mpc.output loss(%loss : tensor<f32>)
}
