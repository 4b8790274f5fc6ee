// RUN: mpc compile %s --emit=kernels | FileCheck %s

// An elementwise chain of one shape is one kernel. Values read only inside
// the chain stay in registers: the forward kernel stores just tanh's result
// (the backward pass needs it) and the scaled value the reduction reads. The
// broadcast operand is read through the output's coordinates.
// CHECK-LABEL: // mul, tanh, scale
//  CHECK-NEXT: __global__ void __launch_bounds__({{[0-9]+}}) chain_k{{[0-9]+}}_fused3(const float *__restrict__ in0, const float *__restrict__ in1, float *__restrict__ out2, float *__restrict__ out3) {
//  CHECK-NEXT:   MPC_FOR_EACH(i, 32LL) {
//  CHECK-NEXT:     long long c1 = (i / 1LL) % 8LL;
//  CHECK-NEXT:     float v0 = mpc_load(in0 + i);
//  CHECK-NEXT:     float v1 = mpc_load(in1 + c1 * 1LL);
//  CHECK-NEXT:     float v2 = (v0 * v1);
//  CHECK-NEXT:     float v3 = tanhf(v2);
//  CHECK-NEXT:     float v4 = (v3 * 2.000000000e+00f);
//  CHECK-NEXT:     mpc_store(out2 + i, v3);
//  CHECK-NEXT:     mpc_store(out3 + i, v4);
//  CHECK-NEXT:   }
//  CHECK-NEXT: }
mpc.model @chain inputs(%x: tensor<4x8xf32>) params(%w: tensor<8xf32> = normal(1.0)) {
  %a = mpc.mul %x, %w : tensor<4x8xf32>, tensor<8xf32>
  %b = mpc.tanh %a : tensor<4x8xf32>
  %c = mpc.scale %b by 2.0 : tensor<4x8xf32>
  %s = mpc.reduce_sum %c dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%s : tensor<f32>)
}
