// Gradient check of mpc.sigmoid.
mpc.model @grad_sigmoid
    inputs(%r: tensor<4x6xf32>)
    params(%x: tensor<4x6xf32> = normal(1.0)) {
  %y = mpc.sigmoid %x : tensor<4x6xf32>
  %p = mpc.mul %y, %r : tensor<4x6xf32>, tensor<4x6xf32>
  %loss = mpc.reduce_sum %p dims [0, 1] : tensor<4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
