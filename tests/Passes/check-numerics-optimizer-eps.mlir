// RUN: mpc-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mpc-check-numerics="optimizer-eps=1e-8"

// O3 stores the parameters, and so Adam's moments, in f16: eps 1e-8 is 0
// there.
// expected-warning@+2 {{optimizer eps 1e-08 rounds to 0 in f16; smallest normal is 6.1e-05}}
// expected-note@+1 {{the model stores its parameters, and so Adam's moments, in f16 (--amp=O3); --amp=O2 keeps f32 master weights and moments}}
mpc.model @o3_adam inputs(%x: tensor<4x3xf16>, %y: tensor<4xi32>)
    params(%w: tensor<5x3xf16> = zeros) {
  %h = mpc.linear %x, %w : tensor<4x3xf16>, tensor<5x3xf16>
  %l = mpc.cross_entropy %h, %y : tensor<4x5xf16>, tensor<4xi32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// bf16 has f32's exponent range: 1e-8 is a normal bf16 number.
mpc.model @negative_o3_adam_bf16 inputs(%x: tensor<4x3xbf16>, %y: tensor<4xi32>)
    params(%w: tensor<5x3xbf16> = zeros) {
  %h = mpc.linear %x, %w : tensor<4x3xbf16>, tensor<5x3xbf16>
  %l = mpc.cross_entropy %h, %y : tensor<4x5xbf16>, tensor<4xi32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// O2: f32 master weights and moments; the update adds eps in f32.
mpc.model @negative_o2_adam inputs(%x: tensor<4x3xf32>, %y: tensor<4xi32>)
    params(%w: tensor<5x3xf32> = zeros) {
  %x16 = mpc.cast %x : tensor<4x3xf32> to tensor<4x3xf16>
  %w16 = mpc.cast %w : tensor<5x3xf32> to tensor<5x3xf16>
  %h = mpc.linear %x16, %w16 : tensor<4x3xf16>, tensor<5x3xf16>
  %l = mpc.cross_entropy %h, %y : tensor<4x5xf16>, tensor<4xi32>
  mpc.output loss(%l : tensor<f32>)
}
