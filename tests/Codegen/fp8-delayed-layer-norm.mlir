// RUN: mpc compile %s --target=cuda --arch=sm_90 --amp=O2 --half=bf16 --fp8=all --fp8-scaling=delayed --emit=kernels | FileCheck %s
// RUN: mpc compile %s --target=cuda --arch=sm_90 --amp=O2 --half=bf16 --fp8=all --fp8-scaling=delayed --emit=host | FileCheck %s --check-prefix=HOST

// Under delayed FP8 scaling a layer norm's kernel casts its output to FP8
// itself (mpc-form-kernels put the quantization in its row group): the
// scale is the table's, known before the step, so y is rounded to bf16 (as
// a stored y would be), scaled, clipped and counted as the quantization's
// own pass would, and written as FP8; the block's amax and saturation
// count go into the table. y is not stored unless something else reads it,
// and the quantization writes only the transposed copy, from the FP8
// bytes. A block a row (1,280 wide) leaves early with its amax raised.
// CHECK-LABEL: __global__ void __launch_bounds__(256, 4) delayed_k{{[0-9]+}}_layer_norm(const __nv_bfloat16 *__restrict__ x, const float *__restrict__ gamma, const float *__restrict__ beta, __nv_fp8_e4m3 *__restrict__ q, float *__restrict__ scale_inv, float *__restrict__ table) {
//  CHECK-NEXT:   const float scale = __uint_as_float((unsigned int)((int)table[[[COLUMN:[0-9]+]]] + 127) << 23);
//  CHECK-NEXT:   float fp8_amax = 0.0f, fp8_saturated = 0.0f;
//  CHECK-NEXT:   if (blockIdx.x == 0 && threadIdx.x == 0) scale_inv[0] = 1.0f / scale;
//       CHECK:     MPC_FOR_THREAD_UNROLLED_BY(k, j, 1280LL, 5, 256){{$}}
//  CHECK-NEXT:       { __nv_bfloat16 fp8_in; mpc_store(&fp8_in, (v[k] - mean) * rstd * mpc_load(gamma + j) + mpc_load(beta + j)); float fp8_v = mpc_load(&fp8_in); float fp8_y = fp8_v * scale;
//  CHECK-NEXT:       float fp8_v_magnitude = fabsf(fp8_v);
//  CHECK-NEXT:       fp8_amax = fp8_v_magnitude > fp8_amax ? fp8_v_magnitude : fp8_amax;
//  CHECK-NEXT:       if (MPC_ISFINITE(fp8_v)) {
//  CHECK-NEXT:         if (fabsf(fp8_y) > 4.480000000e+02f) fp8_saturated += 1.0f;
//  CHECK-NEXT:         fp8_y = fp8_y > 4.480000000e+02f ? 4.480000000e+02f : (fp8_y < -4.480000000e+02f ? -4.480000000e+02f : fp8_y);
//  CHECK-NEXT:       }
//  CHECK-NEXT:       else fp8_y = NAN;
//  CHECK-NEXT:       mpc_store(q + r * 1280LL + j, fp8_y); }
//  CHECK-NEXT:     fp8_amax = mpc_block_reduce_max(fp8_amax);
//  CHECK-NEXT:     fp8_saturated = mpc_block_reduce_sum(fp8_saturated);
//  CHECK-NEXT:     if (threadIdx.x == 0) {
//  CHECK-NEXT:       mpc_atomic_max_nonnegative(table + {{[0-9]+}}, fp8_amax);
//  CHECK-NEXT:       if (fp8_saturated > 0.0f) mpc_atomic_add_count(table + {{[0-9]+}}, fp8_saturated);
//  CHECK-NEXT:     }
//  CHECK-NEXT:     return;
//       CHECK:   MPC_FOR_THREAD(j, 1280LL) { __nv_bfloat16 fp8_in;
//       CHECK:       mpc_store(q + r * 1280LL + j, fp8_y); }
//  CHECK-NEXT:   }
//  CHECK-NEXT:   fp8_amax = mpc_block_reduce_max(fp8_amax);
//   CHECK-NOT: __global__
//       CHECK: __global__ void __launch_bounds__(256) delayed_k{{[0-9]+}}_fp8_transpose(const __nv_fp8_e4m3 *__restrict__ input, __nv_fp8_e4m3 *__restrict__ output_t) {
//       CHECK:   MPC_SHARED(unsigned char, tile, 32 * 33);
//       CHECK:       if (r < 16LL && c < 1280LL) tile[j / 32 * 33 + j % 32] = in[r * 1280LL + c];
//       CHECK:       if (r < 16LL && c < 1280LL) out[c * 16LL + r] = tile[j % 32 * 33 + j / 32];

