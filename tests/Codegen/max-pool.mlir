// RUN: mpc compile %s --target=cuda --emit=kernels | FileCheck %s
// RUN: mpc compile %s --target=cuda --emit=kernels --amp=O2 --half=bf16 | FileCheck %s --check-prefix=HALF

// A max pooling whose gradient the step takes stores each window's argmax
// as its position in the window (ky * KW + kx, a signed byte; -1 for a
// window without input), chosen as the recomputation chose it: the first
// maximum, the last NaN. Kernel [3, 3], stride [2, 2], padding [1, 1] on
// [2, 4, 9, 9] -> [2, 4, 5, 5]: 200 windows.
// CHECK-LABEL: __global__ void __launch_bounds__(256) pool_k{{[0-9]+}}_max_pool2d_with_indices(const float *__restrict__ x, float *__restrict__ y, signed char *__restrict__ argmax) {
//       CHECK: #ifdef MPC_DEVICE_BLOCKS
//  CHECK-NEXT:   MPC_FOR_EACH(i, 200LL) {
//       CHECK:         long long take = (long long)((best < 0) | (v > bestValue) | (v != v));
//  CHECK-NEXT:         best += take * (ky * 3LL + kx - best);
//  CHECK-NEXT:         bestValue = mpc_max_nan(bestValue, v);
//       CHECK:     mpc_store(y + i, bestValue);
//  CHECK-NEXT:     argmax[i] = (signed char)best;
// The cpu target's rows: the same comparison, a row of windows at a time.
//       CHECK: #else
//       CHECK:           best[ox] += take * (ky * 3LL + kx - best[ox]);
//       CHECK:       argmax[r * 5LL + ox] = (signed char)best[ox];
//       CHECK: #endif

// The gradient reads the bytes, not the input: no kernel finds the maxima
// again. Each window's byte becomes an offset in the plane from the
// window's corner (oy * 2 - 1, ox * 2 - 1).
//   CHECK-NOT: max_pool2d_argmax
//       CHECK: pool_k{{[0-9]+}}_max_pool2d_grad(const float *__restrict__ dy, const signed char *__restrict__ argmax, float *__restrict__ dx) {
//       CHECK:         long long a = mpc_window_pixel(best[oy * 5LL + ox], oy * 2LL - 1LL, ox * 2LL - 1LL, 3LL, 9LL);
// A half dx is gathered instead, a thread an input pixel summing its
// windows in f32, in int arithmetic (the tensors have under 2^31
// elements): a window adds its dy where the pixel's position in it is the
// stored one.
// HALF-LABEL: pool_k{{[0-9]+}}_max_pool2d_grad(const __nv_bfloat16 *__restrict__ dy, const signed char *__restrict__ argmax, __nv_bfloat16 *__restrict__ dx) {
//  HALF-NEXT:   MPC_FOR_EACH(i, 648LL) {
//  HALF-NEXT:     int at = (int)i;
//  HALF-NEXT:     int plane = at / 81, iy = (at / 9) % 9, ix = at % 9;
//       HALF:     for (int oy = oy_lo; oy <= oy_hi; ++oy)
//  HALF-NEXT:       for (int ox = ox_lo; ox <= ox_hi; ++ox) {
//  HALF-NEXT:         if (best[oy * 5 + ox] == (iy - (oy * 2 - 1)) * 3 + ix - (ox * 2 - 1)) acc += mpc_load(g + oy * 5 + ox);
//  HALF-NEXT:       }
//  HALF-NEXT:     mpc_store(dx + i, acc);
mpc.model @pool
    inputs(%x: tensor<2x4x9x9xf32>)
    params(%w: tensor<2x4x9x9xf32> = normal(1.0)) {
  %h = mpc.mul %x, %w : tensor<2x4x9x9xf32>, tensor<2x4x9x9xf32>
  %y = mpc.max_pool2d %h kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x4x9x9xf32>
  %s = mpc.reduce_sum %y dims [0, 1, 2, 3] : tensor<2x4x5x5xf32>
  mpc.output loss(%s : tensor<f32>)
}
