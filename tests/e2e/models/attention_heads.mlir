// Two mpc.attention ops whose half builds run on mma.sync on the cuda target
// (emulated, on the mock driver): causal in [B, T, H, D] with D = 64 and
// 37 tokens (two full 16-row tiles and a partial one), and plain in
// [B, H, T, D] with D = 128, 25 queries against 30 keys. The parameters
// are q, k and v themselves; the loss weighs each output element by an
// input, so every gradient is exercised.
mpc.model @attention_heads
    inputs(%r1: tensor<2x37x2x64xf32>, %r2: tensor<1x2x25x128xf32>)
    params(%q1: tensor<2x37x2x64xf32> = normal(0.5),
           %k1: tensor<2x37x2x64xf32> = normal(0.5),
           %v1: tensor<2x37x2x64xf32> = normal(1.0),
           %q2: tensor<1x2x25x128xf32> = normal(0.5),
           %k2: tensor<1x2x30x128xf32> = normal(0.5),
           %v2: tensor<1x2x30x128xf32> = normal(1.0)) {
  %y1, %lse1 = mpc.attention %q1, %k1, %v1 scale 0.125 causal layout bthd
      : tensor<2x37x2x64xf32>, tensor<2x37x2x64xf32>, tensor<2x37x2x64xf32>
  %y2, %lse2 = mpc.attention %q2, %k2, %v2 scale 0.08838834764831845
      : tensor<1x2x25x128xf32>, tensor<1x2x30x128xf32>, tensor<1x2x30x128xf32>
  %p1 = mpc.mul %y1, %r1 : tensor<2x37x2x64xf32>, tensor<2x37x2x64xf32>
  %p2 = mpc.mul %y2, %r2 : tensor<1x2x25x128xf32>, tensor<1x2x25x128xf32>
  %s1 = mpc.reduce_sum %p1 dims [0, 1, 2, 3] : tensor<2x37x2x64xf32>
  %s2 = mpc.reduce_sum %p2 dims [0, 1, 2, 3] : tensor<1x2x25x128xf32>
  %loss = mpc.add %s1, %s2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
