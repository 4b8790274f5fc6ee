// RUN: not mpc compile %s -o %t 2>&1 | FileCheck %s -DFILE=%s
// RUN: not mpc compile %s --report 2>&1 | FileCheck %s -DFILE=%s

// A model whose tensors fit in 64-bit byte counts but not in any target's
// memory (4e18 bytes each) is refused at the first tensor too large, with
// the sizes computed with overflow checks (the plan's offsets overflowed).
// CHECK: [[FILE]]:[[@LINE+1]]:29: error: a tensor of 'tensor<1000000000x1000000000xf32>' needs 4000000000000000000 bytes; more than a target can address (2^47 bytes, 128 TiB)
mpc.model @too_large inputs(%x: tensor<1000000000x1000000000xf32>) params() {
  %r = mpc.relu %x : tensor<1000000000x1000000000xf32>
  %l = mpc.reduce_sum %r dims [0, 1] : tensor<1000000000x1000000000xf32>
  mpc.output loss(%l : tensor<f32>)
}
