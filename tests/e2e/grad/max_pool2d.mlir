// Gradient check of mpc.max_pool2d with overlapping windows and padding:
// kernel [3, 3], stride [2, 2], padding [1, 1] on [1, 2, 7, 7] -> [1, 2, 4, 4],
// and kernel [2, 3], stride [1, 2], padding [1, 1] on [2, 1, 4, 5]
// -> [2, 1, 5, 3]; and with ceil_mode, kernel [3, 2], stride [2, 2], padding
// [1, 0] on [1, 1, 6, 5] -> [1, 1, 4, 3], whose last windows run past the
// padding.
// And a window that is the whole plane, [5, 7] on [2, 3, 5, 7] -> [2, 3, 1,
// 1] (a global pooling: a warp a plane, 35 elements over its 32 lanes).
// Run with --distinct: no ties, and no perturbation changes a maximum.
mpc.model @grad_max_pool2d
    inputs(%r1: tensor<1x2x4x4xf32>, %r2: tensor<2x1x5x3xf32>,
           %r3: tensor<1x1x4x3xf32>, %r4: tensor<2x3x1x1xf32>)
    params(%x1: tensor<1x2x7x7xf32> = normal(1.0),
           %x2: tensor<2x1x4x5xf32> = normal(1.0),
           %x3: tensor<1x1x6x5xf32> = normal(1.0),
           %x4: tensor<2x3x5x7xf32> = normal(1.0)) {
  %y1 = mpc.max_pool2d %x1 kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<1x2x7x7xf32>
  %y2 = mpc.max_pool2d %x2 kernel [2, 3] stride [1, 2] padding [1, 1] : tensor<2x1x4x5xf32>
  %y3 = mpc.max_pool2d %x3 kernel [3, 2] stride [2, 2] padding [1, 0] ceil_mode : tensor<1x1x6x5xf32>
  %y4 = mpc.max_pool2d %x4 kernel [5, 7] : tensor<2x3x5x7xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<2x1x5x3xf32>, tensor<2x1x5x3xf32>
  %p3 = mpc.mul %y3, %r3 : tensor<1x1x4x3xf32>, tensor<1x1x4x3xf32>
  %p4 = mpc.mul %y4, %r4 : tensor<2x3x1x1xf32>, tensor<2x3x1x1xf32>
  %l1 = mpc.reduce_sum %p1 dims [0, 1, 2, 3] : tensor<1x2x4x4xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1, 2, 3] : tensor<2x1x5x3xf32>
  %l3 = mpc.reduce_sum %p3 dims [0, 1, 2, 3] : tensor<1x1x4x3xf32>
  %l4 = mpc.reduce_sum %p4 dims [0, 1, 2, 3] : tensor<2x3x1x1xf32>
  %l12 = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  %l34 = mpc.add %l3, %l4 : tensor<f32>, tensor<f32>
  %loss = mpc.add %l12, %l34 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
