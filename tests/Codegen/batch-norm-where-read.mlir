// RUN: mpc compile %s --target=cuda --arch=sm_90 --amp=O2 --half=bf16 \
// RUN:   --emit=kernels | FileCheck %s --check-prefix=KERNELS
// RUN: mpc compile %s --target=cuda --arch=sm_90 --amp=O2 --half=bf16 \
// RUN:   --emit=host | FileCheck %s --check-prefix=HOST
// RUN: mpc compile %s --target=cpu --emit=host \
// RUN:   | FileCheck %s --check-prefix=CPU
// RUN: mpc compile %s --target=cuda --arch=sm_90 --amp=O2 --half=bf16 \
// RUN:   --emit=host --no-batch-norms-where-read \
// RUN:   | FileCheck %s --check-prefix=STORED \
// RUN:       --implicit-check-not=batch_norm_statistics
// RUN: mpc compile %s --target=cuda --arch=sm_90 --amp=O2 --half=bf16 \
// RUN:   --report=json | FileCheck %s --check-prefix=REPORT
// RUN: mpc compile %s --target=cuda --arch=sm_90 --amp=O2 --half=bf16 \
// RUN:   --report=json --no-batch-norms-where-read \
// RUN:   | FileCheck %s --check-prefix=REPORT-STORED

// Two downsampling blocks, as ResNet's: the sum of a block's last batch
// norm and its shortcut's batch norm, then a ReLU (64x64 maps, whose
// channels are summed in 2 slices, then 32x32, a block a channel). The
// shortcut's norm has one reader, the sum in the epilogue of the other
// norm's kernel, which normalises the shortcut's x itself from the
// statistics the shortcut's norm saved for its gradient; the shortcut's
// norm only finds them, and its output is never stored.

// The 64x64 block's epilogue normalises the shortcut's x (rounded to bf16,
// as a store would), then adds; the 32x32 shortcut's statistics kernel is
// one block a channel, and normalises nothing.
// KERNELS-LABEL: __device__ float shortcuts_k3_batch_norm_cluster_y(
//       KERNELS:     float [[X:v[0-9]+]] = mpc_load(y_in0 + i);
//  KERNELS-NEXT:     float [[MEAN:v[0-9]+]] = mpc_load(y_in1 + 0 * 4LL + c1 * 1LL);
//  KERNELS-NEXT:     float [[RSTD:v[0-9]+]] = mpc_load(y_in1 + 1 * 4LL + c1 * 1LL);
//  KERNELS-NEXT:     float [[GAMMA:v[0-9]+]] = mpc_load(y_in2 + c1 * 1LL);
//  KERNELS-NEXT:     float [[BETA:v[0-9]+]] = mpc_load(y_in3 + c1 * 1LL);
//  KERNELS-NEXT:     float [[N:v[0-9]+]] = ([[X]] - [[MEAN]]) * [[RSTD]];
//  KERNELS-NEXT:     float [[S:v[0-9]+]] = __bfloat162float(__float2bfloat16_rn([[N]] * [[GAMMA]] + [[BETA]]));
//  KERNELS-NEXT:     float {{v[0-9]+}} = __bfloat162float(__float2bfloat16_rn(({{v[0-9]+}} + [[S]])));
// KERNELS-LABEL: __global__ void __launch_bounds__(512) shortcuts_k4_batch_norm_statistics(const __nv_bfloat16 *__restrict__ x, float *__restrict__ running_mean, float *__restrict__ running_var, float *__restrict__ stats, int update) {
//       KERNELS:   MPC_SUM_CHANNEL(8LL, 1024LL, 4096LL, at, sum, mpc_load(xc + at));
//       KERNELS:   MPC_SUM_CHANNEL(8LL, 1024LL, 4096LL, at, squares, mpc_square(mpc_load(xc + at) - mean));
//       KERNELS: stats[c] = mean;
//  KERNELS-NEXT: stats[4LL + c] = mpc_rsqrt(var + 9.999999747e-06f);
//       KERNELS: }
//  KERNELS-NEXT:   }
//  KERNELS-NEXT: }

// The 64x64 shortcut's statistics in slices (partials, then per channel),
// not a cluster kernel that would normalise; the block's last norm is one.
// HOST: mpc_rt_cuda_conv(1, {{.*}}, (__nv_bfloat16 *)(arena3 + [[P1:[0-9]+]])));
// HOST-NEXT: MPC_LAUNCH_PARALLEL(shortcuts_k1_batch_norm_partials, 8, 1024, {{.*}}, (const __nv_bfloat16 *)(arena3 + [[P1]]),
// HOST-NEXT: MPC_LAUNCH(shortcuts_k1_batch_norm_stats, 1, 256,
// HOST-NEXT: MPC_LAUNCH_CLUSTER(shortcuts_k3_batch_norm_cluster, 8, 1024, 2,
// HOST-SAME: (const __nv_bfloat16 *)(arena3 + [[P1]])
// HOST: MPC_LAUNCH_PARALLEL(shortcuts_k4_batch_norm_statistics, 4, 512,
// HOST-NEXT: MPC_LAUNCH_PARALLEL(shortcuts_k5_batch_norm, 4, 512,

