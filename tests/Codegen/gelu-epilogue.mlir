// RUN: mpc compile %s --emit=host | FileCheck %s

// A linear whose output feeds a tanh GELU becomes one GEMM with the bias
// and the GELU in its epilogue (mpc_rt_gemm_bias_gelu; cuBLASLt's
// GELU_AUX_BIAS on the cuda target): it writes the GELU's input, which the
// backward pass reads, and its output, and no gelu kernel runs. Only where
// the epilogue computes what the model says: a bias of the output's type,
// the tanh approximation, and a leading dimension divisible by 8 (cuBLASLt's
// rule for the GELU input it writes).
mpc.model @gelus inputs(%x: tensor<4x8xf32>)
    params(%fused.weight: tensor<16x8xf32> = normal(0.1),
           %fused.bias: tensor<16xf32> = zeros,
           %nobias.weight: tensor<16x8xf32> = normal(0.1),
           %twelve.weight: tensor<12x8xf32> = normal(0.1),
           %twelve.bias: tensor<12xf32> = zeros,
           %erf.weight: tensor<16x8xf32> = normal(0.1),
           %erf.bias: tensor<16xf32> = zeros) {
  %a = mpc.linear %x, %fused.weight, %fused.bias
      : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>
  %ga = mpc.gelu %a approximate tanh : tensor<4x16xf32>
  %b = mpc.linear %x, %nobias.weight : tensor<4x8xf32>, tensor<16x8xf32>
  %gb = mpc.gelu %b approximate tanh : tensor<4x16xf32>
  %c = mpc.linear %x, %twelve.weight, %twelve.bias
      : tensor<4x8xf32>, tensor<12x8xf32>, tensor<12xf32>
  %gc = mpc.gelu %c approximate tanh : tensor<4x12xf32>
  %d = mpc.linear %x, %erf.weight, %erf.bias
      : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>
  %gd = mpc.gelu %d : tensor<4x16xf32>
  %sa = mpc.reduce_sum %ga dims [0, 1] : tensor<4x16xf32>
  %sb = mpc.reduce_sum %gb dims [0, 1] : tensor<4x16xf32>
  %sc = mpc.reduce_sum %gc dims [0, 1] : tensor<4x12xf32>
  %sd = mpc.reduce_sum %gd dims [0, 1] : tensor<4x16xf32>
  %s0 = mpc.add %sa, %sb : tensor<f32>, tensor<f32>
  %s1 = mpc.add %s0, %sc : tensor<f32>, tensor<f32>
  %s2 = mpc.add %s1, %sd : tensor<f32>, tensor<f32>
  mpc.output loss(%s2 : tensor<f32>)
}

// CHECK-LABEL: static mpc_status gelus_train_step(
//       CHECK:   MPC_CHECK(mpc_rt_gemm_bias_gelu(MPC_F32, MPC_F32, MPC_F32, 0, 1, 4LL, 16LL, 8LL, 1.0f, (const float *)(arena3 + 0), 8LL, 32LL, (const float *)(arena0 + 0), 8LL, 128LL, (const float *)(arena0 + 512), (float *)(arena3 + [[PRE:[0-9]+]]), 16LL, 64LL, 1LL, (float *)(arena3 + [[OUT:[0-9]+]])));
// No bias: a plain GEMM, then the GELU kernel.
//  CHECK-NEXT:   MPC_CHECK(mpc_rt_gemm(MPC_F32, MPC_F32, MPC_F32, 0, 1, 4LL, 16LL, 8LL,
//  CHECK-NEXT:   MPC_LAUNCH(gelus_k{{[0-9]+}}_gelu,
// 12 columns: the bias in the epilogue, the GELU a kernel.
//  CHECK-NEXT:   MPC_CHECK(mpc_rt_gemm_bias(MPC_F32, MPC_F32, MPC_F32, 0, 1, 4LL, 12LL, 8LL,
//  CHECK-NEXT:   MPC_LAUNCH(gelus_k{{[0-9]+}}_gelu,
// The exact (erf) GELU is not the epilogue's.
//  CHECK-NEXT:   MPC_CHECK(mpc_rt_gemm_bias(MPC_F32, MPC_F32, MPC_F32, 0, 1, 4LL, 16LL, 8LL,
//  CHECK-NEXT:   MPC_LAUNCH(gelus_k{{[0-9]+}}_gelu,
// The backward pass reads the GELU input the fused GEMM wrote.
//       CHECK:   MPC_LAUNCH(gelus_k{{[0-9]+}}_gelu_grad, 1, 256, (const float *)(arena3 + {{[0-9]+}}), (const float *)(arena3 + [[PRE]]),

// Evaluation fuses the same way.
// CHECK-LABEL: static mpc_status gelus_eval(
//       CHECK:   MPC_CHECK(mpc_rt_gemm_bias_gelu(
