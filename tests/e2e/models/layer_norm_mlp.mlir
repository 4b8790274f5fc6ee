// A small MLP with a layer norm between its layers, whose weight and bias
// the steps read in f32 at O2 (the linears read half copies): for the
// data-parallel test of sharded master weights, whose f32 copies the ranks
// gather. 1,354 parameters; on 2 ranks the shards meet inside ln.bias.
mpc.model @layer_norm_mlp
    inputs(%x: tensor<16x8xf32>, %y: tensor<16xi32>)
    params(%fc1.weight: tensor<64x8xf32> = kaiming_uniform(2.23606797749979),
           %fc1.bias: tensor<64xf32> = uniform(-0.1, 0.1),
           %ln.weight: tensor<64xf32> = uniform(0.5, 1.5),
           %ln.bias: tensor<64xf32> = uniform(-0.1, 0.1),
           %fc2.weight: tensor<10x64xf32> = kaiming_uniform(2.23606797749979),
           %fc2.bias: tensor<10xf32> = zeros) {
  %h = mpc.linear %x, %fc1.weight, %fc1.bias
      : tensor<16x8xf32>, tensor<64x8xf32>, tensor<64xf32>
  %n = mpc.layer_norm %h, %ln.weight, %ln.bias
      : tensor<16x64xf32>, tensor<64xf32>
  %a = mpc.relu %n : tensor<16x64xf32>
  %logits = mpc.linear %a, %fc2.weight, %fc2.bias
      : tensor<16x64xf32>, tensor<10x64xf32>, tensor<10xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<16x10xf32>, tensor<16xi32>
  mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<16x10xf32>)
}
