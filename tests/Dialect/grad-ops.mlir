// RUN: mpc-opt %s --split-input-file | FileCheck %s
// RUN: mpc-opt %s --split-input-file | mpc-opt --split-input-file | FileCheck %s
// RUN: mpc-opt %s --split-input-file --mlir-print-op-generic \
// RUN:   | mpc-opt --split-input-file | FileCheck %s

// Round trip of the backward-only ops that mpc-autodiff creates.

// CHECK-LABEL: func.func @elementwise_grads
//       CHECK:   mpc.relu_grad %{{.*}}, %{{.*}} : tensor<4x8xf32>
//       CHECK:   mpc.gelu_grad %{{.*}}, %{{.*}} : tensor<4x8xf32>
//       CHECK:   mpc.gelu_grad %{{.*}}, %{{.*}} approximate tanh : tensor<4x8xf32>
//       CHECK:   mpc.tanh_grad %{{.*}}, %{{.*}} : tensor<4x8xf32>
//       CHECK:   mpc.sigmoid_grad %{{.*}}, %{{.*}} : tensor<4x8xf32>
//       CHECK:   mpc.silu_grad %{{.*}}, %{{.*}} : tensor<4x8xf32>
//       CHECK:   mpc.clamp_grad %{{.*}}, %{{.*}} min 0.000000e+00 max 6.000000e+00 : tensor<4x8xf32>
//       CHECK:   mpc.clamp_grad %{{.*}}, %{{.*}} max 1.000000e+00 : tensor<4x8xf32>
func.func @elementwise_grads(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>) {
  %0 = mpc.relu_grad %dy, %x : tensor<4x8xf32>
  %1 = mpc.gelu_grad %dy, %x : tensor<4x8xf32>
  %2 = mpc.gelu_grad %dy, %x approximate tanh : tensor<4x8xf32>
  %3 = mpc.tanh_grad %dy, %x : tensor<4x8xf32>
  %4 = mpc.sigmoid_grad %dy, %x : tensor<4x8xf32>
  %5 = mpc.silu_grad %dy, %x : tensor<4x8xf32>
  %6 = mpc.clamp_grad %dy, %x min 0.0 max 6.0 : tensor<4x8xf32>
  %7 = mpc.clamp_grad %dy, %x max 1.0 : tensor<4x8xf32>
  return
}

// -----

// CHECK-LABEL: func.func @row_grads
//       CHECK:   mpc.softmax_grad %{{.*}}, %{{.*}} dim 1 : tensor<4x8xf32>
//       CHECK:   mpc.log_softmax_grad %{{.*}}, %{{.*}} dim 0 : tensor<4x8xf32>
//       CHECK:   mpc.cross_entropy_grad %{{.*}}, %{{.*}}, %{{.*}} ignore_index -100 : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
//       CHECK:   mpc.reduce_max_grad %{{.*}}, %{{.*}}, %{{.*}} dims [1] : tensor<4xf32>, tensor<4x8xf32>, tensor<4xf32>
//       CHECK:   mpc.reduce_max_grad %{{.*}}, %{{.*}}, %{{.*}} dims [1] keepdim : tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x1xf32>
func.func @row_grads(%dy: tensor<4x8xf32>, %y: tensor<4x8xf32>, %dl: tensor<f32>,
                     %t: tensor<4xi32>, %dm: tensor<4xf32>, %m: tensor<4xf32>,
                     %dk: tensor<4x1xf32>, %k: tensor<4x1xf32>) {
  %0 = mpc.softmax_grad %dy, %y dim 1 : tensor<4x8xf32>
  %1 = mpc.log_softmax_grad %dy, %y dim 0 : tensor<4x8xf32>
  %2 = mpc.cross_entropy_grad %dl, %y, %t ignore_index -100 : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  %3 = mpc.reduce_max_grad %dm, %y, %m dims [1] : tensor<4xf32>, tensor<4x8xf32>, tensor<4xf32>
  %4 = mpc.reduce_max_grad %dk, %y, %k dims [1] keepdim : tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x1xf32>
  return
}

// -----

// CHECK-LABEL: func.func @norm_grads
//       CHECK:   %{{.*}}, %{{.*}}, %{{.*}} = mpc.layer_norm_grad %{{.*}}, %{{.*}}, %{{.*}} eps 1.000000e-03 : tensor<2x4x8xf32>, tensor<8xf32>
//       CHECK:   %{{.*}}, %{{.*}}, %{{.*}} = mpc.batch_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x3x4x4xf32>, tensor<3xf32>
//       CHECK:   %{{.*}}, %{{.*}}, %{{.*}} = mpc.batch_norm_grad %{{.*}}, %{{.*}}, %{{.*}} stats %{{.*}} : tensor<2x3xf32> eps 1.000000e-03 : tensor<2x3x4x4xf32>, tensor<3xf32>
//       CHECK:   %{{.*}}, %{{.*}}, %{{.*}} = mpc.batch_norm_grad %{{.*}}, %{{.*}}, %{{.*}} stats %{{.*}} : tensor<2x3xf32> relu %{{.*}} : tensor<3xf32> : tensor<2x3x4x4xf32>, tensor<3xf32>
//       CHECK:   %{{.*}}, %{{.*}} = mpc.rms_norm_grad %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xf32>, tensor<8xf32>
func.func @norm_grads(%dy: tensor<2x4x8xf32>, %x: tensor<2x4x8xf32>, %g: tensor<8xf32>,
                      %dz: tensor<2x3x4x4xf32>, %z: tensor<2x3x4x4xf32>, %c: tensor<3xf32>,
                      %stats: tensor<2x3xf32>) {
  %0:3 = mpc.layer_norm_grad %dy, %x, %g eps 1.0e-3 : tensor<2x4x8xf32>, tensor<8xf32>
  %1:3 = mpc.batch_norm_grad %dz, %z, %c : tensor<2x3x4x4xf32>, tensor<3xf32>
  %3:3 = mpc.batch_norm_grad %dz, %z, %c stats %stats : tensor<2x3xf32> eps 1.0e-3 : tensor<2x3x4x4xf32>, tensor<3xf32>
  %4:3 = mpc.batch_norm_grad %dz, %z, %c stats %stats : tensor<2x3xf32> relu %c : tensor<3xf32> : tensor<2x3x4x4xf32>, tensor<3xf32>
  %2:2 = mpc.rms_norm_grad %dy, %x, %g : tensor<2x4x8xf32>, tensor<8xf32>
  return
}

