// RUN: mpc compile %s --target=cuda --arch=sm_90 --amp=O2 --half=bf16 --fp8=all --emit=kernels | FileCheck %s
// RUN: mpc compile %S/../../examples/gpt.mlir --target=cuda --arch=sm_90 --amp=O2 --half=bf16 --fp8=all --emit=kernels \
// RUN:   | FileCheck %s --check-prefix=ATTENTION

// Under current FP8 scaling, a layer norm's kernel finds the amax of what
// it stores for the quantization after it (mpc-form-kernels put them in one
// row group): no amax pass over the stored tensor. Each block's amax goes
// into the step's scratch, one block finds their maximum, and the cast
// pass reads that one value. A block a row (1,280 wide: 5 elements a
// thread held, at the constant stride of its 256 threads) writes its amax
// before it leaves early; a warp a row (64 wide) after its rows. The input
// gradients' kernels likewise, for the quantization of the linears' output
// gradients (their weight gradients' operands). Kernels are checked in the
// order they are emitted.

// The attention kernels likewise (mpc_attention.h: each block's amax of
// the tiles it stores), for the quantization of the attention's output and
// of its gradient's dq, dk and dv where the QKV projection's gradient sums
// them: the dQ kernel's blocks' partials, then the dK/dV kernel's.
// ATTENTION-LABEL: __global__ void {{.*}}gpt_k{{[0-9]+}}_attention({{.*}}, float *__restrict__ lse, float *__restrict__ amax_partials) {
//       ATTENTION:   mpc_attention_forward<__nv_bfloat16, 16, 16, 16, 16>(a, q, k, v, mask, o, lse, amax_partials);
//   ATTENTION-NOT: __global__
//       ATTENTION: __global__ void {{.*}}gpt_k{{[0-9]+}}_fp8_amax_combine(
// ATTENTION-LABEL: __global__ void {{.*}}gpt_k{{[0-9]+}}_attention_grad_q({{.*}}, float *__restrict__ delta, float *__restrict__ amax_partials) {
//       ATTENTION:   mpc_attention_backward_q<{{.*}}>(a, dout, q, k, v, o, lse, mask, dq, delta, amax_partials);
//       ATTENTION: __global__ void {{.*}}gpt_k{{[0-9]+}}_attention_grad_kv({{.*}}, __nv_bfloat16 *__restrict__ dv, float *__restrict__ amax_partials) {
//       ATTENTION:   mpc_attention_backward_kv<{{.*}}>(a, dout, q, k, v, o, lse, delta, mask, dk, dv, amax_partials);
//   ATTENTION-NOT: __global__
//       ATTENTION: __global__ void {{.*}}gpt_k{{[0-9]+}}_fp8_amax_combine(

// CHECK-LABEL: __global__ void {{.*}}amax_k{{[0-9]+}}_layer_norm({{.*}}, __nv_bfloat16 *__restrict__ y, float *__restrict__ amax_partials) {
//  CHECK-NEXT:   float amax = 0.0f;
//       CHECK:   if (blockDim.x == 256) {
//       CHECK:     MPC_FOR_THREAD_UNROLLED_BY(k, j, 1280LL, 5, 256)
//       CHECK:       mpc_store_amax(y + r * 1280LL + j, (v[k] - mean) * rstd * mpc_load(gamma + j) + mpc_load(beta + j), amax);
//  CHECK-NEXT:     amax = mpc_block_reduce_max(amax);
//  CHECK-NEXT:     if (threadIdx.x == 0) amax_partials[blockIdx.x] = amax;
//  CHECK-NEXT:     return;
//       CHECK:   MPC_FOR_THREAD(j, 1280LL) mpc_store_amax(y + r * 1280LL + j,
//  CHECK-NEXT:   }
//  CHECK-NEXT:   amax = mpc_block_reduce_max(amax);
//  CHECK-NEXT:   if (threadIdx.x == 0) amax_partials[blockIdx.x] = amax;
//  CHECK-NEXT: }
//   CHECK-NOT: __global__
//       CHECK: __global__ void {{.*}}amax_k{{[0-9]+}}_fp8_amax_combine(const float *__restrict__ partials, float *__restrict__ amax) {
//  CHECK-NEXT:   float m = 0.0f;
//  CHECK-NEXT:   MPC_FOR_THREAD(b, 16LL) m = partials[b] > m ? partials[b] : m;
//   CHECK-NOT: __global__
//       CHECK: __global__ void {{.*}}amax_k{{[0-9]+}}_fp8_quantize_transpose(
//  CHECK-NEXT:   float amax = 0.0f;
//  CHECK-NEXT:   MPC_FOR_THREAD(b, 1LL) amax = partials[b] > amax ? partials[b] : amax;

