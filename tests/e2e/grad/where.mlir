// Gradient check of mpc.where with a causal mask, as in masked attention:
// on_true [2, 4, 4] is stretched to nothing, on_false [4] broadcasts over
// the leading dims, so both gradients are unbroadcast.
mpc.model @grad_where
    inputs(%r: tensor<2x4x4xf32>)
    params(%a: tensor<2x4x4xf32> = normal(1.0),
           %b: tensor<4xf32> = normal(1.0)) {
  %mask = mpc.causal_mask : tensor<4x4xi1>
  %y = mpc.where %mask, %a, %b : tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<4xf32>
  %p = mpc.mul %y, %r : tensor<2x4x4xf32>, tensor<2x4x4xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2] : tensor<2x4x4xf32>
  mpc.output loss(%loss : tensor<f32>)
}
