// Gradient check of mpc.reshape ([2, 3, 4] to [6, 4]), followed by a
// softmax over its rows so that the reshaped layout matters.
mpc.model @grad_reshape
    inputs(%r: tensor<6x4xf32>)
    params(%x: tensor<2x3x4xf32> = normal(1.0)) {
  %y = mpc.reshape %x : tensor<2x3x4xf32> to tensor<6x4xf32>
  %s = mpc.softmax %y dim 0 : tensor<6x4xf32>
  %p = mpc.mul %s, %r : tensor<6x4xf32>, tensor<6x4xf32>
  %loss = mpc.reduce_sum %p dims [0, 1] : tensor<6x4xf32>
  mpc.output loss(%loss : tensor<f32>)
}
