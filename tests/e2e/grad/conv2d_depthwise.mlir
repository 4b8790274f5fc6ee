// Gradient check of depthwise mpc.conv2d (one input channel per group), the
// direct kernels: with a channel multiplier of 2, a bias, stride [2, 1] and
// padding 1, [2, 2, 5, 5] * [4, 1, 3, 3] -> [2, 4, 3, 5]; and 5x5 taps with
// padding [2, 4] and dilation [1, 2], [2, 2, 5, 5] * [2, 1, 5, 5] ->
// [2, 2, 5, 5]. Small, as its emulated build runs a block per weight.
mpc.model @grad_conv2d_depthwise
    inputs(%r1: tensor<2x4x3x5xf32>, %r2: tensor<2x2x5x5xf32>)
    params(%x: tensor<2x2x5x5xf32> = normal(1.0),
           %w1: tensor<4x1x3x3xf32> = normal(0.5),
           %b1: tensor<4xf32> = normal(1.0),
           %w2: tensor<2x1x5x5xf32> = normal(0.5)) {
  %y1 = mpc.conv2d %x, %w1, %b1 stride [2, 1] padding [1, 1] groups 2
      : tensor<2x2x5x5xf32>, tensor<4x1x3x3xf32>, tensor<4xf32>
  %y2 = mpc.conv2d %x, %w2 padding [2, 4] dilation [1, 2] groups 2
      : tensor<2x2x5x5xf32>, tensor<2x1x5x5xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<2x4x3x5xf32>, tensor<2x4x3x5xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<2x2x5x5xf32>, tensor<2x2x5x5xf32>
  %l1 = mpc.reduce_sum %p1 dims [0, 1, 2, 3] : tensor<2x4x3x5xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1, 2, 3] : tensor<2x2x5x5xf32>
  %loss = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
