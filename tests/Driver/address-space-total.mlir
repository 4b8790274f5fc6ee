// RUN: not mpc compile %s -o %t 2>&1 | FileCheck %s -DFILE=%s

// Each tensor fits (2^44 bytes), the model does not: the parameter, its
// gradient, its optimizer slots and the activations side by side.
// CHECK: [[FILE]]:[[@LINE+1]]:1: error: model @too_large_together needs {{[0-9]+}} bytes; more than a target can address (2^47 bytes, 128 TiB)
mpc.model @too_large_together inputs(%x: tensor<4096x1073741824xf32>)
    params(%w: tensor<4096x1073741824xf32> = zeros) {
  %p = mpc.mul %x, %w : tensor<4096x1073741824xf32>, tensor<4096x1073741824xf32>
  %l = mpc.reduce_sum %p dims [0, 1] : tensor<4096x1073741824xf32>
  mpc.output loss(%l : tensor<f32>)
}
