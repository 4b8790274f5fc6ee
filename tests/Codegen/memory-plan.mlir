// RUN: mpc compile %s --emit=host | FileCheck %s

// A chain of row kernels on 64x64 f32 values (16384 bytes each). Evaluation
// needs the pinned input (16384) and loss (64, aligned), plus two live
// values at a time: each softmax reads one buffer and writes the other, so
// the three softmax results and the matmul share two buffers:
// 16384 + 64 + 2 * 16384 = 49216 bytes. The training step must keep every
// softmax output for its backward pass, so it reuses less.
mpc.model @chain inputs(%x: tensor<64x64xf32>) params(%w: tensor<64x64xf32> = normal(1.0)) {
  %0 = mpc.matmul %x, %w : tensor<64x64xf32>, tensor<64x64xf32>
  %1 = mpc.softmax %0 dim 1 : tensor<64x64xf32>
  %2 = mpc.softmax %1 dim 1 : tensor<64x64xf32>
  %3 = mpc.softmax %2 dim 1 : tensor<64x64xf32>
  %4 = mpc.reduce_sum %3 dims [0, 1] : tensor<64x64xf32>
  mpc.output loss(%4 : tensor<f32>)
}

// The descriptor places the input and the loss at the pinned start of the
// activation arena, and the parameter at offset 0 of the parameter arena.
// CHECK: static const mpc_tensor_desc chain_inputs[] = {
// CHECK-NEXT:   {"x", MPC_F32, 2, {64, 64}, 4096, 3, 0,
// CHECK: static const mpc_tensor_desc chain_params[] = {
// CHECK-NEXT:   {"w", MPC_F32, 2, {64, 64}, 4096, 0, 0,
// CHECK: static const mpc_tensor_desc chain_outputs[] = {
// CHECK-NEXT:   {"loss", MPC_F32, 0, {}, 1, 3, 16384,

// Checked last: the plan is stated after the descriptors.
// The optimizer state is the momentum slot (16384) and the
// training control block (2136 bytes).
// CHECK: // Memory plan (bytes): parameters, state and half copies 16384, gradients 16384, optimizer state 18520, activations [[TRAIN:[0-9]+]] (train step [[TRAIN]] reusing memory by liveness, [[NOREUSE:[0-9]+]] without reuse; eval 49216)
