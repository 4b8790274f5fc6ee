// The attention kernels' tiles are sized for head dims up to 128: a larger
// one is an error at the op, with a nonzero exit, on either target.

// RUN: not mpc compile %s -o %t 2>&1 | FileCheck %s -DFILE=%s
// RUN: not mpc compile %s --target=cuda -o %t 2>&1 | FileCheck %s -DFILE=%s

mpc.model @wide_heads
    inputs(%r: tensor<1x2x16x256xf32>)
    params(%q: tensor<1x2x16x256xf32> = normal(1.0)) {
  // CHECK: [[FILE]]:[[@LINE+1]]:14: error: the attention kernels support head dims up to 128, got 256 and 256
  %y, %lse = mpc.attention %q, %q, %q scale 0.0625 causal : tensor<1x2x16x256xf32>, tensor<1x2x16x256xf32>, tensor<1x2x16x256xf32>
  %p = mpc.mul %y, %r : tensor<1x2x16x256xf32>, tensor<1x2x16x256xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<1x2x16x256xf32>
  mpc.output loss(%loss : tensor<f32>)
}
