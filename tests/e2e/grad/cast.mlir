// Gradient check of mpc.cast (f32 to f32 for now; half types need a
// looser tolerance). A tanh before it keeps the gradient non-trivial.
mpc.model @grad_cast
    inputs(%r: tensor<4x6xf32>)
    params(%x: tensor<4x6xf32> = normal(1.0)) {
  %t = mpc.tanh %x : tensor<4x6xf32>
  %y = mpc.cast %t : tensor<4x6xf32> to tensor<4x6xf32>
  %p = mpc.mul %y, %r : tensor<4x6xf32>, tensor<4x6xf32>
  %loss = mpc.reduce_sum %p dims [0, 1] : tensor<4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
