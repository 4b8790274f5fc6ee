// Gradient check of mpc.conv2d with a bias, stride 2 and padding 1:
// [2, 3, 7, 7] * [4, 3, 3, 3] -> [2, 4, 4, 4].
mpc.model @grad_conv2d
    inputs(%r: tensor<2x4x4x4xf32>)
    params(%x: tensor<2x3x7x7xf32> = normal(1.0),
           %w: tensor<4x3x3x3xf32> = normal(0.5),
           %b: tensor<4xf32> = normal(1.0)) {
  %y = mpc.conv2d %x, %w, %b stride [2, 2] padding [1, 1]
      : tensor<2x3x7x7xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>
  %p = mpc.mul %y, %r : tensor<2x4x4x4xf32>, tensor<2x4x4x4xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<2x4x4x4xf32>
  mpc.output loss(%loss : tensor<f32>)
}
