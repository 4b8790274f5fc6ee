// A model whose state takes the name delayed FP8 scaling gives its table
// (assign-fp8.mlir, TAKEN-NAME).
mpc.model @taken_name inputs(%x: tensor<4x16xf32>) params(%w: tensor<16x16xf32> = zeros) state(%fp8.scaling: tensor<4xf32> = zeros) {
  %y = mpc.matmul %x, %w transpose_rhs : tensor<4x16xf32>, tensor<16x16xf32>
  %l = mpc.reduce_sum %y dims [0, 1] : tensor<4x16xf32>
  mpc.output loss(%l : tensor<f32>)
}
