// RUN: mpc compile %s --emit=kernels | FileCheck %s
// RUN: mpc compile %s --emit=host | FileCheck %s --check-prefix=HOST
// RUN: mpc compile %s --emit=kernels --amp=O2 --half=bf16 --optimizer-state=bf16 --master-weights=none | FileCheck %s --check-prefix=BF16

// The embedding gradient without float atomics: on the GPU (and emulated)
// a warp a position, the first position of each index summing the rows of
// all its positions in position order in registers and writing its row
// once (mpc_embedding_grad_rows), so its bits do not depend on the order
// blocks run in; on the cpu target one thread that links each index's
// positions in order (mpc_embedding_grad_lists) and writes every row: the
// same additions in the same order.
// CHECK-LABEL: __global__ void __launch_bounds__(256) embeddings_k{{[0-9]+}}_embedding_grad_zero(float *__restrict__ table)
//  CHECK-NEXT: #ifdef MPC_DEVICE_BLOCKS
//  CHECK-NEXT:   MPC_FOR_EACH(i, 30LL) mpc_store(table + i, 0.0f);
//  CHECK-NEXT: #endif
// CHECK-LABEL: __global__ void __launch_bounds__(256) embeddings_k{{[0-9]+}}_embedding_grad(
//  CHECK-SAME:   float *__restrict__ table, long long *__restrict__ links, float *__restrict__ sums)
//  CHECK-NEXT: #ifdef MPC_DEVICE_BLOCKS
//  CHECK-NEXT:   mpc_embedding_grad_rows<1>(dy, indices, table, 12LL, 6LL, 5LL);
//  CHECK-NEXT: #else
//  CHECK-NEXT:   if (blockIdx.x == 0)
//  CHECK-NEXT:     mpc_embedding_grad_lists(dy, indices, table, links, sums, 12LL, 6LL, 5LL);
//  CHECK-NEXT: #endif
//   CHECK-NOT: atomicAdd
//       CHECK: }

// A warp for each of the 12 positions (8 a block); the cpu target's
// scratch is the lists (5 rows and 12 positions, 8 bytes each) and a row
// of sums.
// HOST-LABEL: embeddings_train_step
//       HOST: MPC_LAUNCH(embeddings_k{{[0-9]+}}_embedding_grad_zero, 1, 256, (float *)(arena1 + [[TABLE:[0-9]+]]));
//       HOST: MPC_LAUNCH_PARALLEL(embeddings_k{{[0-9]+}}_embedding_grad, 2, 256, {{[0-9]+}}LL, {{.*}}, (float *)(arena1 + [[TABLE]]), (long long *)(arena3 + {{[0-9]+}}), (float *)(arena3 +

// A bf16 table gradient (no f32 master weights) is written in bf16 from
// the f32 sums: no f32 copy of the table, no pass rounding it.
// BF16-LABEL: embeddings_k{{[0-9]+}}_embedding_grad_zero(__nv_bfloat16 *__restrict__ table)
//       BF16: embeddings_k{{[0-9]+}}_embedding_grad(const __nv_bfloat16 *__restrict__ dy, const int *__restrict__ indices, __nv_bfloat16 *__restrict__ table,
//   BF16-NOT: embedding_grad_round

mpc.model @embeddings
    inputs(%tokens: tensor<3x4xi32>, %r: tensor<3x4x6xf32>)
    params(%table: tensor<5x6xf32> = normal(1.0)) {
  %e = mpc.embedding %table, %tokens : tensor<5x6xf32>, tensor<3x4xi32>
  %p = mpc.mul %e, %r : tensor<3x4x6xf32>, tensor<3x4x6xf32>
  %loss = mpc.reduce_sum %p dims [0, 1, 2] : tensor<3x4x6xf32>
  mpc.output loss(%loss : tensor<f32>)
}
