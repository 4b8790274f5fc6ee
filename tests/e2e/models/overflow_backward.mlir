// Finite forward, overflowing gradients in half: with the weights set to 1
// and every input 0.001, the linear gives 0.008 and the scale 8000 (finite
// in f16), the loss is ln 8; but the scale's gradient multiplies the
// logits' gradient (-0.22 for the targets) by 1e6, beyond f16's range. The
// first non-finite value is the backward mpc.scale (line 13): the
// scaled-gradient overflow that dynamic loss scaling handles by skipping
// the step (for e2e.nonfinite_backward).
mpc.model @overflow_backward
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<8x8xf32> = ones, %b: tensor<8xf32> = zeros) {
  %h = mpc.linear %x, %w, %b
      : tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>
  %logits = mpc.scale %h by 1000000.0 : tensor<4x8xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x8xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
