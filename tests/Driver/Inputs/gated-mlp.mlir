// A Llama-style MLP block as a regressor: RMSNorm, then
// silu(x W1) * (x W3), projected, mean squared error.
mpc.model @regressor
    inputs(%x: tensor<32x16xf32>, %y: tensor<32x4xf32>)
    params(%norm: tensor<16xf32> = ones,
           %w1: tensor<64x16xf32> = normal(0.1), %w3: tensor<64x16xf32> = normal(0.1),
           %w2: tensor<4x64xf32> = normal(0.1)) {
  %n = mpc.rms_norm %x, %norm eps 1.0e-05 : tensor<32x16xf32>, tensor<16xf32>
  %a = mpc.linear %n, %w1 : tensor<32x16xf32>, tensor<64x16xf32>
  %g = mpc.silu %a : tensor<32x64xf32>
  %b = mpc.linear %n, %w3 : tensor<32x16xf32>, tensor<64x16xf32>
  %h = mpc.mul %g, %b : tensor<32x64xf32>, tensor<32x64xf32>
  %p = mpc.linear %h, %w2 : tensor<32x64xf32>, tensor<4x64xf32>
  %loss = mpc.mse_loss %p, %y : tensor<32x4xf32>, tensor<32x4xf32>
  mpc.output loss(%loss : tensor<f32>) prediction(%p : tensor<32x4xf32>)
}
