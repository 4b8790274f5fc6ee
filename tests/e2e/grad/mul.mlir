// Gradient check of mpc.mul with broadcasting both ways: the lhs broadcasts
// in variant 1 ([3, 1, 4] with [2, 4]: each operand is stretched along a
// dim), the rhs in variant 2 ([4] with [3, 4]: a missing leading dim) and
// in variant 3 (a rank-0 rhs, whose gradient sums over everything).
mpc.model @grad_mul
    inputs(%r1: tensor<3x2x4xf32>, %r2: tensor<3x4xf32>, %r3: tensor<2x3xf32>)
    params(%a1: tensor<3x1x4xf32> = normal(1.0),
           %b1: tensor<2x4xf32> = normal(1.0),
           %a2: tensor<4xf32> = normal(1.0),
           %b2: tensor<3x4xf32> = normal(1.0),
           %a3: tensor<2x3xf32> = normal(1.0),
           %b3: tensor<f32> = normal(1.0)) {
  %y1 = mpc.mul %a1, %b1 : tensor<3x1x4xf32>, tensor<2x4xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<3x2x4xf32>, tensor<3x2x4xf32>
  %l1 = mpc.reduce_sum %p1 dims [0, 1, 2] : tensor<3x2x4xf32>
  %y2 = mpc.mul %a2, %b2 : tensor<4xf32>, tensor<3x4xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<3x4xf32>, tensor<3x4xf32>
  %l2 = mpc.reduce_sum %p2 dims [0, 1] : tensor<3x4xf32>
  %y3 = mpc.mul %a3, %b3 : tensor<2x3xf32>, tensor<f32>
  %p3 = mpc.mul %y3, %r3 : tensor<2x3xf32>, tensor<2x3xf32>
  %l3 = mpc.reduce_sum %p3 dims [0, 1] : tensor<2x3xf32>
  %s = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  %loss = mpc.add %s, %l3 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
