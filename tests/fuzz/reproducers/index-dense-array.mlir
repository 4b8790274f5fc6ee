// mpc-fuzz: --amp=O0 --optimizer=sgd --report
// Issue 12: MLIR 22's parser segfaults on array<index: ...>
// (llvm/llvm-project#179045). Now a located error before parsing.
mpc.model @index_array
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<8x8xf32> = zeros) {
  %h = mpc.linear %x, %w {padding = array<index: -1, -1>} : tensor<4x8xf32>, tensor<8x8xf32>
  %loss = mpc.cross_entropy %h, %y : tensor<4x8xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
