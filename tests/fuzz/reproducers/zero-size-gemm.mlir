// mpc-fuzz: --amp=O0 --optimizer=adam --emit=host
// Issue 12: a GEMM with k = 0 passed the verifiers and mpc-autodiff divided
// by it (SIGFPE in flattenTo2d, building the VJP of mpc.linear). Now a
// located error.
mpc.model @zero_k
    inputs(%x: tensor<4x0xf32>, %y: tensor<4xi32>)
    params(%w: tensor<8x0xf32> = zeros) {
  %h = mpc.linear %x, %w : tensor<4x0xf32>, tensor<8x0xf32>
  %loss = mpc.cross_entropy %h, %y : tensor<4x8xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
