// A small MLP with dropout between its layers, for the e2e tests of
// mpc_eval: in training the dropout masks depend on the session seed and the
// step, in evaluation dropout is the identity.
mpc.model @dropout_mlp
    inputs(%x: tensor<16x32xf32>, %y: tensor<16xi32>)
    params(%fc1.weight: tensor<64x32xf32> = kaiming_uniform(2.23606797749979),
           %fc1.bias: tensor<64xf32> = zeros,
           %fc2.weight: tensor<10x64xf32> = kaiming_uniform(2.23606797749979),
           %fc2.bias: tensor<10xf32> = zeros) {
  %h = mpc.linear %x, %fc1.weight, %fc1.bias
      : tensor<16x32xf32>, tensor<64x32xf32>, tensor<64xf32>
  %a = mpc.relu %h : tensor<16x64xf32>
  %d = mpc.dropout %a rate 0.5 seed 3 : tensor<16x64xf32>
  %logits = mpc.linear %d, %fc2.weight, %fc2.bias
      : tensor<16x64xf32>, tensor<10x64xf32>, tensor<10xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<16x10xf32>, tensor<16xi32>
  mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<16x10xf32>)
}
