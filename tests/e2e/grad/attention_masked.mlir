// Gradient check of mpc.attention with a mask operand (causal_mask's, the
// only i1 tensor a model can make), in [B, T, H, D] layout with D = 64:
// 21 queries and keys, a 16-key tile and a partial one.
mpc.model @grad_attention_masked
    inputs(%r: tensor<1x21x2x64xf32>)
    params(%q: tensor<1x21x2x64xf32> = normal(1.0),
           %k: tensor<1x21x2x64xf32> = normal(1.0),
           %v: tensor<1x21x2x64xf32> = normal(1.0)) {
  %mask = mpc.causal_mask : tensor<21x21xi1>
  %y, %lse = mpc.attention %q, %k, %v mask %mask : tensor<21x21xi1>
      scale 0.125 layout bthd
      : tensor<1x21x2x64xf32>, tensor<1x21x2x64xf32>, tensor<1x21x2x64xf32>
  %p = mpc.mul %y, %r : tensor<1x21x2x64xf32>, tensor<1x21x2x64xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<1x21x2x64xf32>
  mpc.output loss(%loss : tensor<f32>)
}
