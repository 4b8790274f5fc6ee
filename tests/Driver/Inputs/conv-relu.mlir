// A convolution and a ReLU: the cuda target calls cuDNN for the first and
// names the ReLU's kernel conv_relu_k0_relu; the cpu target (and so a
// --profile-emulated build) runs im2col before its GEMM, and names the
// same kernel conv_relu_k1_relu.
mpc.model @conv_relu
    inputs(%x: tensor<2x4x8x8xf32>, %target: tensor<2x8x8x8xf32>)
    params(%w: tensor<8x4x3x3xf32> = kaiming_normal) {
  %h = mpc.conv2d %x, %w padding [1, 1]
      : tensor<2x4x8x8xf32>, tensor<8x4x3x3xf32>
  %r = mpc.relu %h : tensor<2x8x8x8xf32>
  %loss = mpc.mse_loss %r, %target : tensor<2x8x8x8xf32>, tensor<2x8x8x8xf32>
  mpc.output loss(%loss : tensor<f32>)
}
