// RUN: mpc compile %s --target=cuda --emit=kernels | FileCheck %s

// A batch norm whose channel a block sums is one kernel each way, its block
// as large as the channel needs: at least 16 elements a thread, 128 to 1024
// threads. [32, 4, 28, 28]: 25,088 elements a channel, 1,024 threads;
// [32, 8, 7, 7]: 1,568, 128 threads.
// On the GPU, each thread keeps its elements of the channel in registers
// and loads them once, with a budget of 64 registers (1 block of 1,024
// threads an SM, 8 of 128); a block of fewer threads (emulated) takes the
// passes over the channel. The 28x28 one, 25 elements a thread, keeps
// them in 13 pairs (a 4-byte load each; planes of 784 elements); the 7x7
// one (planes of 49) in 13 floats, their offsets in 32-bit arithmetic
// (the tensors are under 2^31 elements). Kernels are checked in the order
// they are emitted.

// A channel of 262,144 elements ([4, 2, 256, 256]) is summed in 16 slices
// of 16,384 by blocks of 1,024 threads; on the GPU each thread keeps its
// 16 elements of a slice in 8 pairs for both sums.
// CHECK-LABEL: __global__ void __launch_bounds__(1024, 1) bn_k{{[0-9]+}}_batch_norm_partials(
//       CHECK: #ifdef MPC_DEVICE_BLOCKS
//  CHECK-NEXT:   if (blockDim.x * 8LL >= 8192LL) {
//  CHECK-NEXT:     mpc_pair v[8];
//  CHECK-NEXT:     mpc_sum sum = 0.0f;
//  CHECK-NEXT:     MPC_FOR_THREAD_UNROLLED(k, p, (end - begin) / 2, 8) {
//  CHECK-NEXT:       long long t = begin + 2 * p;
//  CHECK-NEXT:       v[k] = mpc_load_pair(xc + t / 65536LL * 131072LL + t % 65536LL);
//       CHECK:     float m2 = mpc_block_reduce_sum(squares);
//       CHECK:     return;
//       CHECK: #endif
//  CHECK-NEXT:   mpc_sum sum = 0.0f;
//  CHECK-NEXT:   MPC_SUM_CHANNEL_SLICE(

// The elementwise pass of a batch norm in slices loads a channel's values
// when a thread's channel changes, not with every element.
// CHECK-LABEL: bn_k{{[0-9]+}}_batch_norm_apply(
//  CHECK-NEXT: #ifdef MPC_DEVICE_BLOCKS
//  CHECK-NEXT:   long long cached = -1;
//  CHECK-NEXT:   float mean = 0.0f, rstd = 0.0f, g = 0.0f, b = 0.0f;
//  CHECK-NEXT:   MPC_FOR_EACH(i, 524288LL) {
//  CHECK-NEXT:     long long c = (i / 65536LL) % 2LL;
//  CHECK-NEXT:     if (c != cached) {

// CHECK-LABEL: __global__ void __launch_bounds__(128, 8) bn_k{{[0-9]+}}_batch_norm(
//       CHECK: #ifdef MPC_DEVICE_BLOCKS
//  CHECK-NEXT:   if (blockDim.x * 13LL >= 1568LL) {
//  CHECK-NEXT:     float v[13];
//  CHECK-NEXT:     mpc_sum sum = 0.0f;
//  CHECK-NEXT:     MPC_FOR_THREAD_UNROLLED(k, t, 1568LL, 13) {
//  CHECK-NEXT:       v[k] = mpc_load(xc + t / 49 * 392 + t % 49);
//       CHECK:     MPC_FOR_THREAD_UNROLLED(k, t, 1568LL, 13) squares += mpc_square(v[k] - mean);
//       CHECK:       float normalised = (v[k] - mean) * rstd;
//       CHECK:     return;
//       CHECK: #endif
//  CHECK-NEXT:   mpc_sum sum = 0.0f;
//  CHECK-NEXT:   MPC_SUM_CHANNEL(32LL, 49LL, 392LL, at, sum, mpc_load(xc + at));

