// RUN: mpc compile %s --target=cuda --arch=sm_90 --amp=O2 --half=bf16 \
// RUN:   --emit=kernels | FileCheck %s --check-prefix=KERNELS
// RUN: mpc compile %s --target=cuda --arch=sm_90 --amp=O2 --half=bf16 \
// RUN:   --emit=host | FileCheck %s --check-prefix=HOST
// RUN: mpc compile %s --target=cuda --arch=sm_90 --emit=kernels \
// RUN:   | FileCheck %s --check-prefix=FLOATS
// RUN: mpc compile %s --target=cpu --emulate-blocks --emit=host \
// RUN:   | FileCheck %s --check-prefix=EMULATED
// RUN: mpc compile %s --target=cuda --arch=sm_80 --amp=O2 --half=bf16 \
// RUN:   --emit=host | FileCheck %s --check-prefix=SLICED \
// RUN:       --implicit-check-not=MPC_LAUNCH_CLUSTER
// RUN: mpc compile %s --target=cpu --emit=host \
// RUN:   | FileCheck %s --check-prefix=SLICED \
// RUN:       --implicit-check-not=MPC_LAUNCH_CLUSTER

// A batch norm whose channels of 32,768 elements ([8, 2, 64, 64]) are
// summed in 2 slices of 16,384. On GPUs with thread-block clusters (sm_90)
// a channel's 2 blocks are one cluster, each way one kernel: a block holds
// its slice in registers (16 a thread of 1,024: 8 pairs at O2), stores its
// partial sums, and after the cluster's barrier combines the channel's and
// normalises (forward) or writes dx (backward) from its registers. sm_80
// and the cpu target keep the sliced kernels (partials, statistics, the
// elementwise pass); emulated blocks on the cpu stand for sm_90's.

// KERNELS-LABEL: __global__ void __launch_bounds__(1024, 1) MPC_CLUSTER_DIMS(2) bn_k{{[0-9]+}}_batch_norm_cluster(
//       KERNELS:   long long c = blockIdx.x / 2LL, s = blockIdx.x % 2LL;
//       KERNELS:   bool held = blockDim.x * 8LL >= (end - begin) / 2;
//  KERNELS-NEXT:   mpc_pair v[8];
//       KERNELS:       v[k] = mpc_load_pair(xc + t / 4096LL * 8192LL + t % 4096LL);
//       KERNELS:     MPC_SUM_CHANNEL_SLICE(begin, end, 4096LL, 8192LL, at, sum, mpc_load(xc + at));
//       KERNELS:     partials[2LL * blockIdx.x] = total;
//  KERNELS-NEXT:     partials[2LL * blockIdx.x + 1] = m2;
//  KERNELS-NEXT:   }
//  KERNELS-NEXT:   mpc_cluster_sync();
//  KERNELS-NEXT:   const float *p = partials + 2LL * 2LL * c;
//       KERNELS:   if (s == 0 && threadIdx.x == 0) {
//  KERNELS-NEXT: stats[c] = mean;
//       KERNELS:       float normalised = (mpc_pair_element<__nv_bfloat16>(v[k], 0) - mean) * rstd;

// The gradient holds x and dy two to a register (16 elements a thread in 8
// pairs each), sums as batch_norm_grad_partials does, and after the barrier
// writes dgamma and dbeta once a channel, and dx.
// KERNELS-LABEL: __global__ void __launch_bounds__(1024, 1) MPC_CLUSTER_DIMS(2) bn_k{{[0-9]+}}_batch_norm_grad_cluster(
//       KERNELS:   mpc_pair xv[8], dv[8];
//       KERNELS:     MPC_FOR_THREAD_UNROLLED(k, j, end - begin, 16) {
//       KERNELS:       mpc_hold_pair<__nv_bfloat16>(xv, k, xk);
//  KERNELS-NEXT:       mpc_hold_pair<__nv_bfloat16>(dv, k, d);
//       KERNELS:   mpc_cluster_sync();
//       KERNELS:   float channelDyXhat = cdyx * rstd;
//  KERNELS-NEXT:   if (s == 0 && threadIdx.x == 0) {
//  KERNELS-NEXT:     mpc_store(dgamma + c, channelDyXhat);
//  KERNELS-NEXT:     mpc_store(dbeta + c, csdy);
//       KERNELS:       float d = mpc_held_pair<__nv_bfloat16>(dv, k);
//  KERNELS-NEXT:       float xhat = (mpc_held_pair<__nv_bfloat16>(xv, k) - mean) * rstd;

// The launches, and the host table the mock driver reads the clusters from.
// HOST: MPC_LAUNCH_CLUSTER(bn_k{{[0-9]+}}_batch_norm_cluster, 4, 1024, 2,
// HOST: MPC_LAUNCH_CLUSTER(bn_k{{[0-9]+}}_batch_norm_grad_cluster, 4, 1024, 2,
// HOST: MPC_CUDA_HOST_KERNEL(bn_k{{[0-9]+}}_batch_norm_cluster, 1024, 2),
// HOST: MPC_CUDA_HOST_KERNEL(bn_k{{[0-9]+}}_batch_norm_grad_cluster, 1024, 2),

// At O0 the f32 slices are held as 16 floats a thread.
// FLOATS-LABEL: MPC_CLUSTER_DIMS(2) bn_k{{[0-9]+}}_batch_norm_cluster(
//       FLOATS:   float v[16];
// FLOATS-LABEL: MPC_CLUSTER_DIMS(2) bn_k{{[0-9]+}}_batch_norm_grad_cluster(
//       FLOATS:   float xv[16], dv[16];
//       FLOATS:       xv[k] = xk;

// EMULATED: MPC_LAUNCH_CLUSTER(bn_k{{[0-9]+}}_batch_norm_cluster, 4, 1024, 2,
// EMULATED: MPC_LAUNCH_CLUSTER(bn_k{{[0-9]+}}_batch_norm_grad_cluster, 4, 1024, 2,

// SLICED: bn_k{{[0-9]+}}_batch_norm_partials, 4, 1024,
// SLICED: bn_k{{[0-9]+}}_batch_norm_stats,
// SLICED: bn_k{{[0-9]+}}_batch_norm_apply,
// SLICED: bn_k{{[0-9]+}}_batch_norm_grad_partials, 4, 1024,
// SLICED: bn_k{{[0-9]+}}_batch_norm_grad_params,
// SLICED: bn_k{{[0-9]+}}_batch_norm_grad_input,

mpc.model @bn
    inputs(%x: tensor<8x2x64x64xf32>, %target: tensor<8x2x64x64xf32>)
    params(%scale: tensor<2x1x1xf32> = normal(1.0, 0.5),
           %bn.weight: tensor<2xf32> = ones, %bn.bias: tensor<2xf32> = zeros)
    state(%bn.running_mean: tensor<2xf32> = zeros,
          %bn.running_var: tensor<2xf32> = ones) {
  %sb = mpc.broadcast %scale : tensor<2x1x1xf32> to tensor<8x2x64x64xf32>
  %xs = mpc.mul %sb, %x : tensor<8x2x64x64xf32>, tensor<8x2x64x64xf32>
  %y = mpc.batch_norm %xs, %bn.weight, %bn.bias, %bn.running_mean,
      %bn.running_var : tensor<8x2x64x64xf32>, tensor<2xf32>
  %loss = mpc.mse_loss %y, %target
      : tensor<8x2x64x64xf32>, tensor<8x2x64x64xf32>
  mpc.output loss(%loss : tensor<f32>)
}
