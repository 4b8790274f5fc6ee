// Gradient check of mpc.conv2d with a bias, stride 2 and padding 1:
// [2, 3, 7, 7] * [4, 3, 3, 3] -> [2, 4, 4, 4]; and of a pointwise one (1x1,
// stride 1, no padding: the input is its own column matrix) with a bias,
// [2, 3, 7, 7] * [5, 3, 1, 1] -> [2, 5, 7, 7].
mpc.model @grad_conv2d
    inputs(%r: tensor<2x4x4x4xf32>, %r2: tensor<2x5x7x7xf32>)
    params(%x: tensor<2x3x7x7xf32> = normal(1.0),
           %w: tensor<4x3x3x3xf32> = normal(0.5),
           %b: tensor<4xf32> = normal(1.0),
           %w2: tensor<5x3x1x1xf32> = normal(0.5),
           %b2: tensor<5xf32> = normal(1.0)) {
  %y = mpc.conv2d %x, %w, %b stride [2, 2] padding [1, 1]
      : tensor<2x3x7x7xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>
  %y2 = mpc.conv2d %x, %w2, %b2
      : tensor<2x3x7x7xf32>, tensor<5x3x1x1xf32>, tensor<5xf32>
  %p = mpc.mul %y, %r : tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<2x5x7x7xf32>, tensor<2x5x7x7xf32>
  %l1 = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<2x4x4x4xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1, 2, 3] : tensor<2x5x7x7xf32>
  %loss = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
