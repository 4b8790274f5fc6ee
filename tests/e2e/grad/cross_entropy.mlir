// Gradient check of mpc.cross_entropy: rank-2 logits, and rank-3 logits
// with ignore_index -100 (grad_check sets target 1 to it, so that row gets
// no gradient and the mean is over the other five). The loss is the sum of
// the two scalars: no random weight, which could make it small.
mpc.model @grad_cross_entropy
    inputs(%t1: tensor<6xi32>, %t2: tensor<2x3xi32>)
    params(%x1: tensor<6x5xf32> = normal(1.0),
           %x2: tensor<2x3x5xf32> = normal(1.0)) {
  %ce1 = mpc.cross_entropy %x1, %t1 : tensor<6x5xf32>, tensor<6xi32>
  %ce2 = mpc.cross_entropy %x2, %t2 ignore_index -100 : tensor<2x3x5xf32>, tensor<2x3xi32>
  %loss = mpc.add %ce1, %ce2 : tensor<f32>, tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
