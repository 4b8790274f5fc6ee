// Gradient check of mpc.rms_norm over the last dim ([4, 6], gamma [6]),
// and over the two trailing dims of 64 rows ([32, 2, 3, 4], gamma [3, 4],
// the rows broadcast from a [2, 3, 4] parameter so that finite differences
// stay cheap): two blocks of partial dgamma sums (rmsNormGradBlocks).
mpc.model @grad_rms_norm
    inputs(%r1: tensor<4x6xf32>, %r2: tensor<32x2x3x4xf32>)
    params(%x1: tensor<4x6xf32> = normal(1.0),
           %g1: tensor<6xf32> = normal(1.0, 0.5),
           %x2: tensor<2x3x4xf32> = normal(1.0),
           %g2: tensor<3x4xf32> = normal(1.0, 0.5)) {
  %y1 = mpc.rms_norm %x1, %g1 : tensor<4x6xf32>, tensor<6xf32>
  %xb = mpc.broadcast %x2 : tensor<2x3x4xf32> to tensor<32x2x3x4xf32>
  %y2 = mpc.rms_norm %xb, %g2 eps 1.0e-03 : tensor<32x2x3x4xf32>, tensor<3x4xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<4x6xf32>, tensor<4x6xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<32x2x3x4xf32>, tensor<32x2x3x4xf32>
  %l1 = mpc.reduce_sum %p1 dims [0, 1] : tensor<4x6xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1, 2, 3] : tensor<32x2x3x4xf32>
  %loss = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