// CHECK-LABEL: __global__ void __launch_bounds__(1024, 1) bn_k{{[0-9]+}}_batch_norm(
//       CHECK: #ifdef MPC_DEVICE_BLOCKS
//  CHECK-NEXT:   if (blockDim.x * 13LL >= 12544LL) {
//  CHECK-NEXT:     mpc_pair v[13];
//  CHECK-NEXT:     mpc_sum sum = 0.0f;
//  CHECK-NEXT:     MPC_FOR_THREAD_UNROLLED(k, p, 12544LL, 13) {
//  CHECK-NEXT:       v[k] = mpc_load_pair(xc + p / 392 * 3136 + p % 392 * 2);
//  CHECK-NEXT:       sum += mpc_pair_element<__nv_bfloat16>(v[k], 0);
//  CHECK-NEXT:       sum += mpc_pair_element<__nv_bfloat16>(v[k], 1);
//       CHECK:       mpc_store(y + i + 1, bn_k{{[0-9]+}}_batch_norm_y(normalised * g + b, i + 1));
//       CHECK: #endif
//  CHECK-NEXT:   mpc_sum sum = 0.0f;
//  CHECK-NEXT:   MPC_SUM_CHANNEL(

// Backward, every ReLU right after a batch norm is its gradient's mask
// (mpc-save-batch-norm-statistics): dy is zeroed where the forward's
// output, computed again from x, the saved statistics, gamma and beta, was
// not positive, so the ReLU's output is not read.
// The gradient of the second batch norm of [32, 4, 28, 28] writes dx: with
// 25 elements a thread, dy (masked once an element and packed) is kept in
// 13 pairs, x is loaded in pairs, and dx's two elements are stored
// together.
// CHECK-LABEL: __global__ void __launch_bounds__(1024, 1) bn_k{{[0-9]+}}_batch_norm_grad(
//  CHECK-SAME: const float *__restrict__ saved, const float *__restrict__ relu_beta,
//       CHECK:   float relu_g = mpc_load(gamma + c), relu_b = mpc_load(relu_beta + c);
//       CHECK:   if (blockDim.x * 13LL >= 12544LL) {
//  CHECK-NEXT:     mpc_pair dv[13];
//  CHECK-NEXT:     mpc_sum sdy = 0.0f, sdyx = 0.0f;
//  CHECK-NEXT:     MPC_FOR_THREAD_UNROLLED(k, p, 12544LL, 13) {
//  CHECK-NEXT:       int at = p / 392 * 3136 + p % 392 * 2;
//  CHECK-NEXT:       mpc_pair xp = mpc_load_pair(xc + at);
//  CHECK-NEXT:       float d0 = mpc_batch_norm_relu_grad<__nv_bfloat16>(bn_k{{[0-9]+}}_batch_norm_grad_dy({{.*}}c * 784LL + at), mpc_pair_element<__nv_bfloat16>(xp, 0), mean, rstd, relu_g, relu_b), d1 = mpc_batch_norm_relu_grad<__nv_bfloat16>(bn_k{{[0-9]+}}_batch_norm_grad_dy({{.*}}c * 784LL + at + 1), mpc_pair_element<__nv_bfloat16>(xp, 1), mean, rstd, relu_g, relu_b);
//  CHECK-NEXT:       dv[k] = mpc_make_pair<__nv_bfloat16>(d0, d1);
//       CHECK:       mpc_pair xp = mpc_load_pair(x + i);
//       CHECK:       mpc_store_pair(dx + i, mpc_make_pair<__nv_bfloat16>(gamma_c * rstd * g0, gamma_c * rstd * g1));
// The passes of a block smaller than the channel (emulated) mask dy in the
// sums and again for dx.
//       CHECK:   MPC_SUM_CHANNEL2_OF(32LL, 784LL, 3136LL, at, d, mpc_batch_norm_relu_grad<__nv_bfloat16>(bn_k{{[0-9]+}}_batch_norm_grad_dy({{.*}}), mpc_load(xc + at), mean, rstd, relu_g, relu_b), sdy, d, sdyx, d * (mpc_load(xc + at) - mean) * rstd);
//       CHECK:     float d = bn_k{{[0-9]+}}_batch_norm_grad_dy({{.*}}, i);
//  CHECK-NEXT:     d = mpc_batch_norm_relu_grad<__nv_bfloat16>(d, mpc_load(x + i), mean, rstd, gamma_c, relu_b);
//  CHECK-NEXT:     float xhat = (mpc_load(x + i) - mean) * rstd;