// CHECK-LABEL: __global__ void {{.*}}amax_k{{[0-9]+}}_layer_norm({{.*}}, float *__restrict__ amax_partials) {
//       CHECK:   MPC_FOR_WARP_ROW(r, 16LL,
//       CHECK:   MPC_FOR_LANE(j, 64LL) mpc_store_amax(y + r * 64LL + j,
//  CHECK-NEXT:   }
//  CHECK-NEXT:   amax = mpc_block_reduce_max(amax);
//  CHECK-NEXT:   if (threadIdx.x == 0) amax_partials[blockIdx.x] = amax;
//   CHECK-NOT: __global__
//       CHECK: __global__ void {{.*}}amax_k{{[0-9]+}}_fp8_amax_combine(

// CHECK-LABEL: __global__ void {{.*}}amax_k{{[0-9]+}}_layer_norm_grad_input({{.*}}, float *__restrict__ partials, float *__restrict__ amax_partials) {
//       CHECK:       mpc_store_amax(dx + (r * 64LL + MPC_ROW_LANE) + k * (long long)MPC_ROW_LANES, rstd * (g - sg - xhat * sgx), amax);
//       CHECK:     mpc_store_amax(dx + r * 64LL + j, rstd * (g - sg - xhat * sgx), amax);
//       CHECK:   amax = mpc_block_reduce_max(amax);
//  CHECK-NEXT:   if (threadIdx.x == 0) amax_partials[blockIdx.x] = amax;
//  CHECK-NEXT: }
//   CHECK-NOT: fp8_amax(
//       CHECK: __global__ void {{.*}}amax_k{{[0-9]+}}_fp8_amax_combine(

// CHECK-LABEL: __global__ void {{.*}}amax_k{{[0-9]+}}_layer_norm_grad_input({{.*}}, float *__restrict__ partials, float *__restrict__ amax_partials) {
//       CHECK:   if (blockDim.x == 256) {
//       CHECK:     MPC_FOR_THREAD_UNROLLED_BY(k, j, 1280LL, 5, 256) {
//       CHECK:     mpc_store_amax(dx + r * 1280LL + j, rstd * (g - sg - xhat * sgx), amax);
//       CHECK:   amax = mpc_block_reduce_max(amax);
//  CHECK-NEXT:   if (threadIdx.x == 0) amax_partials[blockIdx.x] = amax;
//  CHECK-NEXT: }
//   CHECK-NOT: fp8_amax(
//       CHECK: __global__ void {{.*}}amax_k{{[0-9]+}}_fp8_amax_combine(
mpc.model @amax
    inputs(%x: tensor<16x256xf32>, %target: tensor<16x64xf32>)
    params(%fc1.weight: tensor<1280x256xf32> = normal(0.05),
           %fc1.bias: tensor<1280xf32> = zeros,
           %ln1.weight: tensor<1280xf32> = ones,
           %ln1.bias: tensor<1280xf32> = zeros,
           %fc2.weight: tensor<64x1280xf32> = normal(0.02),
           %fc2.bias: tensor<64xf32> = zeros,
           %ln2.weight: tensor<64xf32> = ones,
           %ln2.bias: tensor<64xf32> = zeros,
           %fc3.weight: tensor<64x64xf32> = normal(0.02),
           %fc3.bias: tensor<64xf32> = zeros) {
  %h = mpc.linear %x, %fc1.weight, %fc1.bias
      : tensor<16x256xf32>, tensor<1280x256xf32>, tensor<1280xf32>
  %n = mpc.layer_norm %h, %ln1.weight, %ln1.bias
      : tensor<16x1280xf32>, tensor<1280xf32>
  %y = mpc.linear %n, %fc2.weight, %fc2.bias
      : tensor<16x1280xf32>, tensor<64x1280xf32>, tensor<64xf32>
  %n2 = mpc.layer_norm %y, %ln2.weight, %ln2.bias
      : tensor<16x64xf32>, tensor<64xf32>
  %z = mpc.linear %n2, %fc3.weight, %fc3.bias
      : tensor<16x64xf32>, tensor<64x64xf32>, tensor<64xf32>
  %loss = mpc.mse_loss %z, %target : tensor<16x64xf32>, tensor<16x64xf32>
  mpc.output loss(%loss : tensor<f32>)
}
