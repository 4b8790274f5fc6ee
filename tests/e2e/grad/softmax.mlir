// Gradient check of mpc.softmax over a middle dim and over the last dim of
// [2, 5, 3].
mpc.model @grad_softmax
    inputs(%r1: tensor<2x5x3xf32>, %r2: tensor<2x5x3xf32>)
    params(%x1: tensor<2x5x3xf32> = normal(1.0),
           %x2: tensor<2x5x3xf32> = normal(1.0)) {
  %y1 = mpc.softmax %x1 dim 1 : tensor<2x5x3xf32>
  %y2 = mpc.softmax %x2 dim 2 : tensor<2x5x3xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<2x5x3xf32>, tensor<2x5x3xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<2x5x3xf32>, tensor<2x5x3xf32>
  %s = mpc.add %p1, %p2 : tensor<2x5x3xf32>, tensor<2x5x3xf32>
  %loss = mpc.reduce_sum %s dims [0, 1, 2] : tensor<2x5x3xf32>
  mpc.output loss(%loss : tensor<f32>)
}
