// RUN: mpc compile %s --report | FileCheck %s

// A GEMM whose operands fit in memory (2^45 bytes each) but which does
// 2^67 FLOPs: the count saturates at INT64_MAX instead of overflowing (it
// read 0), and the step's total with it.
// CHECK: mpc_rt_gemm {{.*}} mpc.matmul {{.*}} 9223372036854775807 {{.*}} compute
// CHECK: Step total: 9223372036854775807 FLOPs
mpc.model @huge_gemm inputs(%a: tensor<4194304x4194304xf16>, %b: tensor<4194304x4194304xf16>) params() {
  %c = mpc.matmul %a, %b : tensor<4194304x4194304xf16>, tensor<4194304x4194304xf16>
  %l = mpc.reduce_sum %c dims [0, 1] : tensor<4194304x4194304xf16>
  %w = mpc.cast %l : tensor<f16> to tensor<f32>
  mpc.output loss(%w : tensor<f32>)
}
