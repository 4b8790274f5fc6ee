// A linear whose weight does not fit its input (linear_c2) is reported at the
// op, with both extents, while the model is parsed.

// RUN: not mpc compile %s --emit=mlir 2>&1 | FileCheck %s -DFILE=%s
// RUN: not mpc-opt %s 2>&1 | FileCheck %s -DFILE=%s

mpc.model @linear_c2
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<3x6xf32> = normal(0.02)) {
  // CHECK: [[FILE]]:[[@LINE+1]]:13: error: 'mpc.linear' op expects the input's last dim (8) to equal the weight's dim 1 (6)
  %logits = mpc.linear %x, %w : tensor<4x8xf32>, tensor<3x6xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x3xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
