// RUN: mpc-opt %s -split-input-file -mpc-autodiff -mpc-save-batch-norm-statistics | FileCheck %s

// The forward batch norm returns the mean and inverse deviation it
// normalised with; the gradient reads them. The ReLU's gradient becomes the
// gradient's mask, from x, the statistics and beta: the ReLU's output is
// not read again.
// CHECK-LABEL: mpc.model @saved
//       CHECK:   %[[Y:.*]], %[[STATS:.*]] = mpc.batch_norm %x, %g, %b, %mean, %var : tensor<2x3x4x4xf32>, tensor<3xf32> stats tensor<2x3xf32>
//       CHECK:   mpc.relu %[[Y]]
//   CHECK-NOT:   mpc.relu_grad
//       CHECK:   %[[DY:.*]] = mpc.broadcast
//  CHECK-NEXT:   mpc.batch_norm_grad %[[DY]], %x, %g stats %[[STATS]] : tensor<2x3xf32> relu %b : tensor<3xf32> : tensor<2x3x4x4xf32>, tensor<3xf32>
mpc.model @saved
    inputs(%x: tensor<2x3x4x4xf32>)
    params(%g: tensor<3xf32> = ones, %b: tensor<3xf32> = zeros)
    state(%mean: tensor<3xf32> = zeros, %var: tensor<3xf32> = ones) {
  %y = mpc.batch_norm %x, %g, %b, %mean, %var : tensor<2x3x4x4xf32>, tensor<3xf32>
  %r = mpc.relu %y : tensor<2x3x4x4xf32>
  %s = mpc.reduce_sum %r dims [0, 1, 2, 3] : tensor<2x3x4x4xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// Two batch norms in a row: each gradient reads its own forward's
// statistics, the eps and the bf16 running statistics kept.
// CHECK-LABEL: mpc.model @two
//       CHECK:   %[[Y0:.*]], %[[S0:.*]] = mpc.batch_norm %x, %g0, %b0, %m0, %v0 momentum 2.000000e-01 eps 1.000000e-03 : tensor<4x2xbf16>, tensor<2xbf16> running tensor<2xf32> stats tensor<2x2xf32>
//       CHECK:   %[[Y1:.*]], %[[S1:.*]] = mpc.batch_norm %[[Y0]], %g1, %b1, %m1, %v1 : tensor<4x2xbf16>, tensor<2xbf16> running tensor<2xf32> stats tensor<2x2xf32>
//       CHECK:   mpc.batch_norm_grad %{{.*}}, %[[Y0]], %g1 stats %[[S1]] : tensor<2x2xf32> : tensor<4x2xbf16>, tensor<2xbf16>
//       CHECK:   mpc.batch_norm_grad %{{.*}}, %x, %g0 stats %[[S0]] : tensor<2x2xf32> eps 1.000000e-03 : tensor<4x2xbf16>, tensor<2xbf16>
mpc.model @two
    inputs(%x: tensor<4x2xbf16>)
    params(%g0: tensor<2xbf16> = ones, %b0: tensor<2xbf16> = zeros,
           %g1: tensor<2xbf16> = ones, %b1: tensor<2xbf16> = zeros)
    state(%m0: tensor<2xf32> = zeros, %v0: tensor<2xf32> = ones,
          %m1: tensor<2xf32> = zeros, %v1: tensor<2xf32> = ones) {
  %y0 = mpc.batch_norm %x, %g0, %b0, %m0, %v0 momentum 0.2 eps 1.0e-3 : tensor<4x2xbf16>, tensor<2xbf16> running tensor<2xf32>
  %y1 = mpc.batch_norm %y0, %g1, %b1, %m1, %v1 : tensor<4x2xbf16>, tensor<2xbf16> running tensor<2xf32>
  %w = mpc.cast %y1 : tensor<4x2xbf16> to tensor<4x2xf32>
  %s = mpc.reduce_sum %w dims [0, 1] : tensor<4x2xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// A gradient whose forward op is not in the step (written by hand)
// computes its own statistics.
// CHECK-LABEL: func.func @no_forward
//       CHECK:   mpc.batch_norm_grad %arg0, %arg1, %arg2 : tensor<2x3xf32>, tensor<3xf32>
func.func @no_forward(%dy: tensor<2x3xf32>, %x: tensor<2x3xf32>, %g: tensor<3xf32>) -> tensor<2x3xf32> {
  %dx, %dg, %db = mpc.batch_norm_grad %dy, %x, %g : tensor<2x3xf32>, tensor<3xf32>
  return %dx : tensor<2x3xf32>
}

// -----

// A ReLU gradient of the batch norm's output itself (the ReLU's input,
// which mpc.relu_grad also accepts) is folded too.
// CHECK-LABEL: func.func @relu_input
//   CHECK-NOT:   mpc.relu_grad
//       CHECK:   mpc.batch_norm_grad %arg0, %arg1, %arg2 stats %{{.*}} : tensor<2x3xf32> relu %arg3 : tensor<3xf32> : tensor<4x3xf32>, tensor<3xf32>
func.func @relu_input(%dy: tensor<4x3xf32>, %x: tensor<4x3xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> tensor<4x3xf32> {
  %y = mpc.batch_norm %x, %g, %b, %m, %v : tensor<4x3xf32>, tensor<3xf32>
  %d = mpc.relu_grad %dy, %y : tensor<4x3xf32>
  %dx, %dg, %db = mpc.batch_norm_grad %d, %x, %g : tensor<4x3xf32>, tensor<3xf32>
  return %dx : tensor<4x3xf32>
}

// -----

// A ReLU gradient that something else reads too stays, and so does one of
// a residual sum after the batch norm (its mask needs the other addend).
// CHECK-LABEL: func.func @kept
//       CHECK:   %[[SHARED:.*]] = mpc.relu_grad %arg0, %{{.*}} : tensor<4x3xf32>
//       CHECK:   mpc.batch_norm_grad %[[SHARED]], %arg1, %arg2 stats %{{.*}} : tensor<2x3xf32> : tensor<4x3xf32>, tensor<3xf32>
//       CHECK:   %[[SUMMED:.*]] = mpc.relu_grad %arg0, %{{.*}} : tensor<4x3xf32>
//       CHECK:   mpc.batch_norm_grad %[[SUMMED]], %arg1, %arg6 stats %{{.*}} : tensor<2x3xf32> : tensor<4x3xf32>, tensor<3xf32>
func.func @kept(%dy: tensor<4x3xf32>, %x: tensor<4x3xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>, %g2: tensor<3xf32>, %r: tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>) {
  %y = mpc.batch_norm %x, %g, %b, %m, %v : tensor<4x3xf32>, tensor<3xf32>
  %a = mpc.relu %y : tensor<4x3xf32>
  %d = mpc.relu_grad %dy, %a : tensor<4x3xf32>
  %dx, %dg, %db = mpc.batch_norm_grad %d, %x, %g : tensor<4x3xf32>, tensor<3xf32>
  %y2 = mpc.batch_norm %x, %g2, %b, %m, %v : tensor<4x3xf32>, tensor<3xf32>
  %s = mpc.add %y2, %r : tensor<4x3xf32>, tensor<4x3xf32>
  %a2 = mpc.relu %s : tensor<4x3xf32>
  %d2 = mpc.relu_grad %dy, %a2 : tensor<4x3xf32>
  %dx2, %dg2, %db2 = mpc.batch_norm_grad %d2, %x, %g2 : tensor<4x3xf32>, tensor<3xf32>
  return %dx, %d, %dx2 : tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>
}
