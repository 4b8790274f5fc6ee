// Gradient check of mpc.silu (x * sigmoid(x)), over inputs of both signs.
mpc.model @grad_silu
    inputs(%r: tensor<4x6xf32>)
    params(%x: tensor<4x6xf32> = normal(2.0)) {
  %y = mpc.silu %x : tensor<4x6xf32>
  %p = mpc.mul %y, %r : tensor<4x6xf32>, tensor<4x6xf32>
  %loss = mpc.reduce_sum %p dims [0, 1] : tensor<4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
