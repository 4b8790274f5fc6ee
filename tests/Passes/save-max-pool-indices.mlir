// RUN: mpc-opt %s -split-input-file -mpc-autodiff -mpc-save-max-pool-indices | FileCheck %s

// The forward pooling stores each window's argmax; the gradient routes
// through it and no longer reads the pooled input.
// CHECK-LABEL: mpc.model @saved
//       CHECK:   %[[H:.*]] = mpc.mul %x, %w
//       CHECK:   %[[Y:.*]], %[[I:.*]] = mpc.max_pool2d_with_indices %[[H]] kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x3x7x7xf32>
//       CHECK:   mpc.reduce_sum %[[Y]]
//   CHECK-NOT:   mpc.max_pool2d_grad
//       CHECK:   mpc.max_pool2d_indices_grad %{{.*}}, %[[I]] kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x3x4x4xf32>, tensor<2x3x4x4xi8> -> tensor<2x3x7x7xf32>
mpc.model @saved
    inputs(%x: tensor<2x3x7x7xf32>)
    params(%w: tensor<2x3x7x7xf32> = ones) {
  %h = mpc.mul %x, %w : tensor<2x3x7x7xf32>, tensor<2x3x7x7xf32>
  %y = mpc.max_pool2d %h kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x3x7x7xf32>
  %s = mpc.reduce_sum %y dims [0, 1, 2, 3] : tensor<2x3x4x4xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// ceil_mode, whose last windows run past the padding, and a bf16 pooling:
// the indices are the windows' positions whatever the element type.
// CHECK-LABEL: mpc.model @ceil_mode
//       CHECK:   %[[Y:.*]], %[[I:.*]] = mpc.max_pool2d_with_indices %{{.*}} kernel [3, 2] stride [2, 2] padding [1, 0] ceil_mode : tensor<1x1x6x5xbf16>
//       CHECK:   mpc.max_pool2d_indices_grad %{{.*}}, %[[I]] kernel [3, 2] stride [2, 2] padding [1, 0] : tensor<1x1x4x3xbf16>, tensor<1x1x4x3xi8> -> tensor<1x1x6x5xbf16>
mpc.model @ceil_mode
    inputs(%x: tensor<1x1x6x5xbf16>)
    params(%w: tensor<1x1x6x5xbf16> = ones) {
  %h = mpc.mul %x, %w : tensor<1x1x6x5xbf16>, tensor<1x1x6x5xbf16>
  %y = mpc.max_pool2d %h kernel [3, 2] stride [2, 2] padding [1, 0] ceil_mode : tensor<1x1x6x5xbf16>
  %f = mpc.cast %y : tensor<1x1x4x3xbf16> to tensor<1x1x4x3xf32>
  %s = mpc.reduce_sum %f dims [0, 1, 2, 3] : tensor<1x1x4x3xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// A global pooling (a warp reduces each plane, and reads it once either
// way) and a window of more than 127 elements (its position does not fit a
// byte) keep finding their maxima again.
// CHECK-LABEL: mpc.model @left_alone
//   CHECK-NOT:   mpc.max_pool2d_with_indices
//       CHECK:   mpc.max_pool2d %{{.*}} kernel [5, 7] : tensor<2x3x5x7xf32>
//       CHECK:   mpc.max_pool2d %{{.*}} kernel [12, 12] stride [4, 4] : tensor<1x1x16x16xf32>
//   CHECK-NOT:   mpc.max_pool2d_indices_grad
//       CHECK:   mpc.max_pool2d_grad
//       CHECK:   mpc.max_pool2d_grad
mpc.model @left_alone
    inputs(%x: tensor<2x3x5x7xf32>, %z: tensor<1x1x16x16xf32>)
    params(%w: tensor<2x3x5x7xf32> = ones, %v: tensor<1x1x16x16xf32> = ones) {
  %h = mpc.mul %x, %w : tensor<2x3x5x7xf32>, tensor<2x3x5x7xf32>
  %y = mpc.max_pool2d %h kernel [5, 7] : tensor<2x3x5x7xf32>
  %s = mpc.reduce_sum %y dims [0, 1, 2, 3] : tensor<2x3x1x1xf32>
  %g = mpc.mul %z, %v : tensor<1x1x16x16xf32>, tensor<1x1x16x16xf32>
  %p = mpc.max_pool2d %g kernel [12, 12] stride [4, 4] : tensor<1x1x16x16xf32>
  %t = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<1x1x2x2xf32>
  %l = mpc.add %s, %t : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Two poolings of one input with different windows: each gradient reads
// its own forward's indices.
// CHECK-LABEL: mpc.model @two_windows
//       CHECK:   %[[Y0:.*]], %[[I0:.*]] = mpc.max_pool2d_with_indices %[[H:.*]] kernel [2, 2] : tensor<1x2x4x4xf32>
//       CHECK:   %[[Y1:.*]], %[[I1:.*]] = mpc.max_pool2d_with_indices %[[H]] kernel [3, 3] stride [1, 1] padding [1, 1] : tensor<1x2x4x4xf32>
//   CHECK-DAG:   mpc.max_pool2d_indices_grad %{{.*}}, %[[I1]] kernel [3, 3] stride [1, 1] padding [1, 1] : tensor<1x2x4x4xf32>, tensor<1x2x4x4xi8> -> tensor<1x2x4x4xf32>
//   CHECK-DAG:   mpc.max_pool2d_indices_grad %{{.*}}, %[[I0]] kernel [2, 2] stride [2, 2] padding [0, 0] : tensor<1x2x2x2xf32>, tensor<1x2x2x2xi8> -> tensor<1x2x4x4xf32>
mpc.model @two_windows
    inputs(%x: tensor<1x2x4x4xf32>)
    params(%w: tensor<1x2x4x4xf32> = ones) {
  %h = mpc.mul %x, %w : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>
  %y0 = mpc.max_pool2d %h kernel [2, 2] : tensor<1x2x4x4xf32>
  %y1 = mpc.max_pool2d %h kernel [3, 3] stride [1, 1] padding [1, 1] : tensor<1x2x4x4xf32>
  %s0 = mpc.reduce_sum %y0 dims [0, 1, 2, 3] : tensor<1x2x2x2xf32>
  %s1 = mpc.reduce_sum %y1 dims [0, 1, 2, 3] : tensor<1x2x4x4xf32>
  %l = mpc.add %s0, %s1 : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}
