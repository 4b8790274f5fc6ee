// examples/resnet.mlir parses, verifies and round-trips through the custom and
// the generic form; `mpc compile --emit=mlir` prints the same model; and the
// precision policy puts exactly its convolutions and its fc in `lower` and
// its batch norms and loss in `keep_f32`.

// RUN: mpc-opt %examples/resnet.mlir | mpc-opt | FileCheck %s
// RUN: mpc-opt --mlir-print-op-generic %examples/resnet.mlir | mpc-opt | FileCheck %s
// RUN: mpc compile %examples/resnet.mlir --emit=mlir | FileCheck %s
// RUN: mpc-opt --mlir-print-op-generic %examples/resnet.mlir \
// RUN:   | FileCheck %s --check-prefix=GENERIC
// RUN: mpc-opt --mpc-test-precision-policy --mlir-print-op-on-diagnostic=false \
// RUN:     %examples/resnet.mlir -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LOWER \
// RUN:       --implicit-check-not="precision: lower"
// RUN: mpc-opt --mpc-test-precision-policy --mlir-print-op-on-diagnostic=false \
// RUN:     %examples/resnet.mlir -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=KEEP \
// RUN:       --implicit-check-not="precision: keep_f32"

// The inputs, every parameter and every state tensor, in order, with its
// initialiser: these names are the checkpoint's (torchvision's) tensor names.
// CHECK-LABEL: mpc.model @resnet
//  CHECK-NEXT:   inputs(%images: tensor<8x3x32x32xf32>, %labels: tensor<8xi32>)
//  CHECK-NEXT:   params(%conv1.weight: tensor<16x3x3x3xf32> = kaiming_normal,
//  CHECK-NEXT:          %bn1.weight: tensor<16xf32> = ones,
//  CHECK-NEXT:          %bn1.bias: tensor<16xf32> = zeros,
//  CHECK-NEXT:          %layer1.0.conv1.weight: tensor<16x16x3x3xf32> = kaiming_normal,
//  CHECK-NEXT:          %layer1.0.bn1.weight: tensor<16xf32> = ones,
//  CHECK-NEXT:          %layer1.0.bn1.bias: tensor<16xf32> = zeros,
//  CHECK-NEXT:          %layer1.0.conv2.weight: tensor<16x16x3x3xf32> = kaiming_normal,
//  CHECK-NEXT:          %layer1.0.bn2.weight: tensor<16xf32> = ones,
//  CHECK-NEXT:          %layer1.0.bn2.bias: tensor<16xf32> = zeros,
//  CHECK-NEXT:          %layer2.0.conv1.weight: tensor<32x16x3x3xf32> = kaiming_normal,
//  CHECK-NEXT:          %layer2.0.bn1.weight: tensor<32xf32> = ones,
//  CHECK-NEXT:          %layer2.0.bn1.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %layer2.0.conv2.weight: tensor<32x32x3x3xf32> = kaiming_normal,
//  CHECK-NEXT:          %layer2.0.bn2.weight: tensor<32xf32> = ones,
//  CHECK-NEXT:          %layer2.0.bn2.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %layer2.0.downsample.0.weight: tensor<32x16x1x1xf32> = kaiming_normal,
//  CHECK-NEXT:          %layer2.0.downsample.1.weight: tensor<32xf32> = ones,
//  CHECK-NEXT:          %layer2.0.downsample.1.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %fc.weight: tensor<10x32xf32> = kaiming_uniform(2.23606797749979),
//  CHECK-NEXT:          %fc.bias: tensor<10xf32> = uniform(-0.1768, 0.1768))
//  CHECK-NEXT:   state(%bn1.running_mean: tensor<16xf32> = zeros,
//  CHECK-NEXT:         %bn1.running_var: tensor<16xf32> = ones,
//  CHECK-NEXT:         %layer1.0.bn1.running_mean: tensor<16xf32> = zeros,
//  CHECK-NEXT:         %layer1.0.bn1.running_var: tensor<16xf32> = ones,
//  CHECK-NEXT:         %layer1.0.bn2.running_mean: tensor<16xf32> = zeros,
//  CHECK-NEXT:         %layer1.0.bn2.running_var: tensor<16xf32> = ones,
//  CHECK-NEXT:         %layer2.0.bn1.running_mean: tensor<32xf32> = zeros,
//  CHECK-NEXT:         %layer2.0.bn1.running_var: tensor<32xf32> = ones,
//  CHECK-NEXT:         %layer2.0.bn2.running_mean: tensor<32xf32> = zeros,
//  CHECK-NEXT:         %layer2.0.bn2.running_var: tensor<32xf32> = ones,
//  CHECK-NEXT:         %layer2.0.downsample.1.running_mean: tensor<32xf32> = zeros,
//  CHECK-NEXT:         %layer2.0.downsample.1.running_var: tensor<32xf32> = ones) {

