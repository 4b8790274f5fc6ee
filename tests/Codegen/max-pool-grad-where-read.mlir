// RUN: mpc compile %s --target=cuda --emit=kernels \
// RUN:   | FileCheck %s --implicit-check-not=max_pool2d_grad
// RUN: mpc compile %s --target=cuda --emit=kernels --amp=O2 --half=bf16 \
// RUN:   | FileCheck %s --check-prefix=HALF
// RUN: mpc compile %s --target=cpu --emit=host --emulate-blocks \
// RUN:   | FileCheck %s --check-prefix=CPU --implicit-check-not=max_pool2d_grad
// RUN: mpc compile %s --target=cpu --emit=host \
// RUN:   | FileCheck %s --check-prefix=SCATTER
// RUN: mpc compile %s --target=cuda --emit=host --no-batch-norms-where-read \
// RUN:   | FileCheck %s --check-prefix=STORED
// RUN: mpc compile %S/../e2e/models/sliced_stem.mlir --target=cuda \
// RUN:   --amp=O2 --half=bf16 --emit=kernels \
// RUN:   | FileCheck %s --check-prefix=SLICED --implicit-check-not=max_pool2d_grad
// RUN: mpc compile %s --target=cuda --amp=O2 --half=bf16 --report=json \
// RUN:   | FileCheck %s --check-prefix=REPORT
// RUN: mpc compile %s --target=cuda --amp=O2 --half=bf16 --report=json \
// RUN:   --no-batch-norms-where-read | FileCheck %s --check-prefix=REPORT-STORED

// A ResNet's stem: batch norm, ReLU, max pooling (3x3 windows, stride 2,
// padding 1: 9x9 planes to 5x5). Backward, the pooling's input gradient
// has one reader, the batch norm's gradient (which masks it with the
// ReLU's gradient). No kernel routes it: each load of the norm's gradient
// gathers its element from the windows that contain the pixel and whose
// argmax it is, in the routing kernel's order (oy, then ox) from 0, and
// rounds the sum to the gradient's type as the routing's store would. In
// int, as the routing kernel's offsets: the gather is bound by its
// instructions.

// CHECK-LABEL: __device__ float stem_k{{[0-9]+}}_batch_norm_grad_dy(const float *__restrict__ dy_in0, const signed char *__restrict__ dy_in1, long long i) {
//       CHECK:     float [[SUM:v[0-9]+]] = 0.0f;
//       CHECK:       int at = (int)i, plane = at / 81 * 25, iy = (at / 9) % 9, ix = at % 9;
//  CHECK-NEXT:       int oy_lo_num = iy + 1 - 3 + 1;
//       CHECK:       int oy_hi = (iy + 1) / 2;
//  CHECK-NEXT:       if (oy_hi > 4) oy_hi = 4;
//       CHECK:       for (int oy = oy_lo; oy <= oy_hi; ++oy)
//  CHECK-NEXT:         for (int ox = ox_lo; ox <= ox_hi; ++ox)
//  CHECK-NEXT:           if (dy_in1[plane + oy * 5 + ox] == (iy - (oy * 2 - 1)) * 3 + ix - (ox * 2 - 1))
//  CHECK-NEXT:             [[SUM]] += mpc_load(dy_in0 + plane + oy * 5 + ox);
//       CHECK:     return [[SUM]];
//       CHECK: __global__ void {{.*}}stem_k{{[0-9]+}}_batch_norm_grad(const float *__restrict__ dy_in0, const signed char *__restrict__ dy_in1,

// At O2 the gathered sum is rounded to bf16, as the routing stored it.
// HALF-LABEL: __device__ float stem_k{{[0-9]+}}_batch_norm_grad_dy(const __nv_bfloat16 *__restrict__ dy_in0, const signed char *__restrict__ dy_in1, long long i) {
//       HALF:     float [[ROUNDED:v[0-9]+]] = __bfloat162float(__float2bfloat16_rn(v{{[0-9]+}}));
//  HALF-NEXT:     return [[ROUNDED]];

// A norm whose gradient is sliced over a channel's elements (the sliced
// stem of tests/e2e/models, 32,768 a channel) reads dy in two kernels: the
// partials kernel gathers it and stores it as it goes, and the input
// kernel reads it back.
// SLICED-LABEL: __global__ void __launch_bounds__({{[0-9]+}}) sliced_stem_k{{[0-9]+}}_batch_norm_grad_partials(const __nv_bfloat16 *__restrict__ dy_in0, const signed char *__restrict__ dy_in1, __nv_bfloat16 *__restrict__ dy_out,
//       SLICED: mpc_store_and_use(dy_out + c * 16384LL + at, sliced_stem_k{{[0-9]+}}_batch_norm_grad_partials_dy(dy_in0, dy_in1, c * 16384LL + at))
//       SLICED: __global__ void __launch_bounds__(256) sliced_stem_k{{[0-9]+}}_batch_norm_grad_input(const __nv_bfloat16 *__restrict__ dy, const __nv_bfloat16 *__restrict__ x,

// The cpu target's build of the cuda kernels (--emulate-blocks) gathers
// too: the norm's gradient reads the window gradients and argmaxes.
// CPU-LABEL: MPC_LAUNCH_PARALLEL(stem_k{{[0-9]+}}_batch_norm_grad, {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}LL, (const float *)(arena{{[0-9]}} + {{[0-9]+}}), (const signed char *)(arena

// The cpu target's own kernels route: its routing scatters a plane at a
// time, cheaper than a gather an element, and its one thread a block would
// gather dy twice (both passes over the channel).
// SCATTER: stem_k{{[0-9]+}}_max_pool2d_grad
// SCATTER: stem_k{{[0-9]+}}_batch_norm_grad

// --no-batch-norms-where-read: the routing kernel stores the gradient and
// the norm's gradient reads it.
// STORED: stem_k{{[0-9]+}}_max_pool2d_grad
// STORED: stem_k{{[0-9]+}}_batch_norm_grad

// The report's bytes at O2: 15,424 with the routing kernel (its 1,896: the
// 200 window gradients and argmaxes read, 600, and the gradient's 648 bf16
// elements written, 1,296) and the norm's gradient reading the gradient
// (1,296); 12,832 where the norm's gradient reads the window gradients
// and argmaxes instead (600).
// REPORT: "step": {
// REPORT: "bytes": 12832,
// REPORT-STORED: "step": {
// REPORT-STORED: "bytes": 15424,
mpc.model @stem
    inputs(%x: tensor<2x4x9x9xf32>, %r: tensor<2x4x5x5xf32>)
    params(%g: tensor<4xf32> = ones, %b: tensor<4xf32> = zeros)
    state(%m: tensor<4xf32> = zeros, %v: tensor<4xf32> = ones) {
  %y = mpc.batch_norm %x, %g, %b, %m, %v : tensor<2x4x9x9xf32>, tensor<4xf32>
  %a = mpc.relu %y : tensor<2x4x9x9xf32>
  %p = mpc.max_pool2d %a kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x4x9x9xf32>
  %l = mpc.mul %p, %r : tensor<2x4x5x5xf32>, tensor<2x4x5x5xf32>
  %s = mpc.reduce_sum %l dims [0, 1, 2, 3] : tensor<2x4x5x5xf32>
  mpc.output loss(%s : tensor<f32>)
}
