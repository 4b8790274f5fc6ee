// Gradient check of mpc.batch_norm in training mode over channels of many
// elements ([4, 8, 96, 96]: 36,864 a channel), whose statistics and
// gradient sums are taken in slices (batchNormSplits: 3 of 12,288, which
// cross images) and combined per channel. Eight channels: each slice's
// partial sums lie after the channels' values in the step's scratch, and
// with fewer channels than a channel's partials, partials laid over those
// values would go unnoticed. The input is tanh(p * r) + o,
// a per-channel scale (whose gradient is not zero, as it would be for a
// scale right before the normalisation) and a per-image offset, so the
// slices' means differ and their combination is what is checked.
mpc.model @grad_batch_norm_sliced
    inputs(%r: tensor<4x8x96x96xf32>, %w: tensor<4x8x96x96xf32>)
    params(%p: tensor<8x1x1xf32> = normal(1.0, 0.5),
           %o: tensor<4x1x1x1xf32> = normal(0.0, 2.0),
           %g: tensor<8xf32> = normal(1.0, 0.5),
           %b: tensor<8xf32> = normal(1.0))
    state(%mean: tensor<8xf32> = zeros, %var: tensor<8xf32> = ones) {
  %pb = mpc.broadcast %p : tensor<8x1x1xf32> to tensor<4x8x96x96xf32>
  %s = mpc.mul %pb, %r : tensor<4x8x96x96xf32>, tensor<4x8x96x96xf32>
  %t = mpc.tanh %s : tensor<4x8x96x96xf32>
  %ob = mpc.broadcast %o : tensor<4x1x1x1xf32> to tensor<4x8x96x96xf32>
  %x = mpc.add %t, %ob : tensor<4x8x96x96xf32>, tensor<4x8x96x96xf32>
  %y = mpc.batch_norm %x, %g, %b, %mean, %var : tensor<4x8x96x96xf32>, tensor<8xf32>
  %l = mpc.mul %y, %w : tensor<4x8x96x96xf32>, tensor<4x8x96x96xf32>
  %loss = mpc.reduce_sum %l dims [0, 1, 2, 3] : tensor<4x8x96x96xf32>
  mpc.output loss(%loss : tensor<f32>)
}
