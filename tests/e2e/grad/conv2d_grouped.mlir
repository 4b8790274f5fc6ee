// Gradient check of mpc.conv2d with 2 groups, dilation 2, stride [1, 2],
// padding [1, 2] and no bias: [2, 4, 6, 6] * [6, 2, 3, 3] -> [2, 6, 4, 3].
mpc.model @grad_conv2d_grouped
    inputs(%r: tensor<2x6x4x3xf32>)
    params(%x: tensor<2x4x6x6xf32> = normal(1.0),
           %w: tensor<6x2x3x3xf32> = normal(0.5)) {
  %y = mpc.conv2d %x, %w stride [1, 2] padding [1, 2] dilation [2, 2] groups 2
      : tensor<2x4x6x6xf32>, tensor<6x2x3x3xf32>
  %p = mpc.mul %y, %r : tensor<2x6x4x3xf32>, tensor<2x6x4x3xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<2x6x4x3xf32>
  mpc.output loss(%loss : tensor<f32>)
}
