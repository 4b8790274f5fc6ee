// Gradient check of mpc.log on (0.5, 2).
mpc.model @grad_log
    inputs(%r: tensor<4x6xf32>)
    params(%x: tensor<4x6xf32> = uniform(0.5, 2.0)) {
  %y = mpc.log %x : tensor<4x6xf32>
  %p = mpc.mul %y, %r : tensor<4x6xf32>, tensor<4x6xf32>
  %loss = mpc.reduce_sum %p dims [0, 1] : tensor<4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
