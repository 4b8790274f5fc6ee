// Gradient check of mpc.tanh.
mpc.model @grad_tanh
    inputs(%r: tensor<4x6xf32>)
    params(%x: tensor<4x6xf32> = normal(1.0)) {
  %y = mpc.tanh %x : tensor<4x6xf32>
  %p = mpc.mul %y, %r : tensor<4x6xf32>, tensor<4x6xf32>
  %loss = mpc.reduce_sum %p dims [0, 1] : tensor<4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
