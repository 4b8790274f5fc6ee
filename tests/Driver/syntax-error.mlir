// A syntax error is reported at its line and column, by mpc and mpc-opt alike.

// RUN: not mpc compile %s --emit=mlir 2>&1 | FileCheck %s -DFILE=%s
// RUN: not mpc-opt %s 2>&1 | FileCheck %s -DFILE=%s

mpc.model @missing_colon
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<3x8xf32> = normal(0.02)) {
  // CHECK: [[FILE]]:[[@LINE+1]]:30: error: expected ':'
  %logits = mpc.linear %x, %w tensor<4x8xf32>, tensor<3x8xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x3xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