// The gradient reads the forward's mean and rstd (its `stats` result).
// Where it writes dx, on the GPU each thread keeps its elements of dy
// (masked once) and of x in registers from the sums to dx.
// CHECK-LABEL: __global__ void __launch_bounds__(128, 8) bn_k{{[0-9]+}}_batch_norm_grad(
//  CHECK-SAME: const float *__restrict__ gamma, const float *__restrict__ saved,
//       CHECK:   float mean = saved[c], rstd = saved[8LL + c];
//  CHECK-NEXT:   float relu_g = mpc_load(gamma + c), relu_b = mpc_load(relu_beta + c);
//  CHECK-NEXT: #ifdef MPC_DEVICE_BLOCKS
//  CHECK-NEXT:   if (blockDim.x * 13LL >= 1568LL) {
//  CHECK-NEXT:     float dv[13], xv[13];
//       CHECK:       xv[k] = mpc_load(xc + at);
//  CHECK-NEXT:       dv[k] = mpc_batch_norm_relu_grad<__nv_bfloat16>(bn_k{{[0-9]+}}_batch_norm_grad_dy({{.*}}c * 49LL + at), xv[k], mean, rstd, relu_g, relu_b);
//       CHECK:       float g = dv[k] - meanDy - xhat * meanDyXhat;
//  CHECK-NEXT:       mpc_store(dx + i, gamma_c * rstd * g);
//       CHECK:     return;

// A channel of 262,144 elements ([4, 2, 256, 256]) is summed in slices.
// The last batch norm's ReLU is its mask: each slice's sums read x, dy,
// gamma and beta, and so does the elementwise pass for dx.
// CHECK-LABEL: bn_k{{[0-9]+}}_batch_norm_grad_partials(
//  CHECK-SAME: const __nv_bfloat16 *__restrict__ x, const float *__restrict__ saved, const float *__restrict__ gamma, const float *__restrict__ relu_beta, float *__restrict__ partials) {
//       CHECK:   float mean = saved[c];
//  CHECK-NEXT:   float rstd = saved[2LL + c];
//  CHECK-NEXT:   float relu_g = mpc_load(gamma + c), relu_b = mpc_load(relu_beta + c);
//  CHECK-NEXT:   mpc_sum sdy = 0.0f, sdyx = 0.0f;
//  CHECK-NEXT:   MPC_SUM_CHANNEL_SLICE2_OF(begin, end, 65536LL, 131072LL, at, d, mpc_batch_norm_relu_grad<__nv_bfloat16>(bn_k{{[0-9]+}}_batch_norm_grad_partials_dy({{.*}}), mpc_load(xc + at), mean, rstd, relu_g, relu_b), sdy, d, sdyx, d * (mpc_load(xc + at) - mean));
// CHECK-LABEL: bn_k{{[0-9]+}}_batch_norm_grad_input(
//  CHECK-SAME: const float *__restrict__ stats, const float *__restrict__ relu_beta, __nv_bfloat16 *__restrict__ dx) {
//       CHECK:       relu_b = mpc_load(relu_beta + c);
//       CHECK:     d = mpc_batch_norm_relu_grad<__nv_bfloat16>(d, mpc_load(x + i), mean, rstd, gamma_c, relu_b);
//       CHECK:       d = mpc_batch_norm_relu_grad<__nv_bfloat16>(d, mpc_load(x + i), mean, rstd, gamma_c, relu_b);

