// mpc-fuzz: --amp=O3 --half=f16 --optimizer=sgd --debug-nonfinite
// Found by mpc-fuzz --seed=3 after issue 12's first fixes: an inf in a
// constant that is not a splat was printed as `INFf` into the data array.

mpc.model @constant_subnormal_in_own_type inputs(%x: tensor<4xf32>) params(%unused: tensor<1xf32> = zeros) {
// A value that is subnormal in its own type.

  // expected-warning@+1 {{constant 1.4013e-45 is subnormal in f32, with fewer significant bits; smallest normal is 1.2e-38}}
  %c = mpc.constant dense<[1.0, 0x7F800000]> : tensor<2xf32>
  %s = mpc.reduce_sum %c dims [0] : tensor<2xf32>
  mpc.output loss(%s : tensor<f32>)
}

