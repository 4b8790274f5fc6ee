// The model of classifier_loss_read_before.mlir with a loss that is not 0:
// sum(d * logits) = l / rows * sum over rows of (sum_c p_c x_c - x_target),
// checked against fp64 in classifier_seed_test.cpp.
mpc.model @classifier_loss_weights_gradient inputs(%logits: tensor<4x10xf32>, %y: tensor<4xi32>) params() {
  %l = mpc.cross_entropy %logits, %y : tensor<4x10xf32>, tensor<4xi32>
  %d = mpc.cross_entropy_grad %l, %logits, %y : tensor<f32>, tensor<4x10xf32>, tensor<4xi32>
  %w = mpc.mul %d, %logits : tensor<4x10xf32>, tensor<4x10xf32>
  %s = mpc.reduce_sum %w dims [0, 1] : tensor<4x10xf32>
  mpc.output loss(%s : tensor<f32>)
}
