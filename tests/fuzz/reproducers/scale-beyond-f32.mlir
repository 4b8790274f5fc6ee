// mpc-fuzz: --amp=O2 --half=bf16 --optimizer=sgd --debug-nonfinite
// Issue 12: a factor finite as a double but inf as f32 was printed as `INFf`
// and the generated C++ did not compile. Now the verifier rejects it.
mpc.model @scale_1e39
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<8x8xf32> = kaiming_uniform(2.23606797749979)) {
  %h = mpc.linear %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %s = mpc.scale %h by 1.0e39 : tensor<4x8xf32>
  %loss = mpc.cross_entropy %s, %y : tensor<4x8xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
