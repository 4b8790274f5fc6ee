// RUN: mpc compile %s --emit=kernels | FileCheck %s
// RUN: mpc compile %s --emit=host | FileCheck %s --check-prefix=HOST

// The embedding gradient without float atomics: on the GPU (and emulated)
// a block a position, the first position of each index adding the rows of
// all its positions in position order (mpc_embedding_grad_rows), so its
// bits do not depend on the order blocks run in; on the cpu target the
// scatter, which adds the same rows in the same order, its blocks in order
// on one thread.
// CHECK-LABEL: __global__ void __launch_bounds__(256) embeddings_k{{[0-9]+}}_embedding_grad_zero(
//       CHECK:   MPC_FOR_EACH(i, 30LL) table[i] = 0.0f;
// CHECK-LABEL: __global__ void __launch_bounds__(256) embeddings_k{{[0-9]+}}_embedding_grad(
//  CHECK-NEXT: #ifdef MPC_DEVICE_BLOCKS
//  CHECK-NEXT:   mpc_embedding_grad_rows(dy, indices, table, 12LL, 6LL, 5LL);
//  CHECK-NEXT: #else
//  CHECK-NEXT:   MPC_FOR_EACH(i, 72LL) {
//       CHECK:     table[index * 6LL + i % 6LL] += mpc_load(dy + i);
//       CHECK: #endif
//   CHECK-NOT: atomicAdd
//       CHECK: }

// A block for each of the 12 positions (MPC_LAUNCH: in order, on one
// thread).
// HOST-LABEL: embeddings_train_step
//       HOST: MPC_LAUNCH(embeddings_k{{[0-9]+}}_embedding_grad, 12, 256,

mpc.model @embeddings
    inputs(%tokens: tensor<3x4xi32>, %r: tensor<3x4x6xf32>)
    params(%table: tensor<5x6xf32> = normal(1.0)) {
  %e = mpc.embedding %table, %tokens : tensor<5x6xf32>, tensor<3x4xi32>
  %p = mpc.mul %e, %r : tensor<3x4x6xf32>, tensor<3x4x6xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2] : tensor<3x4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
