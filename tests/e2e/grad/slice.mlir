// Gradient check of mpc.slice with strides ([5, 7] -> rows 1, 3 and
// columns 0, 3, 6) and without ([2, 4, 6] -> [1:2, 1:3, 2:6]). Elements the
// slices skip get zero gradient.
mpc.model @grad_slice
    inputs(%r1: tensor<2x3xf32>, %r2: tensor<1x2x4xf32>)
    params(%x1: tensor<5x7xf32> = normal(1.0),
           %x2: tensor<2x4x6xf32> = normal(1.0)) {
  %y1 = mpc.slice %x1 starts [1, 0] limits [5, 7] strides [2, 3] : tensor<5x7xf32>
  %y2 = mpc.slice %x2 starts [1, 1, 2] limits [2, 3, 6] : tensor<2x4x6xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<2x3xf32>, tensor<2x3xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<1x2x4xf32>, tensor<1x2x4xf32>
  %l1 = mpc.reduce_sum %p1 dims [0, 1] : tensor<2x3xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1, 2] : tensor<1x2x4xf32>
  %loss = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
