// wide_layer_norm.mlir with a third linear after the second, so that the
// second one's forward GEMM (whose output the loss does not read) runs in
// FP8 too: built with --fp8=all --fp8-scaling=delayed, the layer norm's
// kernel (a block a row, 1,280 wide) casts its output to FP8 itself with
// the scaling table's scale, raises the table's amax, and a kernel of its
// own writes the transposed copy from the FP8 bytes; for the cuda target
// against the cpu target at the blocks' real shapes on the mock driver
// (tests/cuda).
mpc.model @wide_layer_norm_delayed
    inputs(%x: tensor<16x256xf32>, %target: tensor<16x64xf32>)
    params(%fc1.weight: tensor<1280x256xf32> = normal(0.05),
           %fc1.bias: tensor<1280xf32> = zeros,
           %ln.weight: tensor<1280xf32> = ones,
           %ln.bias: tensor<1280xf32> = zeros,
           %fc2.weight: tensor<64x1280xf32> = normal(0.02),
           %fc2.bias: tensor<64xf32> = zeros,
           %fc3.weight: tensor<64x64xf32> = normal(0.1),
           %fc3.bias: tensor<64xf32> = zeros) {
  %h = mpc.linear %x, %fc1.weight, %fc1.bias
      : tensor<16x256xf32>, tensor<1280x256xf32>, tensor<1280xf32>
  %n = mpc.layer_norm %h, %ln.weight, %ln.bias
      : tensor<16x1280xf32>, tensor<1280xf32>
  %y = mpc.linear %n, %fc2.weight, %fc2.bias
      : tensor<16x1280xf32>, tensor<64x1280xf32>, tensor<64xf32>
  %z = mpc.linear %y, %fc3.weight, %fc3.bias
      : tensor<16x64xf32>, tensor<64x64xf32>, tensor<64xf32>
  %loss = mpc.mse_loss %z, %target : tensor<16x64xf32>, tensor<16x64xf32>
  mpc.output loss(%loss : tensor<f32>)
}
