// RUN: mpc compile %s --target=cuda --amp=O2 --half=bf16 --accumulate=2 \
// RUN:   --emit=kernels | FileCheck %s --check-prefix=KERNELS
// RUN: mpc compile %s --target=cuda --amp=O2 --half=bf16 --accumulate=2 \
// RUN:   --emit=host | FileCheck %s --check-prefix=HOST
// RUN: mpc compile %s --target=cuda --amp=O2 --half=bf16 --accumulate=2 \
// RUN:   --no-fuse --emit=kernels | FileCheck %s --check-prefix=UNFUSED \
// RUN:   --implicit-check-not=cast_batch

// Casts in a row share one launch, a block a tile of 4096 elements of one
// of them: forward, the two inputs to bf16 (2048 elements each, a tile
// each); backward, the widening of the bf16 weight gradients that cuDNN
// writes to the f32 masters' (which the accumulator over micro-batches
// reads: without one they stay half, half-gradients.mlir). The first
// weight, 64 x 16 x 3 x 3 (9216 elements), is three tiles; the second,
// 16 x 64 (1024), one. The evaluation step casts its inputs in one launch
// too. --no-fuse keeps a launch a cast.

// KERNELS-LABEL: // 2 casts, a block a tile of one
//  KERNELS-NEXT: __global__ void __launch_bounds__(256) convs_k0_cast_batch(const float *__restrict__ in0, __nv_bfloat16 *__restrict__ out0, const float *__restrict__ in1, __nv_bfloat16 *__restrict__ out1) {
//  KERNELS-NEXT:   long long tile = blockIdx.x;
//  KERNELS-NEXT:   if (tile < 1LL) {
//  KERNELS-NEXT:     MPC_FOR_TILE(i, tile - 0LL, 2048LL) mpc_store(out0 + i, mpc_load(in0 + i));
//  KERNELS-NEXT:     return;
//  KERNELS-NEXT:   }
//  KERNELS-NEXT:   if (tile < 2LL) {
//  KERNELS-NEXT:     MPC_FOR_TILE(i, tile - 1LL, 2048LL) mpc_store(out1 + i, mpc_load(in1 + i));
//  KERNELS-NEXT:     return;
//  KERNELS-NEXT:   }
//  KERNELS-NEXT: }
// KERNELS-LABEL: // 2 casts, a block a tile of one
//  KERNELS-NEXT: __global__ void __launch_bounds__(256) convs_k6_cast_batch(const __nv_bfloat16 *__restrict__ in0, float *__restrict__ out0, const __nv_bfloat16 *__restrict__ in1, float *__restrict__ out1) {
//  KERNELS-NEXT:   long long tile = blockIdx.x;
//  KERNELS-NEXT:   if (tile < 3LL) {
//  KERNELS-NEXT:     MPC_FOR_TILE(i, tile - 0LL, 9216LL) mpc_store(out0 + i, mpc_load(in0 + i));
//  KERNELS-NEXT:     return;
//  KERNELS-NEXT:   }
//  KERNELS-NEXT:   if (tile < 4LL) {
//  KERNELS-NEXT:     MPC_FOR_TILE(i, tile - 3LL, 1024LL) mpc_store(out1 + i, mpc_load(in1 + i));
//  KERNELS-NEXT:     return;
//  KERNELS-NEXT:   }
//  KERNELS-NEXT: }

// The backward's launch: 4 blocks; the gradients land in the gradient
// arena, laid out as the parameters.
// HOST-LABEL: MPC_LAUNCH_PARALLEL(convs_k0_cast_batch, 2, 256,
// HOST-LABEL: MPC_LAUNCH_PARALLEL(convs_k6_cast_batch, 4, 256, 61440LL, (const __nv_bfloat16 *)(arena3 + {{[0-9]+}}), (float *)(arena1 + 0), (const __nv_bfloat16 *)(arena3 + {{[0-9]+}}), (float *)(arena1 + 36864));
// HOST-LABEL: MPC_LAUNCH_PARALLEL(convs_k12_cast_batch, 2, 256,

// UNFUSED-COUNT-9: __global__ void __launch_bounds__(256) convs_k{{[0-9]+}}_cast(
mpc.model @convs
    inputs(%x: tensor<2x16x8x8xf32>, %target: tensor<2x16x8x8xf32>)
    params(%w1: tensor<64x16x3x3xf32> = kaiming_normal,
           %w2: tensor<16x64x1x1xf32> = kaiming_normal) {
  %h = mpc.conv2d %x, %w1 padding [1, 1]
      : tensor<2x16x8x8xf32>, tensor<64x16x3x3xf32>
  %r = mpc.relu %h : tensor<2x64x8x8xf32>
  %y = mpc.conv2d %r, %w2 : tensor<2x64x8x8xf32>, tensor<16x64x1x1xf32>
  %loss = mpc.mse_loss %y, %target : tensor<2x16x8x8xf32>, tensor<2x16x8x8xf32>
  mpc.output loss(%loss : tensor<f32>)
}
