// Gradient check of mpc.attention with head dim 128, 9 queries against 23
// keys and a value head dim of 40 (padded to 48 in the kernels' tiles).
mpc.model @grad_attention_d128
    inputs(%r: tensor<1x1x9x40xf32>)
    params(%q: tensor<1x1x9x128xf32> = normal(1.0),
           %k: tensor<1x1x23x128xf32> = normal(1.0),
           %v: tensor<1x1x23x40xf32> = normal(1.0)) {
  %y, %lse = mpc.attention %q, %k, %v scale 0.08838834764831845
      : tensor<1x1x9x128xf32>, tensor<1x1x23x128xf32>, tensor<1x1x23x40xf32>
  %p = mpc.mul %y, %r : tensor<1x1x9x40xf32>, tensor<1x1x9x40xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<1x1x9x40xf32>
  mpc.output loss(%loss : tensor<f32>)
}
