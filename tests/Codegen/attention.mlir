// RUN: mpc compile %s --amp=O2 --half=f16 --emit=kernels | FileCheck %s --check-prefix=KERNELS
// RUN: mpc compile %s --amp=O2 --half=f16 --emit=host | FileCheck %s --check-prefix=HOST

// The attention kernels of a QKV projection split into two heads of 16
// (B 2, T 20): each reads q, k and v in place from the projection's output
// [2, 20, 96] (batch stride 1920, head stride 16, sequence stride 96, at
// offsets 0, 32 and 64 elements), writes its output [2, 20, 2, 16] (640,
// 16, 32) and, backward, dq, dk and dv into the projection's gradient with
// the projection's strides. Tiles of 32 queries and 32 keys (20 rounded up
// to 16s), head dims 16: one block per (batch, head), a warp per 16 rows
// (64 threads). The dQ kernel runs first and leaves each query's D_i in
// the step's scratch for the dK/dV kernel.

// KERNELS-LABEL: __global__ void __launch_bounds__(64) attn_k{{[0-9]+}}_attention(
//  KERNELS-NEXT:   const mpc_attention_shape a = {2, 20, 20, 16, 16, {1920LL, 16LL, 96LL}, {1920LL, 16LL, 96LL}, {1920LL, 16LL, 96LL}, {640LL, 16LL, 32LL}, {640LL, 16LL, 32LL}, {640LL, 16LL, 32LL}, {640LL, 16LL, 32LL}, (float)2.500000000e-01f, true};
//  KERNELS-NEXT:   mpc_attention_forward<__half, 16, 16, 32, 32>(a, q, k, v, mask, o, lse);
// KERNELS-LABEL: __global__ void __launch_bounds__(64) attn_k{{[0-9]+}}_attention_grad_q(
//  KERNELS-SAME:   __half *__restrict__ dq, float *__restrict__ delta) {
//  KERNELS-NEXT:   const mpc_attention_shape a = {2, 20, 20, 16, 16,
//  KERNELS-NEXT:   mpc_attention_backward_q<__half, 16, 16, 32, 32>(a, dout, q, k, v, o, lse, mask, dq, delta);
// KERNELS-LABEL: __global__ void __launch_bounds__(64) attn_k{{[0-9]+}}_attention_grad_kv(
//  KERNELS-NEXT:   const mpc_attention_shape a = {2, 20, 20, 16, 16, {1920LL, 16LL, 96LL}, {1920LL, 16LL, 96LL}, {1920LL, 16LL, 96LL}, {640LL, 16LL, 32LL}, {1920LL, 16LL, 96LL}, {1920LL, 16LL, 96LL}, {1920LL, 16LL, 96LL}, (float)2.500000000e-01f, true};
//  KERNELS-NEXT:   mpc_attention_backward_kv<__half, 16, 16, 32, 32>(a, dout, q, k, v, o, lse, delta, mask, dk, dv);

// q, k and v are one buffer at three offsets; dk and dv land at 32 and 64
// elements into the gradient's buffer, dq at its start; D_i is passed from
// the dQ kernel to the dK/dV kernel.
// HOST-LABEL: static mpc_status attn_train_step(
//       HOST:   MPC_LAUNCH_PARALLEL(attn_k{{[0-9]+}}_attention, 4, 64, {{[0-9]+}}LL, (const __half *)(arena3 + [[QKV:[0-9]+]]), ((const __half *)(arena3 + [[QKV]]) + 32LL), ((const __half *)(arena3 + [[QKV]]) + 64LL), (const unsigned char *)0,
//       HOST:   MPC_LAUNCH_PARALLEL(attn_k{{[0-9]+}}_attention_grad_q, 4, 64, {{.*}}, (__half *)(arena3 + [[DQKV:[0-9]+]]), (float *)(arena3 + [[DELTA:[0-9]+]]));
//  HOST-NEXT:   MPC_LAUNCH_PARALLEL(attn_k{{[0-9]+}}_attention_grad_kv, 4, 64, {{.*}}, (float *)(arena3 + [[DELTA]]), ((__half *)(arena3 + [[DQKV]]) + 32LL), ((__half *)(arena3 + [[DQKV]]) + 64LL));
mpc.model @attn inputs(%x: tensor<2x20x32xf32>)
    params(%w: tensor<96x32xf32> = normal(0.1)) {
  %qkv = mpc.linear %x, %w : tensor<2x20x32xf32>, tensor<96x32xf32>
  %q = mpc.slice %qkv starts [0, 0, 0] limits [2, 20, 32] : tensor<2x20x96xf32>
  %k = mpc.slice %qkv starts [0, 0, 32] limits [2, 20, 64] : tensor<2x20x96xf32>
  %v = mpc.slice %qkv starts [0, 0, 64] limits [2, 20, 96] : tensor<2x20x96xf32>
  %q4 = mpc.reshape %q : tensor<2x20x32xf32> to tensor<2x20x2x16xf32>
  %k4 = mpc.reshape %k : tensor<2x20x32xf32> to tensor<2x20x2x16xf32>
  %v4 = mpc.reshape %v : tensor<2x20x32xf32> to tensor<2x20x2x16xf32>
  %y, %lse = mpc.attention %q4, %k4, %v4 scale 0.25 causal layout bthd
      : tensor<2x20x2x16xf32>, tensor<2x20x2x16xf32>, tensor<2x20x2x16xf32>
  %l = mpc.reduce_sum %y dims [0, 1, 2, 3] : tensor<2x20x2x16xf32>
  mpc.output loss(%l : tensor<f32>)
}
