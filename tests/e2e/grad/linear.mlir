// Gradient check of mpc.linear with a bias (rank-3 input: the GEMM sees
// [6, 5]) and without one. Loss: sum(y * r) per variant.
mpc.model @grad_linear
    inputs(%r1: tensor<3x2x4xf32>, %r2: tensor<3x4xf32>)
    params(%x1: tensor<3x2x5xf32> = normal(1.0),
           %w1: tensor<4x5xf32> = normal(1.0),
           %b1: tensor<4xf32> = normal(1.0),
           %x2: tensor<3x5xf32> = normal(1.0),
           %w2: tensor<4x5xf32> = normal(1.0)) {
  %y1 = mpc.linear %x1, %w1, %b1 : tensor<3x2x5xf32>, tensor<4x5xf32>, tensor<4xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<3x2x4xf32>, tensor<3x2x4xf32>
  %l1 = mpc.reduce_sum %p1 dims [0, 1, 2] : tensor<3x2x4xf32>
  %y2 = mpc.linear %x2, %w2 : tensor<3x5xf32>, tensor<4x5xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<3x4xf32>, tensor<3x4xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1] : tensor<3x4xf32>
  %loss = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
