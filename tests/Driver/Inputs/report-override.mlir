// A small model for the report test: one GEMM kept in f32 by an override,
// then a GEMM in half, a layer norm and the loss.
mpc.model @override
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w1: tensor<8x8xf32> = normal(0.02), %w2: tensor<3x8xf32> = normal(0.02),
           %g: tensor<8xf32> = ones, %b: tensor<8xf32> = zeros) {
  %h = mpc.linear %x, %w1 {mpc.precision = "f32"} : tensor<4x8xf32>, tensor<8x8xf32>
  %a = mpc.relu %h : tensor<4x8xf32>
  %n = mpc.layer_norm %a, %g, %b : tensor<4x8xf32>, tensor<8xf32>
  %logits = mpc.linear %n, %w2 : tensor<4x8xf32>, tensor<3x8xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x3xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<4x3xf32>)
}
