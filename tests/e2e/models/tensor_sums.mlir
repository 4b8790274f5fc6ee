// Long reductions with few outputs, which run split over blocks
// (reductionSplits, EmitRow.cpp) and combine the slices in order: a sum
// over the trailing dim (contiguous) and one over the leading dim
// (strided), weighted by r; the maximum and the mean (times 2^16) of
// whole tensors (long_sums_test.cpp).
mpc.model @tensor_sums
    inputs(%r: tensor<3xf32>)
    params(%x: tensor<3x40000xf32> = zeros, %y: tensor<40000x3xf32> = zeros,
           %z: tensor<100000xf32> = zeros) {
  %sx = mpc.reduce_sum %x dims [1] : tensor<3x40000xf32>
  %sy = mpc.reduce_sum %y dims [0] : tensor<40000x3xf32>
  %s = mpc.add %sx, %sy : tensor<3xf32>, tensor<3xf32>
  %p = mpc.mul %s, %r : tensor<3xf32>, tensor<3xf32>
  %weighted = mpc.reduce_sum %p dims [0] : tensor<3xf32>
  %m = mpc.reduce_max %z dims [0] : tensor<100000xf32>
  %mean = mpc.reduce_mean %x dims [0, 1] : tensor<3x40000xf32>
  %scaled = mpc.scale %mean by 65536.0 : tensor<f32>
  %a = mpc.add %weighted, %m : tensor<f32>, tensor<f32>
  %loss = mpc.add %a, %scaled : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
