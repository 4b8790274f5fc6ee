// Gradient check of mpc.relu (run with --distinct: no input within 0.025 of the kink at 0).
mpc.model @grad_relu
    inputs(%r: tensor<4x6xf32>)
    params(%x: tensor<4x6xf32> = normal(1.0)) {
  %y = mpc.relu %x : tensor<4x6xf32>
  %p = mpc.mul %y, %r : tensor<4x6xf32>, tensor<4x6xf32>
  %loss = mpc.reduce_sum %p dims [0, 1] : tensor<4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
