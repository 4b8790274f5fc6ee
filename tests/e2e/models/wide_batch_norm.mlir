// Batch norms whose blocks hold many elements a thread, regressed onto
// targets, for the cuda target against the cpu target (tests/cuda). At O2
// their half inputs are kept in pairs of elements on the GPU (EmitRow.cpp),
// which no other model of the tests reaches:
//   %x: 25,088 elements a channel (32 images of 28x28) in one block of
//   1,024 threads, 25 a thread, 13 pairs (x and, backward, dy);
//   %x2: 100,352 a channel (32 of 56x56), summed in 7 slices of 14,336,
//   7 pairs a thread.
// Each input is scaled by a parameter a channel first, so that the
// gradients flow through the batch norms to their inputs (dx).
mpc.model @wide_batch_norm
    inputs(%x: tensor<32x2x28x28xf32>, %target: tensor<32x2x28x28xf32>,
           %x2: tensor<32x2x56x56xf32>, %target2: tensor<32x2x56x56xf32>)
    params(%scale: tensor<2x1x1xf32> = normal(1.0, 0.5),
           %bn.weight: tensor<2xf32> = ones, %bn.bias: tensor<2xf32> = zeros,
           %bn2.weight: tensor<2xf32> = ones, %bn2.bias: tensor<2xf32> = zeros)
    state(%bn.running_mean: tensor<2xf32> = zeros,
          %bn.running_var: tensor<2xf32> = ones,
          %bn2.running_mean: tensor<2xf32> = zeros,
          %bn2.running_var: tensor<2xf32> = ones) {
  %sb = mpc.broadcast %scale : tensor<2x1x1xf32> to tensor<32x2x28x28xf32>
  %xs = mpc.mul %sb, %x : tensor<32x2x28x28xf32>, tensor<32x2x28x28xf32>
  %y = mpc.batch_norm %xs, %bn.weight, %bn.bias, %bn.running_mean,
      %bn.running_var : tensor<32x2x28x28xf32>, tensor<2xf32>
  %r = mpc.relu %y : tensor<32x2x28x28xf32>
  %loss1 = mpc.mse_loss %r, %target
      : tensor<32x2x28x28xf32>, tensor<32x2x28x28xf32>
  %sb2 = mpc.broadcast %scale : tensor<2x1x1xf32> to tensor<32x2x56x56xf32>
  %xs2 = mpc.mul %sb2, %x2 : tensor<32x2x56x56xf32>, tensor<32x2x56x56xf32>
  %y2 = mpc.batch_norm %xs2, %bn2.weight, %bn2.bias, %bn2.running_mean,
      %bn2.running_var : tensor<32x2x56x56xf32>, tensor<2xf32>
  %r2 = mpc.relu %y2 : tensor<32x2x56x56xf32>
  %loss2 = mpc.mse_loss %r2, %target2
      : tensor<32x2x56x56xf32>, tensor<32x2x56x56xf32>
  %loss = mpc.add %loss1, %loss2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