// The incoming gradient of the second such batch norm is the ReLU's
// gradient after the residual sum (its prologue: no mask), which the
// shortcut reads too: the statistics pass stores it as it computes it, and
// the elementwise pass reads it back. The forward's mean is read, so a
// slice takes one pass: the sums of dy and dy * (x - mean), dy evaluated
// once for both.
// CHECK-LABEL: bn_k{{[0-9]+}}_batch_norm_grad_partials(
//  CHECK-SAME: __nv_bfloat16 *__restrict__ dy_out, const __nv_bfloat16 *__restrict__ x, const float *__restrict__ saved, float *__restrict__ partials) {
//       CHECK:   float mean = saved[c];
//  CHECK-NEXT:   mpc_sum sdy = 0.0f, sdyx = 0.0f;
//  CHECK-NEXT:   MPC_SUM_CHANNEL_SLICE2_OF(begin, end, 65536LL, 131072LL, at, d, mpc_store_and_use(dy_out + c * 65536LL + at, bn_k{{[0-9]+}}_batch_norm_grad_partials_dy({{.*}})), sdy, d, sdyx, d * (mpc_load(xc + at) - mean));
//   CHECK-NOT:   MPC_SUM_CHANNEL
//       CHECK:     partials[2LL * blockIdx.x + 1] = dyx;
// The channel's sums of the slices' partials, rstd the forward's.
// CHECK-LABEL: bn_k{{[0-9]+}}_batch_norm_grad_params(const float *__restrict__ partials, const float *__restrict__ saved, float *__restrict__ stats,
//       CHECK:     float mean = saved[c], rstd = saved[2LL + c];
//  CHECK-NEXT:     float sdyx = dyx * rstd;
// CHECK-LABEL: bn_k{{[0-9]+}}_batch_norm_grad_input(const __nv_bfloat16 *__restrict__ dy, const __nv_bfloat16 *__restrict__ x,
//       CHECK:     if (c != cached) {
//   CHECK-NOT:   relu
//       CHECK: }

