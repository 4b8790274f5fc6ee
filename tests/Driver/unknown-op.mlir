// An op the mpc dialect does not define is reported where it is written.

// RUN: not mpc compile %s --emit=mlir 2>&1 | FileCheck %s -DFILE=%s
// RUN: not mpc-opt %s 2>&1 | FileCheck %s -DFILE=%s

mpc.model @unknown_op
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<3x8xf32> = normal(0.02)) {
  // CHECK: [[FILE]]:[[@LINE+1]]:13: error: custom op 'mpc.frobnicate' is unknown
  %logits = mpc.frobnicate %x, %w : tensor<4x8xf32>, tensor<3x8xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x3xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
