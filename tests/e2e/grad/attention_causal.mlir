// Gradient check of mpc.attention, causal, [B, H, T, D] = [1, 2, 19, 16]:
// 19 queries are a 16-query tile and a partial one, and the causal
// kernels skip the tile above the diagonal.
mpc.model @grad_attention_causal
    inputs(%r: tensor<1x2x19x16xf32>)
    params(%q: tensor<1x2x19x16xf32> = normal(1.0),
           %k: tensor<1x2x19x16xf32> = normal(1.0),
           %v: tensor<1x2x19x16xf32> = normal(1.0)) {
  %y, %lse = mpc.attention %q, %k, %v scale 0.25 causal
      : tensor<1x2x19x16xf32>, tensor<1x2x19x16xf32>, tensor<1x2x19x16xf32>
  %p = mpc.mul %y, %r : tensor<1x2x19x16xf32>, tensor<1x2x19x16xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<1x2x19x16xf32>
  mpc.output loss(%loss : tensor<f32>)
}