// The cpu target too, where the 64x64 norm's elementwise pass applies both.
// CPU: shortcuts_k0_batch_norm_partials,
// CPU: shortcuts_k0_batch_norm_stats,
// CPU: shortcuts_k2_batch_norm_partials,
// CPU: shortcuts_k2_batch_norm_stats,
// CPU: shortcuts_k4_batch_norm_apply,
// CPU: shortcuts_k7_batch_norm_statistics,
// CPU: shortcuts_k8_batch_norm,

// With --no-batch-norms-where-read every norm normalises and stores.
// STORED: MPC_LAUNCH_CLUSTER(shortcuts_k1_batch_norm_cluster,
// STORED: MPC_LAUNCH_CLUSTER(shortcuts_k2_batch_norm_cluster,
// STORED: MPC_LAUNCH_PARALLEL(shortcuts_k3_batch_norm,
// STORED: MPC_LAUNCH_PARALLEL(shortcuts_k4_batch_norm,

// Neither shortcut's output is written (2 bytes an element of 8x4x64x64
// and 8x4x32x32: 327,680 bytes), less the partial sums the 64x64 one
// stores (64 bytes).
// REPORT:        "step": {
// REPORT-NEXT:     "bound_seconds":
// REPORT-NEXT:     "bytes": 9375904,
// REPORT-STORED: "step": {
// REPORT-STORED-NEXT:     "bound_seconds":
// REPORT-STORED-NEXT:     "bytes": 9703520,

mpc.model @shortcuts
    inputs(%x: tensor<8x4x64x64xf32>, %target: tensor<8x4x32x32xf32>)
    params(%c1.weight: tensor<4x4x1x1xf32> = normal(0.0, 0.5),
           %p1.weight: tensor<4x4x1x1xf32> = normal(0.0, 0.5),
           %c2.weight: tensor<4x4x1x1xf32> = normal(0.0, 0.5),
           %p2.weight: tensor<4x4x1x1xf32> = normal(0.0, 0.5),
           %y1.weight: tensor<4xf32> = ones, %y1.bias: tensor<4xf32> = zeros,
           %s1.weight: tensor<4xf32> = ones, %s1.bias: tensor<4xf32> = zeros,
           %y2.weight: tensor<4xf32> = ones, %y2.bias: tensor<4xf32> = zeros,
           %s2.weight: tensor<4xf32> = ones, %s2.bias: tensor<4xf32> = zeros)
    state(%y1.running_mean: tensor<4xf32> = zeros,
          %y1.running_var: tensor<4xf32> = ones,
          %s1.running_mean: tensor<4xf32> = zeros,
          %s1.running_var: tensor<4xf32> = ones,
          %y2.running_mean: tensor<4xf32> = zeros,
          %y2.running_var: tensor<4xf32> = ones,
          %s2.running_mean: tensor<4xf32> = zeros,
          %s2.running_var: tensor<4xf32> = ones) {
  %c1 = mpc.conv2d %x, %c1.weight
      : tensor<8x4x64x64xf32>, tensor<4x4x1x1xf32>
  %y1 = mpc.batch_norm %c1, %y1.weight, %y1.bias, %y1.running_mean,
      %y1.running_var : tensor<8x4x64x64xf32>, tensor<4xf32>
  %p1 = mpc.conv2d %x, %p1.weight
      : tensor<8x4x64x64xf32>, tensor<4x4x1x1xf32>
  %s1 = mpc.batch_norm %p1, %s1.weight, %s1.bias, %s1.running_mean,
      %s1.running_var : tensor<8x4x64x64xf32>, tensor<4xf32>
  %sum1 = mpc.add %y1, %s1 : tensor<8x4x64x64xf32>, tensor<8x4x64x64xf32>
  %r1 = mpc.relu %sum1 : tensor<8x4x64x64xf32>
  %c2 = mpc.conv2d %r1, %c2.weight stride [2, 2]
      : tensor<8x4x64x64xf32>, tensor<4x4x1x1xf32>
  %y2 = mpc.batch_norm %c2, %y2.weight, %y2.bias, %y2.running_mean,
      %y2.running_var : tensor<8x4x32x32xf32>, tensor<4xf32>
  %p2 = mpc.conv2d %r1, %p2.weight stride [2, 2]
      : tensor<8x4x64x64xf32>, tensor<4x4x1x1xf32>
  %s2 = mpc.batch_norm %p2, %s2.weight, %s2.bias, %s2.running_mean,
      %s2.running_var : tensor<8x4x32x32xf32>, tensor<4xf32>
  %sum2 = mpc.add %y2, %s2 : tensor<8x4x32x32xf32>, tensor<8x4x32x32xf32>
  %r2 = mpc.relu %sum2 : tensor<8x4x32x32xf32>
  %loss = mpc.mse_loss %r2, %target
      : tensor<8x4x32x32xf32>, tensor<8x4x32x32xf32>
  mpc.output loss(%loss : tensor<f32>)
}
