// batch_norm_relu_shifted.mlir's check over a channel of 32,768 elements
// ([2, 1, 128, 128], summed in 2 slices): the ReLU's mask is computed by
// the slices' sums and again by the elementwise pass that writes dx. The
// channel holds batch_norm_relu_sliced.mlir's 32 values x0, repeated, and
// beta = 0.526 as there. dx is checked through one parameter s (0) in
// x = x0 + s * x0^2 / 4, whose gradient sums dx * x0^2 / 4 over the
// channel: a batch norm's dx is orthogonal to any affine change of its
// channel, so s scales a part that is not one (and not zero where the mask
// is: relu(x0) was, and missed a dx left unmasked), and one scalar's
// gradient stands well above the noise of the loss's 32,768 terms, where a
// parameter a column's did not. A step of h = 0.01 moves x by 0.011 and a
// ReLU's input by 0.008 at most.
mpc.model @grad_batch_norm_relu_shifted_sliced
    inputs(%r: tensor<2x1x128x128xf32>)
    params(%s: tensor<1xf32> = zeros, %g: tensor<1xf32> = ones,
           %b: tensor<1xf32> = constant(0.526))
    state(%m: tensor<1xf32> = zeros, %v: tensor<1xf32> = ones) {
  %values = mpc.constant dense<[
      0.8, 1.8, 2.0, -1.6, 1.4, 1.5, -1.0, -1.9, -2.1, -1.4, 0.9, -1.3, -1.2,
      1.1, -1.5, 1.9, -0.8, -2.0, 0.6, 1.6, 1.7, -0.7, -1.7, -1.1, 1.0, 0.7,
      1.2, -0.9, 1.3, 2.1, -0.6, -1.8
      ]> : tensor<32xf32>
  %row = mpc.reshape %values : tensor<32xf32> to tensor<1x32xf32>
  %rows = mpc.broadcast %row : tensor<1x32xf32> to tensor<1024x32xf32>
  %x = mpc.reshape %rows : tensor<1024x32xf32> to tensor<2x1x128x128xf32>
  %square = mpc.mul %x, %x : tensor<2x1x128x128xf32>, tensor<2x1x128x128xf32>
  %quarter = mpc.constant dense<0.25> : tensor<2x1x128x128xf32>
  %part = mpc.mul %square, %quarter : tensor<2x1x128x128xf32>, tensor<2x1x128x128xf32>
  %s4 = mpc.reshape %s : tensor<1xf32> to tensor<1x1x1x1xf32>
  %sb = mpc.broadcast %s4 : tensor<1x1x1x1xf32> to tensor<2x1x128x128xf32>
  %scaled = mpc.mul %part, %sb : tensor<2x1x128x128xf32>, tensor<2x1x128x128xf32>
  %xw = mpc.add %x, %scaled : tensor<2x1x128x128xf32>, tensor<2x1x128x128xf32>
  %y = mpc.batch_norm %xw, %g, %b, %m, %v : tensor<2x1x128x128xf32>, tensor<1xf32>
  %a = mpc.relu %y : tensor<2x1x128x128xf32>
  %l = mpc.mul %a, %r : tensor<2x1x128x128xf32>, tensor<2x1x128x128xf32>
  %loss = mpc.reduce_sum %l dims [0, 1, 2, 3] : tensor<2x1x128x128xf32>
  mpc.output loss(%loss : tensor<f32>)
}
