// A small ResNet for 3x32x32 images (CIFAR-10 sized), batch 8, 10 classes,
// in the layout of torchvision's ResNet with one BasicBlock per stage:
//
//   stem    conv3x3(3 -> 16) + bn + relu, max_pool 3x3 stride 2   [8, 16, 16, 16]
//   layer1  basic block 16 -> 16, identity shortcut                [8, 16, 16, 16]
//   layer2  basic block 16 -> 32, stride 2, shortcut conv1x1 + bn  [8, 32, 8, 8]
//   head    global avg_pool 8x8 -> [8, 32] -> fc -> [8, 10] -> cross_entropy
//
// A basic block is relu(bn(conv3x3(relu(bn(conv3x3(x))))) + shortcut(x)).
// Convolutions followed by batch norm have no bias. Batch-norm running
// statistics are model state (updated in training, not trained) and start
// as PyTorch's: mean 0, variance 1. Names are torchvision's, so a checkpoint
// maps onto `torchvision.models.resnet.ResNet` tensors one to one. Conv
// weights use kaiming_normal (fan-in, gain sqrt(2)); fc keeps nn.Linear's
// default init. 19,994 parameters and 288 state values.
mpc.model @resnet
    inputs(%images: tensor<8x3x32x32xf32>, %labels: tensor<8xi32>)
    params(%conv1.weight: tensor<16x3x3x3xf32> = kaiming_normal,
           %bn1.weight: tensor<16xf32> = ones,
           %bn1.bias: tensor<16xf32> = zeros,
           %layer1.0.conv1.weight: tensor<16x16x3x3xf32> = kaiming_normal,
           %layer1.0.bn1.weight: tensor<16xf32> = ones,
           %layer1.0.bn1.bias: tensor<16xf32> = zeros,
           %layer1.0.conv2.weight: tensor<16x16x3x3xf32> = kaiming_normal,
           %layer1.0.bn2.weight: tensor<16xf32> = ones,
           %layer1.0.bn2.bias: tensor<16xf32> = zeros,
           %layer2.0.conv1.weight: tensor<32x16x3x3xf32> = kaiming_normal,
           %layer2.0.bn1.weight: tensor<32xf32> = ones,
           %layer2.0.bn1.bias: tensor<32xf32> = zeros,
           %layer2.0.conv2.weight: tensor<32x32x3x3xf32> = kaiming_normal,
           %layer2.0.bn2.weight: tensor<32xf32> = ones,
           %layer2.0.bn2.bias: tensor<32xf32> = zeros,
           %layer2.0.downsample.0.weight: tensor<32x16x1x1xf32> = kaiming_normal,
           %layer2.0.downsample.1.weight: tensor<32xf32> = ones,
           %layer2.0.downsample.1.bias: tensor<32xf32> = zeros,
           %fc.weight: tensor<10x32xf32> = kaiming_uniform(2.23606797749979),
           %fc.bias: tensor<10xf32> = uniform(-0.1768, 0.1768))
    state(%bn1.running_mean: tensor<16xf32> = zeros,
          %bn1.running_var: tensor<16xf32> = ones,
          %layer1.0.bn1.running_mean: tensor<16xf32> = zeros,
          %layer1.0.bn1.running_var: tensor<16xf32> = ones,
          %layer1.0.bn2.running_mean: tensor<16xf32> = zeros,
          %layer1.0.bn2.running_var: tensor<16xf32> = ones,
          %layer2.0.bn1.running_mean: tensor<32xf32> = zeros,
          %layer2.0.bn1.running_var: tensor<32xf32> = ones,
          %layer2.0.bn2.running_mean: tensor<32xf32> = zeros,
          %layer2.0.bn2.running_var: tensor<32xf32> = ones,
          %layer2.0.downsample.1.running_mean: tensor<32xf32> = zeros,
          %layer2.0.downsample.1.running_var: tensor<32xf32> = ones) {
  //===--------------------------------------------------------------------===//
  // Stem
  //===--------------------------------------------------------------------===//
  %stem_conv = mpc.conv2d %images, %conv1.weight padding [1, 1]
      : tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>
  %stem_bn = mpc.batch_norm %stem_conv, %bn1.weight, %bn1.bias,
                            %bn1.running_mean, %bn1.running_var
      : tensor<8x16x32x32xf32>, tensor<16xf32>
  %stem_relu = mpc.relu %stem_bn : tensor<8x16x32x32xf32>
  %stem = mpc.max_pool2d %stem_relu kernel [3, 3] stride [2, 2] padding [1, 1]
      : tensor<8x16x32x32xf32>

  //===--------------------------------------------------------------------===//
  // layer1: 16 -> 16 channels at 16x16, identity shortcut
  //===--------------------------------------------------------------------===//
  %l1_conv1 = mpc.conv2d %stem, %layer1.0.conv1.weight padding [1, 1]
      : tensor<8x16x16x16xf32>, tensor<16x16x3x3xf32>
  %l1_bn1 = mpc.batch_norm %l1_conv1, %layer1.0.bn1.weight, %layer1.0.bn1.bias,
                           %layer1.0.bn1.running_mean,
                           %layer1.0.bn1.running_var
      : tensor<8x16x16x16xf32>, tensor<16xf32>
  %l1_relu1 = mpc.relu %l1_bn1 : tensor<8x16x16x16xf32>
  %l1_conv2 = mpc.conv2d %l1_relu1, %layer1.0.conv2.weight padding [1, 1]
      : tensor<8x16x16x16xf32>, tensor<16x16x3x3xf32>
  %l1_bn2 = mpc.batch_norm %l1_conv2, %layer1.0.bn2.weight, %layer1.0.bn2.bias,
                           %layer1.0.bn2.running_mean,
                           %layer1.0.bn2.running_var
      : tensor<8x16x16x16xf32>, tensor<16xf32>
  %l1_sum = mpc.add %l1_bn2, %stem : tensor<8x16x16x16xf32>, tensor<8x16x16x16xf32>
  %l1 = mpc.relu %l1_sum : tensor<8x16x16x16xf32>

  //===--------------------------------------------------------------------===//
  // layer2: 16 -> 32 channels, 16x16 -> 8x8, projection shortcut
  //===--------------------------------------------------------------------===//
  %l2_conv1 = mpc.conv2d %l1, %layer2.0.conv1.weight stride [2, 2] padding [1, 1]
      : tensor<8x16x16x16xf32>, tensor<32x16x3x3xf32>
  %l2_bn1 = mpc.batch_norm %l2_conv1, %layer2.0.bn1.weight, %layer2.0.bn1.bias,
                           %layer2.0.bn1.running_mean,
                           %layer2.0.bn1.running_var
      : tensor<8x32x8x8xf32>, tensor<32xf32>
  %l2_relu1 = mpc.relu %l2_bn1 : tensor<8x32x8x8xf32>
  %l2_conv2 = mpc.conv2d %l2_relu1, %layer2.0.conv2.weight padding [1, 1]
      : tensor<8x32x8x8xf32>, tensor<32x32x3x3xf32>
  %l2_bn2 = mpc.batch_norm %l2_conv2, %layer2.0.bn2.weight, %layer2.0.bn2.bias,
                           %layer2.0.bn2.running_mean,
                           %layer2.0.bn2.running_var
      : tensor<8x32x8x8xf32>, tensor<32xf32>
  %l2_proj = mpc.conv2d %l1, %layer2.0.downsample.0.weight stride [2, 2]
      : tensor<8x16x16x16xf32>, tensor<32x16x1x1xf32>
  %l2_short = mpc.batch_norm %l2_proj, %layer2.0.downsample.1.weight,
                             %layer2.0.downsample.1.bias,
                             %layer2.0.downsample.1.running_mean,
                             %layer2.0.downsample.1.running_var
      : tensor<8x32x8x8xf32>, tensor<32xf32>
  %l2_sum = mpc.add %l2_bn2, %l2_short : tensor<8x32x8x8xf32>, tensor<8x32x8x8xf32>
  %l2 = mpc.relu %l2_sum : tensor<8x32x8x8xf32>

  //===--------------------------------------------------------------------===//
  // Head and loss
  //===--------------------------------------------------------------------===//
  %pooled = mpc.avg_pool2d %l2 kernel [8, 8] : tensor<8x32x8x8xf32>
  %features = mpc.reshape %pooled : tensor<8x32x1x1xf32> to tensor<8x32xf32>
  %logits = mpc.linear %features, %fc.weight, %fc.bias
      : tensor<8x32xf32>, tensor<10x32xf32>, tensor<10xf32>
  %loss = mpc.cross_entropy %logits, %labels : tensor<8x10xf32>, tensor<8xi32>
  mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<8x10xf32>)
}