// The gradients of the model's inputs (no dx): one pass over the channel
// for the sums, not three.
// CHECK-LABEL: __global__ void __launch_bounds__(1024) bn_k{{[0-9]+}}_batch_norm_grad(
//  CHECK-SAME: const float *__restrict__ gamma, const float *__restrict__ saved, const float *__restrict__ relu_beta, float *__restrict__ dgamma, float *__restrict__ dbeta) {
//       CHECK:   float mean = saved[c], rstd = saved[4LL + c];
//  CHECK-NEXT:   float relu_g = mpc_load(gamma + c), relu_b = mpc_load(relu_beta + c);
//  CHECK-NEXT:   mpc_sum sdy = 0.0f, sdyx = 0.0f;
//  CHECK-NEXT:   MPC_SUM_CHANNEL2_OF(32LL, 784LL, 3136LL, at, d, mpc_batch_norm_relu_grad<__nv_bfloat16>(mpc_load(dy + c * 784LL + at), mpc_load(xc + at), mean, rstd, relu_g, relu_b), sdy, d, sdyx, d * (mpc_load(xc + at) - mean) * rstd);
//  CHECK-NEXT:   float tdy = mpc_block_reduce_sum(sdy);
// CHECK-LABEL: __global__ void __launch_bounds__(128) bn_k{{[0-9]+}}_batch_norm_grad(
//   CHECK-NOT:   float dv[
//       CHECK:   MPC_SUM_CHANNEL2_OF(
mpc.model @bn
    inputs(%small: tensor<32x8x7x7xbf16>, %medium: tensor<32x4x28x28xbf16>,
           %large: tensor<4x2x256x256xbf16>)
    params(%g1: tensor<8xf32> = ones, %b1: tensor<8xf32> = zeros,
           %g2: tensor<4xf32> = ones, %b2: tensor<4xf32> = zeros,
           %g3: tensor<2xf32> = ones, %b3: tensor<2xf32> = zeros,
           %g4: tensor<2xf32> = ones, %b4: tensor<2xf32> = zeros,
           %g5: tensor<8xf32> = ones, %b5: tensor<8xf32> = zeros,
           %g6: tensor<4xf32> = ones, %b6: tensor<4xf32> = zeros,
           %g7: tensor<2xf32> = ones, %b7: tensor<2xf32> = zeros)
    state(%m1: tensor<8xf32> = zeros, %v1: tensor<8xf32> = ones,
          %m2: tensor<4xf32> = zeros, %v2: tensor<4xf32> = ones,
          %m3: tensor<2xf32> = zeros, %v3: tensor<2xf32> = ones,
          %m4: tensor<2xf32> = zeros, %v4: tensor<2xf32> = ones,
          %m5: tensor<8xf32> = zeros, %v5: tensor<8xf32> = ones,
          %m6: tensor<4xf32> = zeros, %v6: tensor<4xf32> = ones,
          %m7: tensor<2xf32> = zeros, %v7: tensor<2xf32> = ones) {
  %y1 = mpc.batch_norm %small, %g1, %b1, %m1, %v1
      : tensor<32x8x7x7xbf16>, tensor<8xf32>
  %y2 = mpc.batch_norm %medium, %g2, %b2, %m2, %v2
      : tensor<32x4x28x28xbf16>, tensor<4xf32>
  %y3 = mpc.batch_norm %large, %g3, %b3, %m3, %v3
      : tensor<4x2x256x256xbf16>, tensor<2xf32>
  %a = mpc.relu %y3 : tensor<4x2x256x256xbf16>
  %y4 = mpc.batch_norm %a, %g4, %b4, %m4, %v4
      : tensor<4x2x256x256xbf16>, tensor<2xf32>
  %s = mpc.add %y4, %a : tensor<4x2x256x256xbf16>, tensor<4x2x256x256xbf16>
  %r = mpc.relu %s : tensor<4x2x256x256xbf16>
  %y7 = mpc.batch_norm %r, %g7, %b7, %m7, %v7
      : tensor<4x2x256x256xbf16>, tensor<2xf32>
  %r7 = mpc.relu %y7 : tensor<4x2x256x256xbf16>
  %r1 = mpc.relu %y1 : tensor<32x8x7x7xbf16>
  %y5 = mpc.batch_norm %r1, %g5, %b5, %m5, %v5
      : tensor<32x8x7x7xbf16>, tensor<8xf32>
  %r5 = mpc.relu %y5 : tensor<32x8x7x7xbf16>
  %l1 = mpc.reduce_sum %r5 dims [0, 1, 2, 3] : tensor<32x8x7x7xbf16>
  %r2 = mpc.relu %y2 : tensor<32x4x28x28xbf16>
  %y6 = mpc.batch_norm %r2, %g6, %b6, %m6, %v6
      : tensor<32x4x28x28xbf16>, tensor<4xf32>
  %r6 = mpc.relu %y6 : tensor<32x4x28x28xbf16>
  %l2 = mpc.reduce_sum %r6 dims [0, 1, 2, 3] : tensor<32x4x28x28xbf16>
  %l3 = mpc.reduce_sum %r7 dims [0, 1, 2, 3] : tensor<4x2x256x256xbf16>
  %l12 = mpc.add %l1, %l2 : tensor<bf16>, tensor<bf16>
  %l = mpc.add %l12, %l3 : tensor<bf16>, tensor<bf16>
  %loss = mpc.cast %l : tensor<bf16> to tensor<f32>
  mpc.output loss(%loss : tensor<f32>)
}
