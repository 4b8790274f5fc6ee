// batch_norm_relu.mlir's blocks over channels of many elements
// ([2, 1, 128, 128]: 32,768 in its one channel, summed in 2 slices; one
// channel, so that the loss sums few terms: in f32 its rounding error over
// h is the central difference's noise), where each batch
// norm is a statistics pass, a per-channel kernel and an elementwise pass:
// forward, the ReLU (and residual sum) runs in the elementwise pass;
// backward, the ReLU's gradient is evaluated in the statistics pass over
// dy, and in the elementwise pass too unless a shortcut reads it: then the
// first stores it and the second reads it back. The channel holds the
// same 32 values as there, repeated, so the ReLUs' inputs keep their
// distance of 0.17 from the kink.
mpc.model @grad_batch_norm_relu_sliced
    inputs(%r: tensor<2x1x128x128xf32>)
    params(%g1: tensor<1xf32> = ones, %b1: tensor<1xf32> = zeros,
           %g2: tensor<1xf32> = ones, %b2: tensor<1xf32> = zeros,
           %g3: tensor<1xf32> = ones, %b3: tensor<1xf32> = zeros)
    state(%m1: tensor<1xf32> = zeros, %v1: tensor<1xf32> = ones,
          %m2: tensor<1xf32> = zeros, %v2: tensor<1xf32> = ones,
          %m3: tensor<1xf32> = zeros, %v3: tensor<1xf32> = ones) {
  %values = mpc.constant dense<[
      0.8, 1.8, 2.0, -1.6, 1.4, 1.5, -1.0, -1.9, -2.1, -1.4, 0.9, -1.3, -1.2,
      1.1, -1.5, 1.9, -0.8, -2.0, 0.6, 1.6, 1.7, -0.7, -1.7, -1.1, 1.0, 0.7,
      1.2, -0.9, 1.3, 2.1, -0.6, -1.8
      ]> : tensor<32xf32>
  %row = mpc.reshape %values : tensor<32xf32> to tensor<1x32xf32>
  %rows = mpc.broadcast %row : tensor<1x32xf32> to tensor<1024x32xf32>
  %x = mpc.reshape %rows : tensor<1024x32xf32> to tensor<2x1x128x128xf32>
  %y1 = mpc.batch_norm %x, %g1, %b1, %m1, %v1 : tensor<2x1x128x128xf32>, tensor<1xf32>
  %a = mpc.relu %y1 : tensor<2x1x128x128xf32>
  %y2 = mpc.batch_norm %a, %g2, %b2, %m2, %v2 : tensor<2x1x128x128xf32>, tensor<1xf32>
  %s2 = mpc.add %y2, %a : tensor<2x1x128x128xf32>, tensor<2x1x128x128xf32>
  %z = mpc.relu %s2 : tensor<2x1x128x128xf32>
  %y3 = mpc.batch_norm %z, %g3, %b3, %m3, %v3 : tensor<2x1x128x128xf32>, tensor<1xf32>
  %s3 = mpc.add %y3, %z : tensor<2x1x128x128xf32>, tensor<2x1x128x128xf32>
  %u = mpc.relu %s3 : tensor<2x1x128x128xf32>
  %l = mpc.mul %u, %r : tensor<2x1x128x128xf32>, tensor<2x1x128x128xf32>
  %loss = mpc.reduce_sum %l dims [0, 1, 2, 3] : tensor<2x1x128x128xf32>
  mpc.output loss(%loss : tensor<f32>)
}
