// Gradient check of mpc.reduce_sum over [3, 4, 5]: one middle dim, dims [0, 2]
// with keepdim, and the last dim.
mpc.model @grad_reduce_sum
    inputs(%r1: tensor<3x5xf32>, %r2: tensor<1x4x1xf32>, %r3: tensor<3x4xf32>)
    params(%x1: tensor<3x4x5xf32> = normal(1.0),
           %x2: tensor<3x4x5xf32> = normal(1.0),
           %x3: tensor<3x4x5xf32> = normal(1.0)) {
  %y1 = mpc.reduce_sum %x1 dims [1] : tensor<3x4x5xf32>
  %y2 = mpc.reduce_sum %x2 dims [0, 2] keepdim : tensor<3x4x5xf32>
  %y3 = mpc.reduce_sum %x3 dims [2] : tensor<3x4x5xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<3x5xf32>, tensor<3x5xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<1x4x1xf32>, tensor<1x4x1xf32>
  %p3 = mpc.mul %y3, %r3 : tensor<3x4xf32>, tensor<3x4xf32>
  %l1 = mpc.reduce_sum %p1 dims [0, 1] : tensor<3x5xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1, 2] : tensor<1x4x1xf32>
  %l3 = mpc.reduce_sum %p3 dims [0, 1] : tensor<3x4xf32>
  %s = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  %loss = mpc.add %s, %l3 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
