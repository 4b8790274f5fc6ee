// A linear classifier: the model the outside project compiles.
mpc.model @outside
    inputs(%x: tensor<32x8xf32>, %y: tensor<32xi32>)
    params(%w: tensor<4x8xf32> = zeros, %b: tensor<4xf32> = zeros) {
  %logits = mpc.linear %x, %w, %b
      : tensor<32x8xf32>, tensor<4x8xf32>, tensor<4xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<32x4xf32>, tensor<32xi32>
  mpc.output loss(%loss : tensor<f32>)
}
