// A valid model for the driver tests that are about options, not the model.
mpc.model @tiny
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<3x8xf32> = normal(0.02), %b: tensor<3xf32> = zeros) {
  %logits = mpc.linear %x, %w, %b : tensor<4x8xf32>, tensor<3x8xf32>, tensor<3xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x3xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<4x3xf32>)
}
