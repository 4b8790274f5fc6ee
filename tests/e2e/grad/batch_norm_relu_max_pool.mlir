// Gradient check of a ResNet's stem: batch norm, ReLU, max pooling of 3x3
// windows, stride 2, padding 1 (on 4x4 planes: 2x2 windows, the middle
// pixels in up to four). Backward (the cuda target's formation, which the
// _emulated build runs), the pooling's input gradient is gathered by the
// batch norm gradient's loads (MemoryPlan::gatheredWhereRead): no kernel
// routes it. x is batch_norm_relu.mlir's constant plus the parameter %p
// (zeros), so that its gradient, dx of the norm, is checked too. With
// gamma = 1 and beta = 0 every ReLU input is at least 0.42 from its kink,
// and every window whose maximum is positive has it 0.07 above the next
// (normalised; computed in NumPy), where a step of h = 0.01 in x moves a
// normalised value by under 0.01.
mpc.model @grad_batch_norm_relu_max_pool
    inputs(%r: tensor<2x3x2x2xf32>)
    params(%p: tensor<2x3x4x4xf32> = zeros,
           %g: tensor<3xf32> = ones, %b: tensor<3xf32> = zeros)
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
  %c = mpc.reshape %flat : tensor<96xf32> to tensor<2x3x4x4xf32>
  %x = mpc.add %c, %p : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %y = mpc.batch_norm %x, %g, %b, %m, %v : tensor<2x3x4x4xf32>, tensor<3xf32>
  %a = mpc.relu %y : tensor<2x3x4x4xf32>
  %pool = mpc.max_pool2d %a kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x3x4x4xf32>
  %l = mpc.mul %pool, %r : tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>
  %loss = mpc.reduce_sum %l dims [0, 1, 2, 3] : tensor<2x3x2x2xf32>
  mpc.output loss(%loss : tensor<f32>)
}
