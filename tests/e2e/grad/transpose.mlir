// Gradient check of mpc.transpose with permutation [2, 0, 1] of [2, 3, 4]
// (its inverse, [1, 2, 0], is not itself).
mpc.model @grad_transpose
    inputs(%r: tensor<4x2x3xf32>)
    params(%x: tensor<2x3x4xf32> = normal(1.0)) {
  %y = mpc.transpose %x perm [2, 0, 1] : tensor<2x3x4xf32>
  %p = mpc.mul %y, %r : tensor<4x2x3xf32>, tensor<4x2x3xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2] : tensor<4x2x3xf32>
  mpc.output loss(%loss : tensor<f32>)
}
