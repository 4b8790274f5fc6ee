// mpc-fuzz: --amp=O2 --half=bf16 --optimizer=adam
// Found by hand while trying real models (issue 29): a rank-11 parameter
// verified, and the generated tensor descriptor (int64_t shape[8]) did not
// compile. Now model_c3; mpc-fuzz changes ranks since.
mpc.model @deep inputs(%x: tensor<2xf32>)
    params(%w: tensor<1x2x2x2x2x2x2x2x2x2x2xf32> = zeros) {
  %s = mpc.reduce_sum %w dims [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] : tensor<1x2x2x2x2x2x2x2x2x2x2xf32>
  %t = mpc.add %s, %x : tensor<2xf32>, tensor<2xf32>
  %l = mpc.reduce_sum %t dims [0] : tensor<2xf32>
  mpc.output loss(%l : tensor<f32>)
}
