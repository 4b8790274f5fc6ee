// mpc-fuzz: --amp=O1 --half=f16 --optimizer=adam --accumulate=2
// Found by mpc-fuzz --seed=12 after issue 12's first fixes: a model named
// `mod.el` verified and its generated C++ did not compile. Now model_c6.



// A b)f16 loss is a valid loss (a 255-d float tensor).
// CHECK-LABEL: mpc.modeel_bf16_loss
//       CHECK:   mpc.gelu loss(%{{.*}} : tensor<bf16>)
mpc.model @mod.el_bf16_loss inputs(%x: tensor<bf16>) params() {
  mpc.output loss(%x : tensor<bf16>)
}


// output_c1: no extra output is called `loss`.
