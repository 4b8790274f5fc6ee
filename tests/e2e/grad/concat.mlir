// Gradient check of mpc.concat of three tensors along dim 1 and of two
// along dim 0.
mpc.model @grad_concat
    inputs(%r1: tensor<2x8xf32>, %r2: tensor<5x3xf32>)
    params(%a: tensor<2x3xf32> = normal(1.0),
           %b: tensor<2x1xf32> = normal(1.0),
           %c: tensor<2x4xf32> = normal(1.0),
           %d: tensor<2x3xf32> = normal(1.0),
           %e: tensor<3x3xf32> = normal(1.0)) {
  %y1 = mpc.concat %a, %b, %c dim 1 : tensor<2x3xf32>, tensor<2x1xf32>, tensor<2x4xf32>
  %y2 = mpc.concat %d, %e dim 0 : tensor<2x3xf32>, tensor<3x3xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<2x8xf32>, tensor<2x8xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<5x3xf32>, tensor<5x3xf32>
  %l1 = mpc.reduce_sum %p1 dims [0, 1] : tensor<2x8xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1] : tensor<5x3xf32>
  %loss = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
