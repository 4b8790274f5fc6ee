// Gradient check of a classifier run over chunks of rows: the bias-free
// linear that computes the logits, their cross-entropy (ignore_index -100:
// grad_check sets target 1 to it) and the GEMMs of their gradient are one
// linear_classifier group, compiled with --classifier-chunks=3 (40 rows in
// chunks of 16, 16 and 8: the last one short). dx is written a chunk of rows
// at a time; dW is the sum of the chunks' products.
mpc.model @grad_linear_cross_entropy
    inputs(%t: tensor<40xi32>)
    params(%x: tensor<40x12xf32> = normal(1.0),
           %w: tensor<10x12xf32> = normal(0.5)) {
  %logits = mpc.linear %x, %w : tensor<40x12xf32>, tensor<10x12xf32>
  %loss = mpc.cross_entropy %logits, %t ignore_index -100 : tensor<40x10xf32>, tensor<40xi32>
  mpc.output loss(%loss : tensor<f32>)
}
