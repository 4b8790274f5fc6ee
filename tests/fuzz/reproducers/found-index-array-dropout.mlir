// mpc-fuzz: --amp=O3 --half=bf16 --optimizer=adam --report=json
// Found by mpc-fuzz --seed=12 in 2 minutes on the code before issue 12:
// array<index: ...> crashed MLIR 22's parser. Now a located error.


// Embedding: the table's gradient is a scatter-add; integer indices get none.
// Dropout's backward reuses the forward mask through the same rate and seed.
// CHECK-LABEL: mpc.model @embedding_and_dropout
//       CHECK:   %[[E:.*]] = mpc.embedding %table, %ids
//       CHECK:   mpc.dropout %[[E]] rate 5.000000e-01 seed 7

//       CHECK:   %[[DD:.*]] = mpc.loss_scaling %{{.*}} rate 5.00000-01 seed 7
//       CHECK:   %[[DT:.*]] = mpc.embedding_grad %[[DD]], %ids : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<1.0e-8>
//       CHECK:   gradients(%[[DT]] : tensor<10x4xf32>)
mpc.model @embedding_and_dropout
    inputs(%ids: tensor<2x3xi32>) params(%table: tensor<10x4xf32> = normal(1.0)) {
  %e = mpc.embedding %table, %ids : tensor<10x4xf32>, tensor<2x3xi32>
  %d = mpc.dropout %e rate 0.5 seed 7 {dims = array<index: 7>} : tensor<2x3x4xf32>
  %s = mpc.reduce_sum %d dims [0, 1, 2] : tensor<2x3x4xf32>
  mpc.output loss(%s : tensor<f32>)
}

