// Gradient check of mpc.batch_norm in training mode (batch statistics),
// rank 2 ([6, 3]) and rank 4 ([2, 3, 3, 3]). mpc_compute_gradients leaves
// the running statistics alone.
mpc.model @grad_batch_norm
    inputs(%r1: tensor<6x3xf32>, %r2: tensor<2x3x3x3xf32>)
    params(%x1: tensor<6x3xf32> = normal(1.0),
           %g1: tensor<3xf32> = normal(1.0, 0.5),
           %b1: tensor<3xf32> = normal(1.0),
           %x2: tensor<2x3x3x3xf32> = normal(1.0),
           %g2: tensor<3xf32> = normal(1.0, 0.5),
           %b2: tensor<3xf32> = normal(1.0))
    state(%mean1: tensor<3xf32> = zeros, %var1: tensor<3xf32> = ones,
          %mean2: tensor<3xf32> = zeros, %var2: tensor<3xf32> = ones) {
  %y1 = mpc.batch_norm %x1, %g1, %b1, %mean1, %var1 : tensor<6x3xf32>, tensor<3xf32>
  %y2 = mpc.batch_norm %x2, %g2, %b2, %mean2, %var2 : tensor<2x3x3x3xf32>, tensor<3xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<6x3xf32>, tensor<6x3xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<2x3x3x3xf32>, tensor<2x3x3x3xf32>
  %l1 = mpc.reduce_sum %p1 dims [0, 1] : tensor<6x3xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1, 2, 3] : tensor<2x3x3x3xf32>
  %loss = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