// Stem: conv3x3 + bn + relu at 32x32, then a 3x3 / 2 max pool to 16x16.
//  CHECK-NEXT:   %[[STEM_CONV:.*]] = mpc.conv2d %images, %conv1.weight padding [1, 1] : tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>
//  CHECK-NEXT:   %[[STEM_BN:.*]] = mpc.batch_norm %[[STEM_CONV]], %bn1.weight, %bn1.bias, %bn1.running_mean, %bn1.running_var : tensor<8x16x32x32xf32>, tensor<16xf32>
//  CHECK-NEXT:   %[[STEM_RELU:.*]] = mpc.relu %[[STEM_BN]] : tensor<8x16x32x32xf32>
//  CHECK-NEXT:   %[[STEM:.*]] = mpc.max_pool2d %[[STEM_RELU]] kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<8x16x32x32xf32>

// layer1: the identity shortcut adds the block's input.
//  CHECK-NEXT:   %[[L1_CONV1:.*]] = mpc.conv2d %[[STEM]], %layer1.0.conv1.weight padding [1, 1] : tensor<8x16x16x16xf32>, tensor<16x16x3x3xf32>
//  CHECK-NEXT:   %[[L1_BN1:.*]] = mpc.batch_norm %[[L1_CONV1]], %layer1.0.bn1.weight, %layer1.0.bn1.bias, %layer1.0.bn1.running_mean, %layer1.0.bn1.running_var : tensor<8x16x16x16xf32>, tensor<16xf32>
//  CHECK-NEXT:   %[[L1_RELU1:.*]] = mpc.relu %[[L1_BN1]] : tensor<8x16x16x16xf32>
//  CHECK-NEXT:   %[[L1_CONV2:.*]] = mpc.conv2d %[[L1_RELU1]], %layer1.0.conv2.weight padding [1, 1] : tensor<8x16x16x16xf32>, tensor<16x16x3x3xf32>
//  CHECK-NEXT:   %[[L1_BN2:.*]] = mpc.batch_norm %[[L1_CONV2]], %layer1.0.bn2.weight, %layer1.0.bn2.bias, %layer1.0.bn2.running_mean, %layer1.0.bn2.running_var : tensor<8x16x16x16xf32>, tensor<16xf32>
//  CHECK-NEXT:   %[[L1_SUM:.*]] = mpc.add %[[L1_BN2]], %[[STEM]] : tensor<8x16x16x16xf32>, tensor<8x16x16x16xf32>
//  CHECK-NEXT:   %[[L1:.*]] = mpc.relu %[[L1_SUM]] : tensor<8x16x16x16xf32>

// layer2: stride 2 to 8x8 and 32 channels; the shortcut is a strided 1x1
// conv + bn of the block's input.
//  CHECK-NEXT:   %[[L2_CONV1:.*]] = mpc.conv2d %[[L1]], %layer2.0.conv1.weight stride [2, 2] padding [1, 1] : tensor<8x16x16x16xf32>, tensor<32x16x3x3xf32>
//  CHECK-NEXT:   %[[L2_BN1:.*]] = mpc.batch_norm %[[L2_CONV1]], %layer2.0.bn1.weight, %layer2.0.bn1.bias, %layer2.0.bn1.running_mean, %layer2.0.bn1.running_var : tensor<8x32x8x8xf32>, tensor<32xf32>
//  CHECK-NEXT:   %[[L2_RELU1:.*]] = mpc.relu %[[L2_BN1]] : tensor<8x32x8x8xf32>
//  CHECK-NEXT:   %[[L2_CONV2:.*]] = mpc.conv2d %[[L2_RELU1]], %layer2.0.conv2.weight padding [1, 1] : tensor<8x32x8x8xf32>, tensor<32x32x3x3xf32>
//  CHECK-NEXT:   %[[L2_BN2:.*]] = mpc.batch_norm %[[L2_CONV2]], %layer2.0.bn2.weight, %layer2.0.bn2.bias, %layer2.0.bn2.running_mean, %layer2.0.bn2.running_var : tensor<8x32x8x8xf32>, tensor<32xf32>
//  CHECK-NEXT:   %[[L2_PROJ:.*]] = mpc.conv2d %[[L1]], %layer2.0.downsample.0.weight stride [2, 2] : tensor<8x16x16x16xf32>, tensor<32x16x1x1xf32>
//  CHECK-NEXT:   %[[L2_SHORT:.*]] = mpc.batch_norm %[[L2_PROJ]], %layer2.0.downsample.1.weight, %layer2.0.downsample.1.bias, %layer2.0.downsample.1.running_mean, %layer2.0.downsample.1.running_var : tensor<8x32x8x8xf32>, tensor<32xf32>
//  CHECK-NEXT:   %[[L2_SUM:.*]] = mpc.add %[[L2_BN2]], %[[L2_SHORT]] : tensor<8x32x8x8xf32>, tensor<8x32x8x8xf32>
//  CHECK-NEXT:   %[[L2:.*]] = mpc.relu %[[L2_SUM]] : tensor<8x32x8x8xf32>

