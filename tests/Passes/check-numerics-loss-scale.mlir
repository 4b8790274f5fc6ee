// RUN: mpc-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mpc-check-numerics="static-loss-scale=131072"

// A static loss scale beyond f16's largest finite value: the backward pass
// starts from the scale itself, which is inf in f16.
// expected-warning@+1 {{static loss scale 131072 overflows f16 (largest finite value 65504): the scaled loss and its gradients are inf in f16, so every step would overflow}}
mpc.model @scale_overflows_f16 inputs(%x: tensor<4xf16>) params() {
  %s = mpc.reduce_sum %x dims [0] : tensor<4xf16>
  mpc.output loss(%s : tensor<f16>)
}

// -----

// bf16 has f32's range: the same scale fits.
mpc.model @negative_scale_fits_bf16 inputs(%x: tensor<4xbf16>) params() {
  %s = mpc.reduce_sum %x dims [0] : tensor<4xbf16>
  mpc.output loss(%s : tensor<bf16>)
}

// -----

// An f32 model has no half values to overflow.
mpc.model @negative_f32_model inputs(%x: tensor<4xf32>) params() {
  %s = mpc.reduce_sum %x dims [0] : tensor<4xf32>
  mpc.output loss(%s : tensor<f32>)
}
