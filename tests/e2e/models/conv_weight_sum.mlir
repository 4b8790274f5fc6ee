// One convolution over a batch of 256 images and a loss whose gradient with
// respect to the conv output is the input %r: dW sums 256 images' products
// (16384 terms per element), the long sum long_sums_test.cpp measures.
mpc.model @conv_weight_sum
    inputs(%x: tensor<256x4x8x8xf32>, %r: tensor<256x8x8x8xf32>)
    params(%w: tensor<8x4x3x3xf32> = kaiming_uniform(2.23606797749979)) {
  %y = mpc.conv2d %x, %w padding [1, 1]
      : tensor<256x4x8x8xf32>, tensor<8x4x3x3xf32>
  %p = mpc.mul %y, %r : tensor<256x8x8x8xf32>, tensor<256x8x8x8xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<256x8x8x8xf32>
  mpc.output loss(%loss : tensor<f32>)
}
