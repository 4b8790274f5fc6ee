// A cross-entropy whose gradient is seeded with the loss itself (issue 36):
// mpc-form-kernels must not fuse the two into a classifier kernel, which
// reads the seed before it computes the loss. The sum of each row's
// gradient is 0, so the loss is 0 up to rounding
// (classifier_seed_test.cpp).
mpc.model @classifier_loss_read_before inputs(%logits: tensor<4x10xf32>, %y: tensor<4xi32>) params() {
  %l = mpc.cross_entropy %logits, %y : tensor<4x10xf32>, tensor<4xi32>
  %seed = mpc.reshape %l : tensor<f32> to tensor<f32>
  %d = mpc.cross_entropy_grad %seed, %logits, %y : tensor<f32>, tensor<4x10xf32>, tensor<4xi32>
  %s = mpc.reduce_sum %d dims [0, 1] : tensor<4x10xf32>
  mpc.output loss(%s : tensor<f32>)
}
