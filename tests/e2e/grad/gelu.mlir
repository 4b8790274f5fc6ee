// Gradient check of mpc.gelu, exact (erf) and tanh-approximated.
mpc.model @grad_gelu
    inputs(%r1: tensor<4x6xf32>, %r2: tensor<4x6xf32>)
    params(%x1: tensor<4x6xf32> = normal(1.0),
           %x2: tensor<4x6xf32> = normal(1.0)) {
  %y1 = mpc.gelu %x1 : tensor<4x6xf32>
  %y2 = mpc.gelu %x2 approximate tanh : tensor<4x6xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<4x6xf32>, tensor<4x6xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<4x6xf32>, tensor<4x6xf32>
  %s = mpc.add %p1, %p2 : tensor<4x6xf32>, tensor<4x6xf32>
  %loss = mpc.reduce_sum %s dims [0, 1] : tensor<4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
