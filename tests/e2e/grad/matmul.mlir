// Gradient check of mpc.matmul in each transpose combination: op(A) is
// 3x4 and op(B) 4x5 in every variant. Loss: sum(C * r) per variant.
mpc.model @grad_matmul
    inputs(%r_nn: tensor<3x5xf32>, %r_tn: tensor<3x5xf32>,
           %r_nt: tensor<3x5xf32>, %r_tt: tensor<3x5xf32>)
    params(%a_nn: tensor<3x4xf32> = normal(1.0),
           %b_nn: tensor<4x5xf32> = normal(1.0),
           %a_tn: tensor<4x3xf32> = normal(1.0),
           %b_tn: tensor<4x5xf32> = normal(1.0),
           %a_nt: tensor<3x4xf32> = normal(1.0),
           %b_nt: tensor<5x4xf32> = normal(1.0),
           %a_tt: tensor<4x3xf32> = normal(1.0),
           %b_tt: tensor<5x4xf32> = normal(1.0)) {
  %c_nn = mpc.matmul %a_nn, %b_nn : tensor<3x4xf32>, tensor<4x5xf32>
  %c_tn = mpc.matmul %a_tn, %b_tn transpose_lhs : tensor<4x3xf32>, tensor<4x5xf32>
  %c_nt = mpc.matmul %a_nt, %b_nt transpose_rhs : tensor<3x4xf32>, tensor<5x4xf32>
  %c_tt = mpc.matmul %a_tt, %b_tt transpose_lhs transpose_rhs : tensor<4x3xf32>, tensor<5x4xf32>
  %p_nn = mpc.mul %c_nn, %r_nn : tensor<3x5xf32>, tensor<3x5xf32>
  %p_tn = mpc.mul %c_tn, %r_tn : tensor<3x5xf32>, tensor<3x5xf32>
  %p_nt = mpc.mul %c_nt, %r_nt : tensor<3x5xf32>, tensor<3x5xf32>
  %p_tt = mpc.mul %c_tt, %r_tt : tensor<3x5xf32>, tensor<3x5xf32>
  %s0 = mpc.add %p_nn, %p_tn : tensor<3x5xf32>, tensor<3x5xf32>
  %s1 = mpc.add %s0, %p_nt : tensor<3x5xf32>, tensor<3x5xf32>
  %s2 = mpc.add %s1, %p_tt : tensor<3x5xf32>, tensor<3x5xf32>
  %loss = mpc.reduce_sum %s2 dims [0, 1] : tensor<3x5xf32>
  mpc.output loss(%loss : tensor<f32>)
}
