// Gradient check of batch norms with the ReLUs and residual sums that
// mpc-form-kernels runs in their kernels: a constant input x and
//   a = relu(bn1(x)),  z = relu(bn2(a) + a),  u = relu(bn3(z) + z).
// Forward, each ReLU (and residual sum) is its batch norm's epilogue: what
// it normalised is never stored. Backward, the gradient of each ReLU
// after a residual sum (taken from the ReLU's output) is the prologue of
// the batch norm gradient that reads it: bn3's reads u's; bn2's reads
// z's, computed from the sum of bn3's input gradient and the shortcut's,
// and stores it, as the shortcut to a reads it too. a's ReLU follows bn1
// directly, so it is bn1's gradient's mask (from x and the saved
// statistics); that gradient sums its incoming gradients as it reads them
// and has no input gradient to write (x is a constant). The cuda target
// forms the backward so, and the _emulated builds run its kernels; the
// plain cpu build keeps the residual ReLUs' gradients as kernels of their
// own (formSteps). batch_norm_relu_shifted.mlir checks the mask where beta
// is not 0.
//
// No input of a ReLU comes near its kink at 0, where a central difference
// is wrong: each channel of x is one permutation of 32 values, 0.6 to 2.1
// apart from 0, so with gamma = 1 and beta = 0 every ReLU's input is at
// least 0.17 from 0 (computed in NumPy), and a step of h = 0.01 in any
// parameter moves them by a few hundredths at most. About half of each
// ReLU's inputs are negative, so the masks matter.
mpc.model @grad_batch_norm_relu
    inputs(%r: tensor<2x3x4x4xf32>)
    params(%g1: tensor<3xf32> = ones, %b1: tensor<3xf32> = zeros,
           %g2: tensor<3xf32> = ones, %b2: tensor<3xf32> = zeros,
           %g3: tensor<3xf32> = ones, %b3: tensor<3xf32> = zeros)
    state(%m1: tensor<3xf32> = zeros, %v1: tensor<3xf32> = ones,
          %m2: tensor<3xf32> = zeros, %v2: tensor<3xf32> = ones,
          %m3: tensor<3xf32> = zeros, %v3: tensor<3xf32> = ones) {
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
  %y1 = mpc.batch_norm %x, %g1, %b1, %m1, %v1 : tensor<2x3x4x4xf32>, tensor<3xf32>
  %a = mpc.relu %y1 : tensor<2x3x4x4xf32>
  %y2 = mpc.batch_norm %a, %g2, %b2, %m2, %v2 : tensor<2x3x4x4xf32>, tensor<3xf32>
  %s2 = mpc.add %y2, %a : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %z = mpc.relu %s2 : tensor<2x3x4x4xf32>
  %y3 = mpc.batch_norm %z, %g3, %b3, %m3, %v3 : tensor<2x3x4x4xf32>, tensor<3xf32>
  %s3 = mpc.add %y3, %z : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %u = mpc.relu %s3 : tensor<2x3x4x4xf32>
  %l = mpc.mul %u, %r : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %loss = mpc.reduce_sum %l dims [0, 1, 2, 3] : tensor<2x3x4x4xf32>
  mpc.output loss(%loss : tensor<f32>)
}
