// Gradient check of mpc.batch_norm in training mode over channels of many
// elements ([5, 2, 100, 100]: 50,000 a channel), whose statistics and
// gradient sums are taken in slices (batchNormSplits: 4 of 12,500, which
// cross images) and combined per channel. The input is tanh(p * r) + o,
// a per-channel scale (whose gradient is not zero, as it would be for a
// scale right before the normalisation) and a per-image offset, so the
// slices' means differ and their combination is what is checked.
mpc.model @grad_batch_norm_sliced
    inputs(%r: tensor<5x2x100x100xf32>, %w: tensor<5x2x100x100xf32>)
    params(%p: tensor<2x1x1xf32> = normal(1.0, 0.5),
           %o: tensor<5x1x1x1xf32> = normal(0.0, 2.0),
           %g: tensor<2xf32> = normal(1.0, 0.5),
           %b: tensor<2xf32> = normal(1.0))
    state(%mean: tensor<2xf32> = zeros, %var: tensor<2xf32> = ones) {
  %pb = mpc.broadcast %p : tensor<2x1x1xf32> to tensor<5x2x100x100xf32>
  %s = mpc.mul %pb, %r : tensor<5x2x100x100xf32>, tensor<5x2x100x100xf32>
  %t = mpc.tanh %s : tensor<5x2x100x100xf32>
  %ob = mpc.broadcast %o : tensor<5x1x1x1xf32> to tensor<5x2x100x100xf32>
  %x = mpc.add %t, %ob : tensor<5x2x100x100xf32>, tensor<5x2x100x100xf32>
  %y = mpc.batch_norm %x, %g, %b, %mean, %var : tensor<5x2x100x100xf32>, tensor<2xf32>
  %l = mpc.mul %y, %w : tensor<5x2x100x100xf32>, tensor<5x2x100x100xf32>
  %loss = mpc.reduce_sum %l dims [0, 1, 2, 3] : tensor<5x2x100x100xf32>
  mpc.output loss(%loss : tensor<f32>)
}