// A warp a row (64 wide) whose y the residual sum reads too: it stores the
// bf16 y it cast, and the FP8 bytes.
// CHECK-LABEL: __global__ void __launch_bounds__(256, 4) delayed_k{{[0-9]+}}_layer_norm({{.*}}, __nv_bfloat16 *__restrict__ y, __nv_fp8_e4m3 *__restrict__ q, float *__restrict__ scale_inv, float *__restrict__ table) {
//       CHECK:   MPC_FOR_WARP_ROW(r, 16LL, 8) {
//       CHECK:       y[r * 64LL + j] = fp8_in;
//  CHECK-NEXT:       mpc_store(q + r * 64LL + j, fp8_y); }
//  CHECK-NEXT:   }
//  CHECK-NEXT:   fp8_amax = mpc_block_reduce_max(fp8_amax);
//       CHECK: __global__ void __launch_bounds__(256) delayed_k{{[0-9]+}}_fp8_transpose(

// The layer norm's launch passes the FP8 result, its inverse scale and the
// table; the transposed copy reads that result.
// HOST-LABEL: delayed_train_step
//       HOST: MPC_LAUNCH_PARALLEL(delayed_k{{[0-9]+}}_layer_norm, 16, 256, {{[0-9]+}}LL, {{.*}}, (__nv_fp8_e4m3 *)(arena3 + [[FP8:[0-9]+]]), (float *)(arena3 + {{[0-9]+}}), (float *)(arena0 + {{[0-9]+}}));
//  HOST-NEXT: MPC_LAUNCH_PARALLEL(delayed_k{{[0-9]+}}_fp8_transpose, 10, 256, 40960LL, (const __nv_fp8_e4m3 *)(arena3 + [[FP8]]), (__nv_fp8_e4m3 *)(arena3 + {{[0-9]+}}));

mpc.model @delayed
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
           %fc3.bias: tensor<64xf32> = zeros,
           %fc4.weight: tensor<64x64xf32> = normal(0.02),
           %fc4.bias: tensor<64xf32> = zeros) {
  %h = mpc.linear %x, %fc1.weight, %fc1.bias
      : tensor<16x256xf32>, tensor<1280x256xf32>, tensor<1280xf32>
  %n = mpc.layer_norm %h, %ln1.weight, %ln1.bias
      : tensor<16x1280xf32>, tensor<1280xf32>
  %y = mpc.linear %n, %fc2.weight, %fc2.bias
      : tensor<16x1280xf32>, tensor<64x1280xf32>, tensor<64xf32>
  %n2 = mpc.layer_norm %y, %ln2.weight, %ln2.bias
      : tensor<16x64xf32>, tensor<64xf32>
  %u = mpc.linear %n2, %fc3.weight, %fc3.bias
      : tensor<16x64xf32>, tensor<64x64xf32>, tensor<64xf32>
  %r = mpc.add %u, %n2 : tensor<16x64xf32>, tensor<16x64xf32>
  %z = mpc.linear %r, %fc4.weight, %fc4.bias
      : tensor<16x64xf32>, tensor<64x64xf32>, tensor<64xf32>
  %loss = mpc.mse_loss %z, %target : tensor<16x64xf32>, tensor<16x64xf32>
  mpc.output loss(%loss : tensor<f32>)
}
