// mpc-fuzz: --amp=O2 --half=bf16 --optimizer=sgd --emit=kernels
// Issue 12: a zero-size dimension passed the verifiers and code generation
// divided by it (SIGFPE in emitRowOp). Now a located error.
mpc.model @zero_rows
    inputs(%x: tensor<0x8xf32>, %y: tensor<0xi32>)
    params(%w: tensor<8x8xf32> = kaiming_uniform(2.23606797749979)) {
  %h = mpc.linear %x, %w : tensor<0x8xf32>, tensor<8x8xf32>
  %s = mpc.softmax %h : tensor<0x8xf32>
  %loss = mpc.cross_entropy %s, %y : tensor<0x8xf32>, tensor<0xi32>
  mpc.output loss(%loss : tensor<f32>)
}
