// Gradient check of mpc.dropout at rate 0.5: mpc_compute_gradients does not
// advance the step, so every loss evaluation draws the same mask.
mpc.model @grad_dropout
    inputs(%r: tensor<8x16xf32>)
    params(%x: tensor<8x16xf32> = normal(1.0)) {
  %y = mpc.dropout %x rate 0.5 seed 3 : tensor<8x16xf32>
  %p = mpc.mul %y, %r : tensor<8x16xf32>, tensor<8x16xf32>
  %loss = mpc.reduce_sum %p dims [0, 1] : tensor<8x16xf32>
  mpc.output loss(%loss : tensor<f32>)
}
