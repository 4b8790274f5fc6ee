// Gradient check of mpc.max_pool2d with overlapping windows and padding:
// kernel [3, 3], stride [2, 2], padding [1, 1] on [1, 2, 7, 7] -> [1, 2, 4, 4],
// and kernel [2, 3], stride [1, 2], padding [1, 1] on [2, 1, 4, 5]
// -> [2, 1, 5, 3].
// Run with --distinct: no ties, and no perturbation changes a maximum.
mpc.model @grad_max_pool2d
    inputs(%r1: tensor<1x2x4x4xf32>, %r2: tensor<2x1x5x3xf32>)
    params(%x1: tensor<1x2x7x7xf32> = normal(1.0),
           %x2: tensor<2x1x4x5xf32> = normal(1.0)) {
  %y1 = mpc.max_pool2d %x1 kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<1x2x7x7xf32>
  %y2 = mpc.max_pool2d %x2 kernel [2, 3] stride [1, 2] padding [1, 1] : tensor<2x1x4x5xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<2x1x5x3xf32>, tensor<2x1x5x3xf32>
  %l1 = mpc.reduce_sum %p1 dims [0, 1, 2, 3] : tensor<1x2x4x4xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1, 2, 3] : tensor<2x1x5x3xf32>
  %loss = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
