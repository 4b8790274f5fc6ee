// The convolutions of mobile networks, for the cuda target against the cpu
// target (tests/cuda): a dense 3x3 stem, a depthwise 3x3 with a channel
// multiplier of 2 and a bias (MobileNet's and EfficientNet's direct
// kernels), a pointwise 1x1 (its input is its own column matrix), then a
// grouped 3x3 (4 groups of 4 channels, ResNeXt's and RegNet's: one GEMM
// batched over groups), regressed onto a target.
mpc.model @mobile_convs
    inputs(%images: tensor<4x3x12x12xf32>, %target: tensor<4x8x3x3xf32>)
    params(%stem.weight: tensor<8x3x3x3xf32> = kaiming_normal,
           %dw.weight: tensor<16x1x3x3xf32> = kaiming_normal,
           %dw.bias: tensor<16xf32> = zeros,
           %pw.weight: tensor<16x16x1x1xf32> = kaiming_normal,
           %grouped.weight: tensor<8x4x3x3xf32> = kaiming_normal,
           %grouped.bias: tensor<8xf32> = zeros) {
  %stem = mpc.conv2d %images, %stem.weight padding [1, 1]
      : tensor<4x3x12x12xf32>, tensor<8x3x3x3xf32>
  %stem_relu = mpc.relu %stem : tensor<4x8x12x12xf32>
  %dw = mpc.conv2d %stem_relu, %dw.weight, %dw.bias stride [2, 2]
      padding [1, 1] groups 8
      : tensor<4x8x12x12xf32>, tensor<16x1x3x3xf32>, tensor<16xf32>
  %dw_relu = mpc.relu %dw : tensor<4x16x6x6xf32>
  %pw = mpc.conv2d %dw_relu, %pw.weight
      : tensor<4x16x6x6xf32>, tensor<16x16x1x1xf32>
  %grouped = mpc.conv2d %pw, %grouped.weight, %grouped.bias
      stride [2, 2] padding [1, 1] groups 4
      : tensor<4x16x6x6xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>
  %loss = mpc.mse_loss %grouped, %target
      : tensor<4x8x3x3xf32>, tensor<4x8x3x3xf32>
  mpc.output loss(%loss : tensor<f32>)
}