// -----

// CHECK-LABEL: func.func @gather_and_window_grads
//       CHECK:   mpc.embedding_grad %{{.*}}, %{{.*}} : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<10x4xf32>
//       CHECK:   mpc.slice_grad %{{.*}} starts [0, 1] strides [1, 2] : tensor<4x3xf32> -> tensor<4x8xf32>
//       CHECK:   mpc.max_pool2d_grad %{{.*}}, %{{.*}} kernel [2, 2] stride [2, 2] padding [0, 0] : tensor<1x2x2x2xf32>, tensor<1x2x4x4xf32>
//       CHECK:   mpc.avg_pool2d_grad %{{.*}} kernel [2, 2] stride [2, 2] padding [0, 0] : tensor<1x2x2x2xf32> -> tensor<1x2x4x4xf32>
//       CHECK:   %{{.*}}, %[[I:.*]] = mpc.max_pool2d_with_indices %{{.*}} kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<1x2x4x4xf32>
//       CHECK:   mpc.max_pool2d_indices_grad %{{.*}}, %[[I]] kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<1x2x2x2xf32>, tensor<1x2x2x2xi8> -> tensor<1x2x4x4xf32>
func.func @gather_and_window_grads(%de: tensor<2x3x4xf32>, %ids: tensor<2x3xi32>,
                                   %ds: tensor<4x3xf32>, %dp: tensor<1x2x2x2xf32>,
                                   %x: tensor<1x2x4x4xf32>) {
  %0 = mpc.embedding_grad %de, %ids : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<10x4xf32>
  %1 = mpc.slice_grad %ds starts [0, 1] strides [1, 2] : tensor<4x3xf32> -> tensor<4x8xf32>
  %2 = mpc.max_pool2d_grad %dp, %x kernel [2, 2] stride [2, 2] padding [0, 0] : tensor<1x2x2x2xf32>, tensor<1x2x4x4xf32>
  %3 = mpc.avg_pool2d_grad %dp kernel [2, 2] stride [2, 2] padding [0, 0] : tensor<1x2x2x2xf32> -> tensor<1x2x4x4xf32>
  %4:2 = mpc.max_pool2d_with_indices %x kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<1x2x4x4xf32>
  %5 = mpc.max_pool2d_indices_grad %dp, %4#1 kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<1x2x2x2xf32>, tensor<1x2x2x2xi8> -> tensor<1x2x4x4xf32>
  return
}

// -----

// CHECK-LABEL: func.func @conv_grads
//       CHECK:   mpc.conv2d_grad_input %{{.*}}, %{{.*}} stride [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
//       CHECK:   mpc.conv2d_grad_weight %{{.*}}, %{{.*}} stride [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32> -> tensor<4x3x3x3xf32>
func.func @conv_grads(%dy: tensor<2x4x8x8xf32>, %w: tensor<4x3x3x3xf32>, %x: tensor<2x3x8x8xf32>) {
  %0 = mpc.conv2d_grad_input %dy, %w stride [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
  %1 = mpc.conv2d_grad_weight %dy, %x stride [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32> -> tensor<4x3x3x3xf32>
  return
}

// -----

// CHECK-LABEL: func.func @attention_grad
//       CHECK:   %{{.*}}, %{{.*}}, %{{.*}} = mpc.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} scale 1.250000e-01 causal layout bthd : tensor<2x16x3x8xf16>, tensor<2x16x3x8xf16>, tensor<2x16x3x8xf16>, tensor<2x16x3x8xf16>, tensor<2x3x16xf32>
func.func @attention_grad(%dy: tensor<2x16x3x8xf16>, %q: tensor<2x16x3x8xf16>,
                          %y: tensor<2x16x3x8xf16>, %lse: tensor<2x3x16xf32>) {
  %0:3 = mpc.attention_grad %dy, %q, %q, %q, %y, %lse scale 0.125 causal layout bthd : tensor<2x16x3x8xf16>, tensor<2x16x3x8xf16>, tensor<2x16x3x8xf16>, tensor<2x16x3x8xf16>, tensor<2x3x16xf32>
  return
}
