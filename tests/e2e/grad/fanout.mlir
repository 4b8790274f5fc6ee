// Gradient check of mpc-autodiff's accumulation: %x feeds a mul with
// itself, a tanh and a matmul, and %w both operands of a matmul, so each
// gradient is the sum of several vector-Jacobian products.
mpc.model @grad_fanout
    inputs(%r: tensor<3x3xf32>)
    params(%x: tensor<3x3xf32> = normal(1.0),
           %w: tensor<3x3xf32> = normal(1.0)) {
  %sq = mpc.mul %x, %x : tensor<3x3xf32>, tensor<3x3xf32>
  %t = mpc.tanh %x : tensor<3x3xf32>
  %m = mpc.matmul %x, %w : tensor<3x3xf32>, tensor<3x3xf32>
  %ww = mpc.matmul %w, %w transpose_rhs : tensor<3x3xf32>, tensor<3x3xf32>
  %s0 = mpc.add %sq, %t : tensor<3x3xf32>, tensor<3x3xf32>
  %s1 = mpc.add %s0, %m : tensor<3x3xf32>, tensor<3x3xf32>
  %s2 = mpc.add %s1, %ww : tensor<3x3xf32>, tensor<3x3xf32>
  %p = mpc.mul %s2, %r : tensor<3x3xf32>, tensor<3x3xf32>
  %loss = mpc.reduce_sum %p dims [0, 1] : tensor<3x3xf32>
  mpc.output loss(%loss : tensor<f32>)
}
