// Gradient check of mpc.clamp: both bounds (ReLU6's shape) and one bound
// on each side. The bounds are multiples of --distinct's grid spacing, so
// no input lies within a step of one, and each range holds grid values.
mpc.model @grad_clamp
    inputs(%r: tensor<4x6xf32>)
    params(%x: tensor<4x6xf32> = normal(1.0)) {
  %both = mpc.clamp %x min -0.3 max 0.2 : tensor<4x6xf32>
  %low = mpc.clamp %x min 0.1 : tensor<4x6xf32>
  %high = mpc.clamp %x max -0.1 : tensor<4x6xf32>
  %s = mpc.add %both, %low : tensor<4x6xf32>, tensor<4x6xf32>
  %t = mpc.add %s, %high : tensor<4x6xf32>, tensor<4x6xf32>
  %p = mpc.mul %t, %r : tensor<4x6xf32>, tensor<4x6xf32>
  %loss = mpc.reduce_sum %p dims [0, 1] : tensor<4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
