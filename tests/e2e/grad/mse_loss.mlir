// Gradient check of mpc.mse_loss with respect to both operands: the loss
// adds a random-weighted sum of the target, so that neither gradient is
// trivially zero, and the same error over 512 broadcast copies (12288
// elements: three blocks of partial sums, mseLossBlocks).
mpc.model @grad_mse_loss
    inputs(%r: tensor<4x6xf32>)
    params(%x: tensor<4x6xf32> = normal(1.0),
           %t: tensor<4x6xf32> = normal(1.0)) {
  %mse = mpc.mse_loss %x, %t : tensor<4x6xf32>, tensor<4x6xf32>
  %xb = mpc.broadcast %x : tensor<4x6xf32> to tensor<512x4x6xf32>
  %tb = mpc.broadcast %t : tensor<4x6xf32> to tensor<512x4x6xf32>
  %big = mpc.mse_loss %xb, %tb : tensor<512x4x6xf32>, tensor<512x4x6xf32>
  %p = mpc.mul %t, %r : tensor<4x6xf32>, tensor<4x6xf32>
  %s = mpc.reduce_sum %p dims [0, 1] : tensor<4x6xf32>
  %m = mpc.add %mse, %big : tensor<f32>, tensor<f32>
  %loss = mpc.add %m, %s : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
