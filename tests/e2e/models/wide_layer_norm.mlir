// Layer norms over rows wider than a warp takes (1,280 elements: a block a
// row, and the gradient's kernel a block a row too), between two linears,
// regressed onto targets, for the cuda target against the cpu target
// (tests/cuda). Built with --fp8=all, the norm's kernel finds the amax of
// what it stores for the quantization of the second linear's input, and
// the gradient's kernel that of the first linear's output gradient (the
// quantizations then have no amax pass), at the blocks' real shapes on the
// mock driver.
mpc.model @wide_layer_norm
    inputs(%x: tensor<16x256xf32>, %target: tensor<16x64xf32>)
    params(%fc1.weight: tensor<1280x256xf32> = normal(0.05),
           %fc1.bias: tensor<1280xf32> = zeros,
           %ln.weight: tensor<1280xf32> = ones,
           %ln.bias: tensor<1280xf32> = zeros,
           %fc2.weight: tensor<64x1280xf32> = normal(0.02),
           %fc2.bias: tensor<64xf32> = zeros) {
  %h = mpc.linear %x, %fc1.weight, %fc1.bias
      : tensor<16x256xf32>, tensor<1280x256xf32>, tensor<1280xf32>
  %n = mpc.layer_norm %h, %ln.weight, %ln.bias
      : tensor<16x1280xf32>, tensor<1280xf32>
  %y = mpc.linear %n, %fc2.weight, %fc2.bias
      : tensor<16x1280xf32>, tensor<64x1280xf32>, tensor<64xf32>
  %loss = mpc.mse_loss %y, %target : tensor<16x64xf32>, tensor<16x64xf32>
  mpc.output loss(%loss : tensor<f32>)
}
