// A classifier whose logits (512 rows of 4096 classes, 8 MiB in f32) are
// most of the training step's activations, and one whose logits (512 rows of
// 8 classes) are not: classifier-chunks.test checks the chunks chosen.
mpc.model @wide_classifier
    inputs(%x: tensor<512x16xf32>, %targets: tensor<512xi32>)
    params(%w1: tensor<16x16xf32> = normal(0.25),
           %w2: tensor<4096x16xf32> = normal(0.25)) {
  %h = mpc.linear %x, %w1 : tensor<512x16xf32>, tensor<16x16xf32>
  %logits = mpc.linear %h, %w2 : tensor<512x16xf32>, tensor<4096x16xf32>
  %loss = mpc.cross_entropy %logits, %targets : tensor<512x4096xf32>, tensor<512xi32>
  mpc.output loss(%loss : tensor<f32>)
}
