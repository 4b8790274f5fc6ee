// Gradient check of mpc.embedding: 12 indices into 5 rows, so rows repeat
// (their gradients accumulate) and some may be unused (zero gradient).
mpc.model @grad_embedding
    inputs(%tokens: tensor<3x4xi32>, %r: tensor<3x4x6xf32>)
    params(%table: tensor<5x6xf32> = normal(1.0)) {
  %e = mpc.embedding %table, %tokens : tensor<5x6xf32>, tensor<3x4xi32>
  %p = mpc.mul %e, %r : tensor<3x4x6xf32>, tensor<3x4x6xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2] : tensor<3x4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
