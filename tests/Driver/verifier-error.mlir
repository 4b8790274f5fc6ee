// An error found by an op's verifier, after parsing, is reported at the op.

// RUN: not mpc compile %s --emit=mlir 2>&1 | FileCheck %s -DFILE=%s
// RUN: not mpc-opt %s 2>&1 | FileCheck %s -DFILE=%s

mpc.model @softmax_c1
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<3x8xf32> = normal(0.02)) {
  %logits = mpc.linear %x, %w : tensor<4x8xf32>, tensor<3x8xf32>
  // CHECK: [[FILE]]:[[@LINE+1]]:11: error: 'mpc.softmax' op expects dim in [0, 2), got 2
  %prob = mpc.softmax %logits dim 2 : tensor<4x3xf32>
  %loss = mpc.cross_entropy %prob, %y : tensor<4x3xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