// Head: global average pool, flatten, fc, loss.
//  CHECK-NEXT:   %[[POOLED:.*]] = mpc.avg_pool2d %[[L2]] kernel [8, 8] : tensor<8x32x8x8xf32>
//  CHECK-NEXT:   %[[FEATURES:.*]] = mpc.reshape %[[POOLED]] : tensor<8x32x1x1xf32> to tensor<8x32xf32>
//  CHECK-NEXT:   %[[LOGITS:.*]] = mpc.linear %[[FEATURES]], %fc.weight, %fc.bias : tensor<8x32xf32>, tensor<10x32xf32>, tensor<10xf32>
//  CHECK-NEXT:   %[[LOSS:.*]] = mpc.cross_entropy %[[LOGITS]], %labels : tensor<8x10xf32>, tensor<8xi32>
//  CHECK-NEXT:   mpc.output loss(%[[LOSS]] : tensor<f32>) logits(%[[LOGITS]] : tensor<8x10xf32>)
//  CHECK-NEXT: }

// Inferred result types, which the custom form leaves implicit.
// GENERIC-LABEL: "mpc.model"()
// GENERIC-SAME:    input_names = ["images", "labels"]
// GENERIC-SAME:    state_names = ["bn1.running_mean", "bn1.running_var", "layer1.0.bn1.running_mean", "layer1.0.bn1.running_var", "layer1.0.bn2.running_mean", "layer1.0.bn2.running_var", "layer2.0.bn1.running_mean", "layer2.0.bn1.running_var", "layer2.0.bn2.running_mean", "layer2.0.bn2.running_var", "layer2.0.downsample.1.running_mean", "layer2.0.downsample.1.running_var"]
// GENERIC-SAME:    sym_name = "resnet"
//      GENERIC:  "mpc.conv2d"({{.*}}) <{padding = array<i64: 1, 1>}> : (tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<8x16x32x32xf32>
//      GENERIC:  "mpc.max_pool2d"({{.*}}) <{kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}> : (tensor<8x16x32x32xf32>) -> tensor<8x16x16x16xf32>
//      GENERIC:  "mpc.conv2d"({{.*}}) <{padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}> : (tensor<8x16x16x16xf32>, tensor<32x16x3x3xf32>) -> tensor<8x32x8x8xf32>
//      GENERIC:  "mpc.conv2d"({{.*}}) <{stride = array<i64: 2, 2>}> : (tensor<8x16x16x16xf32>, tensor<32x16x1x1xf32>) -> tensor<8x32x8x8xf32>
//      GENERIC:  "mpc.avg_pool2d"({{.*}}) <{kernel = array<i64: 8, 8>}> : (tensor<8x32x8x8xf32>) -> tensor<8x32x1x1xf32>
//      GENERIC:  "mpc.linear"({{.*}}) : (tensor<8x32xf32>, tensor<10x32xf32>, tensor<10xf32>) -> tensor<8x10xf32>
//      GENERIC:  "mpc.cross_entropy"({{.*}}) : (tensor<8x10xf32>, tensor<8xi32>) -> tensor<f32>

// The six convolutions and the fc, and nothing else, are `lower` with f32
// accumulation.
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %stem_conv = mpc.conv2d
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %l1_conv1 = mpc.conv2d
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %l1_conv2 = mpc.conv2d
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %l2_conv1 = mpc.conv2d
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %l2_conv2 = mpc.conv2d
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %l2_proj = mpc.conv2d
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %logits = mpc.linear

// The six batch norms and the loss stay in f32.
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %stem_bn = mpc.batch_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %l1_bn1 = mpc.batch_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %l1_bn2 = mpc.batch_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %l2_bn1 = mpc.batch_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %l2_bn2 = mpc.batch_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %l2_short = mpc.batch_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %loss = mpc.cross_entropy
