// Max pooling whose gradient python.max_pool_routing_* checks against a
// reference written in the test: overlapping windows with padding and an
// unequal kernel (its forward stores each window's argmax, the gradient
// reads it: mpc-save-max-pool-indices), and a global pooling (its gradient
// finds the maxima again). The gradient of w is dh * x, dh what the
// poolings route to h = x * w (w = 1).
mpc.model @pool_routing
    inputs(%x: tensor<2x3x9x9xf32>, %r: tensor<2x3x5x5xf32>,
           %z: tensor<2x3x1x1xf32>)
    params(%w: tensor<2x3x9x9xf32> = ones) {
  %h = mpc.mul %x, %w : tensor<2x3x9x9xf32>, tensor<2x3x9x9xf32>
  %y = mpc.max_pool2d %h kernel [3, 2] stride [2, 2] padding [1, 1] : tensor<2x3x9x9xf32>
  %g = mpc.max_pool2d %h kernel [9, 9] : tensor<2x3x9x9xf32>
  %p = mpc.mul %y, %r : tensor<2x3x5x5xf32>, tensor<2x3x5x5xf32>
  %q = mpc.mul %g, %z : tensor<2x3x1x1xf32>, tensor<2x3x1x1xf32>
  %s = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<2x3x5x5xf32>
  %t = mpc.reduce_sum %q dims [0, 1, 2, 3] : tensor<2x3x1x1xf32>
  %l = mpc.add %s, %t : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}
