// Gradient check of mpc.broadcast: [3, 1] to [2, 3, 4] adds a leading dim
// and stretches a 1.
mpc.model @grad_broadcast
    inputs(%r: tensor<2x3x4xf32>)
    params(%x: tensor<3x1xf32> = normal(1.0)) {
  %y = mpc.broadcast %x : tensor<3x1xf32> to tensor<2x3x4xf32>
  %p = mpc.mul %y, %r : tensor<2x3x4xf32>, tensor<2x3x4xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2] : tensor<2x3x4xf32>
  mpc.output loss(%loss : tensor<f32>)
}
