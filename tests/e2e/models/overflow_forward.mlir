// Overflows in half in the forward pass, at the mpc.scale (line 10): with
// the weights set to 1 and every input 10, the linear gives 80 and the scale
// 80000, beyond f16's largest finite value 65504; in f32 every value stays
// finite (for e2e.nonfinite_*).
mpc.model @overflow_forward
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<8x8xf32> = ones, %b: tensor<8xf32> = zeros) {
  %h = mpc.linear %x, %w, %b
      : tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %logits = mpc.scale %h by 1000.0 : tensor<4x8xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x8xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
