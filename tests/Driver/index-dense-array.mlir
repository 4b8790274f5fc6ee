// MLIR 22's parser segfaults on a dense array of `index`
// (llvm/llvm-project#179045). mpc and mpc-opt find it in the source first
// and report it at its location, with a nonzero exit and no stack dump. The
// same text inside a string or a comment is not an attribute.

// RUN: not mpc compile %s --emit=mlir 2>&1 | FileCheck %s --implicit-check-not="Stack dump"
// RUN: not mpc-opt %s 2>&1 | FileCheck %s --implicit-check-not="Stack dump"
// CHECK: index-dense-array.mlir:14:65: error: dense arrays of 'index' are not supported (MLIR 22's parser crashes on them); use i64, as in array<i64: ...>
// CHECK-NOT: error:

mpc.model @index_array
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<8x8xf32> = zeros) {
  %h = mpc.linear %x, %w {note = "array<index: 1>", pad = array<index: -1, -1>}
      : tensor<4x8xf32>, tensor<8x8xf32>
  %loss = mpc.cross_entropy %h, %y : tensor<4x8xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
