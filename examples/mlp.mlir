// A two-layer MLP classifier: 784 -> 256 -> 10, batch 64, as PyTorch's
// nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)) with
// F.cross_entropy. Parameter names are the tensor names in checkpoints.
mpc.model @mlp
    inputs(%x: tensor<64x784xf32>, %y: tensor<64xi32>)
    params(%fc1.weight: tensor<256x784xf32> = kaiming_uniform(2.23606797749979),
           %fc1.bias: tensor<256xf32> = uniform(-0.0357, 0.0357),
           %fc2.weight: tensor<10x256xf32> = kaiming_uniform(2.23606797749979),
           %fc2.bias: tensor<10xf32> = uniform(-0.0625, 0.0625)) {
  %h = mpc.linear %x, %fc1.weight, %fc1.bias
      : tensor<64x784xf32>, tensor<256x784xf32>, tensor<256xf32>
  %a = mpc.relu %h : tensor<64x256xf32>
  %logits = mpc.linear %a, %fc2.weight, %fc2.bias
      : tensor<64x256xf32>, tensor<10x256xf32>, tensor<10xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<64x10xf32>, tensor<64xi32>
  mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<64x10xf32>)
}
