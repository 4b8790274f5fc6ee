// A model file holds one model; a second is reported at its position, with a
// note at the first. mpc-opt, a tool for any IR, accepts the file.
// not-trainable: two models in one file, the error under test.

// RUN: not mpc compile %s --emit=mlir 2>&1 | FileCheck %s -DFILE=%s
// RUN: mpc-opt %s -o /dev/null

mpc.model @first
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<3x8xf32> = normal(0.02)) {
  %logits = mpc.linear %x, %w : tensor<4x8xf32>, tensor<3x8xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x3xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}

// CHECK: [[FILE]]:[[@LINE+2]]:1: error: expects one mpc.model per file
// CHECK: [[FILE]]:[[@LINE-9]]:1: note: first model here
mpc.model @second
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<3x8xf32> = normal(0.02)) {
  %logits = mpc.linear %x, %w : tensor<4x8xf32>, tensor<3x8xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x3xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
