// A ResNet's stem on 2 images of 3x128x128: conv3x3(3 -> 4) + batch norm +
// ReLU, max pooling 3x3 stride 2 to [2, 4, 64, 64], then global average
// pooling, a linear layer and cross-entropy over 10 classes. Its batch norm
// sums 2 x 128 x 128 = 32,768 elements a channel, so the norm's gradient
// is sliced (a partials kernel, then the parameters' and the input's): in
// kernels that run as blocks (the cuda target, --emulate-blocks) the
// pooling's gradient is gathered by the partials kernel, which stores it
// for the input kernel (MemoryPlan::gatheredWhereRead), where ResNet's
// example (8,192 a channel, a block each) gathers it in registers.
mpc.model @sliced_stem
    inputs(%images: tensor<2x3x128x128xf32>, %labels: tensor<2xi32>)
    params(%conv1.weight: tensor<4x3x3x3xf32> = kaiming_normal,
           %bn1.weight: tensor<4xf32> = ones,
           %bn1.bias: tensor<4xf32> = zeros,
           %fc.weight: tensor<10x4xf32> = kaiming_uniform(2.23606797749979),
           %fc.bias: tensor<10xf32> = uniform(-0.5, 0.5))
    state(%bn1.running_mean: tensor<4xf32> = zeros,
          %bn1.running_var: tensor<4xf32> = ones) {
  %conv = mpc.conv2d %images, %conv1.weight padding [1, 1]
      : tensor<2x3x128x128xf32>, tensor<4x3x3x3xf32>
  %bn = mpc.batch_norm %conv, %bn1.weight, %bn1.bias, %bn1.running_mean,
                       %bn1.running_var
      : tensor<2x4x128x128xf32>, tensor<4xf32>
  %relu = mpc.relu %bn : tensor<2x4x128x128xf32>
  %stem = mpc.max_pool2d %relu kernel [3, 3] stride [2, 2] padding [1, 1]
      : tensor<2x4x128x128xf32>
  %pooled = mpc.avg_pool2d %stem kernel [64, 64] : tensor<2x4x64x64xf32>
  %features = mpc.reshape %pooled : tensor<2x4x1x1xf32> to tensor<2x4xf32>
  %logits = mpc.linear %features, %fc.weight, %fc.bias
      : tensor<2x4xf32>, tensor<10x4xf32>, tensor<10xf32>
  %loss = mpc.cross_entropy %logits, %labels : tensor<2x10xf32>, tensor<2xi32>
  mpc.output loss(%loss : tensor<f32>)
}
