// A linear layer with zero weights and bias over 9216 rows, every label 0:
// the logits are 0, each row's loss is ln 4 and each row adds 0.25 / 9216
// to the bias gradient of classes 1-3, so the mean loss is a 9216-term sum
// of equal values and the bias gradient another (long_sums_test.cpp).
mpc.model @bias_sum
    inputs(%x: tensor<9216x8xf32>, %y: tensor<9216xi32>)
    params(%w: tensor<4x8xf32> = zeros, %b: tensor<4xf32> = zeros) {
  %logits = mpc.linear %x, %w, %b
      : tensor<9216x8xf32>, tensor<4x8xf32>, tensor<4xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<9216x4xf32>, tensor<9216xi32>
  mpc.output loss(%loss : tensor<f32>)
}
