// RUN: mpc compile %s --target=cuda --amp=O2 --half=bf16 --emit=kernels \
// RUN:   | FileCheck %s --check-prefix=KERNELS \
// RUN:       --implicit-check-not="__nv_bfloat16 *__restrict__ in0, float *"
// RUN: mpc compile %s --target=cuda --amp=O2 --half=bf16 --emit=host \
// RUN:   | FileCheck %s --check-prefix=HOST
// RUN: mpc compile %s --target=cpu --amp=O2 --half=bf16 --emit=host \
// RUN:   | FileCheck %s --check-prefix=CPU
// RUN: mpc compile %s --target=cuda --amp=O2 --half=bf16 --accumulate=2 \
// RUN:   --emit=kernels | FileCheck %s --check-prefix=WIDENED
// RUN: mpc compile %s --target=cuda --amp=O2 --half=bf16 --no-half-gradients \
// RUN:   --emit=kernels | FileCheck %s --check-prefix=WIDENED
// RUN: mpc compile %s --target=cuda --emit=host \
// RUN:   | FileCheck %s --check-prefix=F32 --implicit-check-not=gradient_dtypes

// At O2 a convolution's weight gradient is computed in bf16 (cuDNN writes
// it so) and widened to the f32 master's. The memory plan keeps it half
// instead: the convolution writes it at its parameter's place in the
// gradient arena, no cast runs, and the optimizer's kernels widen each
// gradient as they read it. The batch norm's gamma and beta have f32
// gradients: the flat buffer is three segments, w1 (half, 288 elements),
// gamma and beta (f32, 16), w2 (half, 32).

// The statistics take a thread's elements of its chunk segment by segment,
// in the order of the plain loop, so they sum what they summed.
// KERNELS-LABEL: _grad_stats(const float *__restrict__ grads, const __nv_bfloat16 *__restrict__ half_grads, mpc_train_control *control,
//       KERNELS:     static const long long begins[3] = {0LL, 288LL, 304LL};
//  KERNELS-NEXT:     static const unsigned char kept_half[3] = {1, 0, 1};
//  KERNELS-NEXT:     for (long long s = mpc_segment_of(begins, 3LL, begin); s < 3LL && begins[s] < end; ++s) {
//       KERNELS:      long long i = begin + threadIdx.x;
//  KERNELS-NEXT:      if (i < begins[s]) i += (begins[s] - i + blockDim.x - 1) / blockDim.x * blockDim.x;
//  KERNELS-NEXT:      for (; i < segment_end; i += blockDim.x) {
//  KERNELS-NEXT:       float g = (kept_half[s] ? mpc_load(half_grads + begins[s] + i) : mpc_load(grads + i));

// The update reads the same way, a tile's segments in turn.
// KERNELS-LABEL: _sgd_update(float *__restrict__ params, const float *__restrict__ grads, const __nv_bfloat16 *__restrict__ half_grads, float *__restrict__ slot0,
//       KERNELS:   static const long long begins[3] = {0LL, 288LL, 304LL};
//  KERNELS-NEXT:   static const unsigned char kept_half[3] = {1, 0, 1};
//  KERNELS-NEXT:   MPC_FOR_EACH_SEGMENTED(i, s, n, begins, 3LL) {
//  KERNELS-NEXT:     float p = mpc_load(params + i);
//  KERNELS-NEXT:     float g = (kept_half[s] ? mpc_load(half_grads + begins[s] + i) : mpc_load(grads + i)) * multiplier;

// cuDNN writes the weight gradients into the gradient arena, in bf16, at
// their parameters' byte offsets (w2's at 304 * 4); the optimizer
// is given the arena as both types.
// HOST-LABEL: static mpc_status convbn_train_step(
//       HOST:   MPC_CHECK(mpc_rt_cuda_conv({{[0-9]+}}, {{.*}}, (__nv_bfloat16 *)(arena1 + 1216), {{.*}}));
//       HOST:   MPC_CHECK(mpc_rt_cuda_conv({{[0-9]+}}, {{.*}}, (__nv_bfloat16 *)(arena1 + 0), {{.*}}));
//       HOST:   _grad_stats, {{.*}}, (const float *)arena1, (const __nv_bfloat16 *)arena1,
//       HOST:   _sgd_update, {{.*}}, (float *)arena0, (const float *)arena1, (const __nv_bfloat16 *)arena1,
// The descriptor says which gradients are half, for mpc_get_gradient.
//       HOST: static const mpc_dtype convbn_gradient_dtypes[] = {MPC_BF16, MPC_F32, MPC_F32, MPC_BF16};
//       HOST:   convbn_gradient_dtypes,
//  HOST-NEXT: };

// The cpu target's weight-gradient GEMMs write there the same way.
// CPU-LABEL: static mpc_status convbn_train_step(
//       CPU:   MPC_CHECK(mpc_rt_gemm(MPC_BF16, MPC_BF16, MPC_BF16, 0, 1, {{.*}}, (__nv_bfloat16 *)(arena1 + 1216), {{.*}}));
//       CPU: static const mpc_dtype convbn_gradient_dtypes[] = {MPC_BF16, MPC_F32, MPC_F32, MPC_BF16};

// Where something else reads the gradient arena (an accumulator over
// micro-batches: data parallelism and sharding are alike), or with the
// hidden --no-half-gradients, casts widen them into it as before.
// WIDENED-LABEL: // 2 casts, a block a tile of one
//   WIDENED-NEXT: _cast_batch(const float *__restrict__ in0,
//  WIDENED-LABEL: // 2 casts, a block a tile of one
//   WIDENED-NEXT: _cast_batch(const __nv_bfloat16 *__restrict__ in0, float *__restrict__ out0, const __nv_bfloat16 *__restrict__ in1, float *__restrict__ out1)
//   WIDENED-NOT: half_grads
//       WIDENED: _sgd_update(float *__restrict__ params, const float *__restrict__ grads, float *__restrict__ slot0,

// In f32 (O0) every gradient is its parameter's type: no table.
// F32: convbn_param_copies
// F32: convbn_desc

mpc.model @convbn
    inputs(%x: tensor<2x4x8x8xf32>, %target: tensor<2x4x8x8xf32>)
    params(%w1: tensor<8x4x3x3xf32> = kaiming_normal,
           %gamma: tensor<8xf32> = ones,
           %beta: tensor<8xf32> = zeros,
           %w2: tensor<4x8x1x1xf32> = kaiming_normal)
    state(%mean: tensor<8xf32> = zeros, %var: tensor<8xf32> = ones) {
  %h = mpc.conv2d %x, %w1 padding [1, 1]
      : tensor<2x4x8x8xf32>, tensor<8x4x3x3xf32>
  %n = mpc.batch_norm %h, %gamma, %beta, %mean, %var
      : tensor<2x8x8x8xf32>, tensor<8xf32>
  %r = mpc.relu %n : tensor<2x8x8x8xf32>
  %y = mpc.conv2d %r, %w2 : tensor<2x8x8x8xf32>, tensor<4x8x1x1xf32>
  %loss = mpc.mse_loss %y, %target : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>
  mpc.output loss(%loss : tensor<f32>)
}
