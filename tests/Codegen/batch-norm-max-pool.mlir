// RUN: mpc compile %s --target=cuda --emit=kernels | FileCheck %s
// RUN: mpc compile %s --target=cuda --emit=kernels --amp=O2 --half=bf16 | FileCheck %s --check-prefix=HALF
// RUN: mpc compile %s --target=cuda --emit=kernels --no-fuse | FileCheck %s --check-prefix=NOFUSE

// A ResNet's stem: batch norm, ReLU, max pooling. The statistics are
// summed in slices (one here: 2 x 9 x 9 = 162 elements a channel), and the
// pool's loads normalise: each tap computes (x - mean) * rstd * gamma +
// beta and the ReLU from the channel's statistics, rounded to the type the
// ReLU's output had, so nothing between the norm and the pool is stored.
// CHECK-LABEL: stem_k{{[0-9]+}}_batch_norm_partials(
//       CHECK: stem_k{{[0-9]+}}_batch_norm_stats(
//   CHECK-NOT: batch_norm_apply
//       CHECK: __device__ float [[RELU:stem_k[0-9]+_batch_norm_max_pool2d_y]](float seed, long long i) {
//       CHECK: __global__ void __launch_bounds__(256) stem_k{{[0-9]+}}_batch_norm_max_pool2d(const float *__restrict__ x, float *__restrict__ y, signed char *__restrict__ argmax, const float *__restrict__ gamma, const float *__restrict__ beta, const float *__restrict__ stats) {
//       CHECK: #ifdef MPC_DEVICE_BLOCKS
//  CHECK-NEXT:   MPC_FOR_EACH(i, 200LL) {
//  CHECK-NEXT:     long long plane = i / 25LL, oy = (i / 5LL) % 5LL, ox = i % 5LL;
//  CHECK-NEXT:     const float *src = x + plane * 81LL;
//  CHECK-NEXT:     long long c = plane % 4LL;
//  CHECK-NEXT:     float mean = stats[c], rstd = stats[4LL + c], g = mpc_load(gamma + c), b = mpc_load(beta + c);
//       CHECK:         float v = mpc_rounded<float>([[RELU]]((mpc_load(src + iy * 9LL + ix) - mean) * rstd * g + b, plane * 81LL + (iy * 9LL + ix)));
//       CHECK:     argmax[i] = (signed char)best;
// The cpu target's rows read through the same function.
//       CHECK: #else
//       CHECK:     long long c = plane % 4LL;
//       CHECK:           float v = mpc_rounded<float>([[RELU]]((mpc_load(src + index) - mean) * rstd * g + b, plane * 81LL + (index)));
//       CHECK: #endif
//   CHECK-NOT: max_pool2d_with_indices(
// HALF-LABEL: stem_k{{[0-9]+}}_batch_norm_max_pool2d(const __nv_bfloat16 *__restrict__ x, __nv_bfloat16 *__restrict__ y, signed char *__restrict__ argmax, const float *__restrict__ gamma, const float *__restrict__ beta, const float *__restrict__ stats) {
//       HALF:         float v = mpc_rounded<__nv_bfloat16>(
// Without fusion: the norm's kernel, the ReLU's, the pool's.
// NOFUSE-LABEL: stem_k{{[0-9]+}}_batch_norm(
//       NOFUSE: stem_k{{[0-9]+}}_relu(
//       NOFUSE: stem_k{{[0-9]+}}_max_pool2d_with_indices(const float *__restrict__ x, float *__restrict__ y, signed char *__restrict__ argmax) {
mpc.model @stem
    inputs(%x: tensor<2x4x9x9xf32>)
    params(%g: tensor<4xf32> = ones, %b: tensor<4xf32> = zeros)
    state(%m: tensor<4xf32> = zeros, %v: tensor<4xf32> = ones) {
  %y = mpc.batch_norm %x, %g, %b, %m, %v : tensor<2x4x9x9xf32>, tensor<4xf32>
  %r = mpc.relu %y : tensor<2x4x9x9xf32>
  %p = mpc.max_pool2d %r kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x4x9x9xf32>
  %s = mpc.reduce_sum %p dims [0, 1, 2, 3] : tensor<2x4x5x5xf32>
  mpc.output loss(%s : tensor<f32>)
}
