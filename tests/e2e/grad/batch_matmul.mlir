// Gradient check of mpc.batch_matmul in each transpose combination, with
// batch dims [2, 2] (rank 4): op(A) is 3x4 and op(B) 4x2 per batch entry.
mpc.model @grad_batch_matmul
    inputs(%r_nn: tensor<2x2x3x2xf32>, %r_tn: tensor<2x2x3x2xf32>,
           %r_nt: tensor<2x2x3x2xf32>, %r_tt: tensor<2x2x3x2xf32>)
    params(%a_nn: tensor<2x2x3x4xf32> = normal(1.0),
           %b_nn: tensor<2x2x4x2xf32> = normal(1.0),
           %a_tn: tensor<2x2x4x3xf32> = normal(1.0),
           %b_tn: tensor<2x2x4x2xf32> = normal(1.0),
           %a_nt: tensor<2x2x3x4xf32> = normal(1.0),
           %b_nt: tensor<2x2x2x4xf32> = normal(1.0),
           %a_tt: tensor<2x2x4x3xf32> = normal(1.0),
           %b_tt: tensor<2x2x2x4xf32> = normal(1.0)) {
  %c_nn = mpc.batch_matmul %a_nn, %b_nn : tensor<2x2x3x4xf32>, tensor<2x2x4x2xf32>
  %c_tn = mpc.batch_matmul %a_tn, %b_tn transpose_lhs : tensor<2x2x4x3xf32>, tensor<2x2x4x2xf32>
  %c_nt = mpc.batch_matmul %a_nt, %b_nt transpose_rhs : tensor<2x2x3x4xf32>, tensor<2x2x2x4xf32>
  %c_tt = mpc.batch_matmul %a_tt, %b_tt transpose_lhs transpose_rhs : tensor<2x2x4x3xf32>, tensor<2x2x2x4xf32>
  %p_nn = mpc.mul %c_nn, %r_nn : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>
  %p_tn = mpc.mul %c_tn, %r_tn : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>
  %p_nt = mpc.mul %c_nt, %r_nt : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>
  %p_tt = mpc.mul %c_tt, %r_tt : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>
  %s0 = mpc.add %p_nn, %p_tn : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>
  %s1 = mpc.add %s0, %p_nt : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>
  %s2 = mpc.add %s1, %p_tt : tensor<2x2x3x2xf32>, tensor<2x2x3x2xf32>
  %loss = mpc.reduce_sum %s2 dims [0, 1, 2, 3] : tensor<2x2x3x2xf32>
  mpc.output loss(%loss : tensor<f32>)
}
