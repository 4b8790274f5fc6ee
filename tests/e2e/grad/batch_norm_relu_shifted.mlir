// Gradient check of a batch norm whose ReLU is its gradient's mask
// (mpc-save-batch-norm-statistics folds the ReLU's gradient into it): the
// mask is the forward's output computed again from x, the saved statistics,
// gamma and beta, not read from the ReLU's output. beta is not 0 here, so
// that a mask which left beta out would zero other elements: x holds
// batch_norm_relu.mlir's values (xhat of each channel: +-0.421, +-0.491,
// ..., +-1.472, 0.07 apart), and beta = 0.526 puts the kink between -0.491
// and -0.561, 0.035 from each (computed in NumPy), so 18 of 32 are
// positive where beta = 0 leaves 16. x is scaled elementwise by a
// parameter (ones), so that dx is written and checked through dw; a step
// of h = 0.01 in any parameter moves a ReLU's input by 0.015 at most.
mpc.model @grad_batch_norm_relu_shifted
    inputs(%r: tensor<2x3x4x4xf32>)
    params(%w: tensor<2x3x4x4xf32> = ones, %g: tensor<3xf32> = ones,
           %b: tensor<3xf32> = constant(0.526))
    state(%m: tensor<3xf32> = zeros, %v: tensor<3xf32> = ones) {
  %flat = mpc.constant dense<[
      0.8, 1.8, 2.0, -1.6, 1.4, 1.5, -1.0, -1.9, -2.1, -1.4, 0.9, -1.3, -1.2,
      1.1, -1.5, 1.9, -0.9, 1.3, 2.1, -0.6, -1.8, 0.8, 1.8, 2.0, -1.6, 1.4,
      1.5, -1.0, -1.9, -2.1, -1.4, 0.9, -0.7, -1.7, -1.1, 1.0, 0.7, 1.2,
      -0.9, 1.3, 2.1, -0.6, -1.8, 0.8, 1.8, 2.0, -1.6, 1.4, -0.8, -2.0, 0.6,
      1.6, 1.7, -0.7, -1.7, -1.1, 1.0, 0.7, 1.2, -0.9, 1.3, 2.1, -0.6, -1.8,
      -1.3, -1.2, 1.1, -1.5, 1.9, -0.8, -2.0, 0.6, 1.6, 1.7, -0.7, -1.7,
      -1.1, 1.0, 0.7, 1.2, 1.5, -1.0, -1.9, -2.1, -1.4, 0.9, -1.3, -1.2, 1.1,
      -1.5, 1.9, -0.8, -2.0, 0.6, 1.6, 1.7
      ]> : tensor<96xf32>
  %x = mpc.reshape %flat : tensor<96xf32> to tensor<2x3x4x4xf32>
  %xw = mpc.mul %x, %w : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %y = mpc.batch_norm %xw, %g, %b, %m, %v : tensor<2x3x4x4xf32>, tensor<3xf32>
  %a = mpc.relu %y : tensor<2x3x4x4xf32>
  %l = mpc.mul %a, %r : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %loss = mpc.reduce_sum %l dims [0, 1, 2, 3] : tensor<2x3x4x4xf32>
  mpc.output loss(%loss : tensor<f32>)
}
