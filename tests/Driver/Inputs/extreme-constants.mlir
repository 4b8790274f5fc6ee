// Constants at the edges of f32: beyond the half types' range, -0, f32
// subnormals, a NaN with a payload, -inf. Every one reaches the generated
// kernels as a literal (extreme-constants*.test).
mpc.model @extreme
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<8x8xf32> = kaiming_uniform(2.23606797749979)) {
  %h = mpc.linear %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %big = mpc.scale %h by 3.4e38 : tensor<4x8xf32>
  %negzero = mpc.scale %h by -0.0 : tensor<4x8xf32>
  %tiny = mpc.scale %h by 1.0e-45 : tensor<4x8xf32>
  %nan = mpc.constant dense<0x7FC00001> : tensor<f32>
  %neginf = mpc.constant dense<0xFF800000> : tensor<f32>
  %denormal = mpc.constant dense<1.0e-40> : tensor<f32>
  // Beyond f32: the parser makes it inf.
  %beyond = mpc.constant dense<1.0e39> : tensor<f32>
  // Not a splat: the values are data, printed as an array.
  %row = mpc.constant dense<[1.0, 0x7F800000, -0.0, 1.0e-45, 0x7FC00002, 0xFF800000, 3.4e38, 2.0]> : tensor<8xf32>
  %a = mpc.mul %big, %nan : tensor<4x8xf32>, tensor<f32>
  %b = mpc.add %negzero, %neginf : tensor<4x8xf32>, tensor<f32>
  %c0 = mpc.add %tiny, %denormal : tensor<4x8xf32>, tensor<f32>
  %c = mpc.sub %c0, %beyond : tensor<4x8xf32>, tensor<f32>
  %ab = mpc.add %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
  %abc = mpc.add %ab, %c : tensor<4x8xf32>, tensor<4x8xf32>
  %abch = mpc.add %abc, %h : tensor<4x8xf32>, tensor<4x8xf32>
  %logits = mpc.add %abch, %row : tensor<4x8xf32>, tensor<8xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x8xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
