// A classifier of 8 classes after a wide hidden layer (512 x 1024): its
// logits are a small part of the step's activations.
mpc.model @narrow_classifier
    inputs(%x: tensor<512x16xf32>, %targets: tensor<512xi32>)
    params(%w1: tensor<1024x16xf32> = normal(0.25),
           %w2: tensor<8x1024xf32> = normal(0.25)) {
  %h = mpc.linear %x, %w1 : tensor<512x16xf32>, tensor<1024x16xf32>
  %logits = mpc.linear %h, %w2 : tensor<512x1024xf32>, tensor<8x1024xf32>
  %loss = mpc.cross_entropy %logits, %targets : tensor<512x8xf32>, tensor<512xi32>
  mpc.output loss(%loss : tensor<f32>)
}
