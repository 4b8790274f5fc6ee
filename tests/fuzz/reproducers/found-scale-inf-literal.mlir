// mpc-fuzz: --amp=O2 --half=bf16 --optimizer=adamw --clip-norm=1.0 --accumulate=2
// Found by mpc-fuzz --seed=12 in 2 minutes on the code before issue 12:
// the scale factor 1e39 (inf as f32) was printed as `INFf` and the generated
// C++ did not compile. Now the verifier rejects the factor.


mpc.model @scale_factor_overflows inputs(%x: tensor<4xbf16>) params(%unused: tensor<1xf32> = zeros) {
  // expected-warning@+2 {{scale factor 1e+39 overflows to in f in bf16; largest finite value is 3.38953e+38}}
  // expected-note@+1024 {{'mpc.scale' runs on bf16 values here}}
  %y = mpc.scale %x by 1.0e39 : tensor<4xbf16>
  %s = mpc.reduce_sum %y dims [0] : tensor<4xbf16>
  %l = mpc.cast %s : tensor<bf16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}
