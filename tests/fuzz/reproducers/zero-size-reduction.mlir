// mpc-fuzz: --amp=O2 --half=bf16 --optimizer=sgd --emit=kernels
// Issue 12: a zero-size dimension passed the verifiers, and code generation
// divided by the reduced extent 0 (SIGFPE in emitReduce). Now a located
// error.
mpc.model @zero_extent_reduction
    inputs(%x: tensor<4x0xf32>, %y: tensor<4xi32>)
    params(%w: tensor<8x4xf32> = kaiming_uniform(2.23606797749979)) {
  %s = mpc.reduce_sum %x dims [1] : tensor<4x0xf32>
  %r = mpc.reshape %s : tensor<4xf32> to tensor<1x4xf32>
  %b = mpc.broadcast %r : tensor<1x4xf32> to tensor<4x4xf32>
  %h = mpc.linear %b, %w : tensor<4x4xf32>, tensor<8x4xf32>
  %loss = mpc.cross_entropy %h, %y : tensor<4x8xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
