// An initialiser mpc does not know is reported at its name, with the list of
// the ones it does.

// RUN: not mpc compile %s --emit=mlir 2>&1 | FileCheck %s -DFILE=%s
// RUN: not mpc-opt %s 2>&1 | FileCheck %s -DFILE=%s

mpc.model @unknown_initializer
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    // CHECK: [[FILE]]:[[@LINE+1]]:34: error: custom op 'mpc.model' unknown initialiser 'glorot_uniform'; expected zeros, ones, constant, normal, uniform, kaiming_uniform, kaiming_normal, xavier_uniform or xavier_normal
    params(%w: tensor<3x8xf32> = glorot_uniform) {
  %logits = mpc.linear %x, %w : tensor<4x8xf32>, tensor<3x8xf32>
  %loss = mpc.cross_entropy %logits, %y : tensor<4x3xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
