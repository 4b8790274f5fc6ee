// RUN: mpc-opt %s --split-input-file --mpc-autodiff --mpc-recompute=ops=gelu \
// RUN:   | FileCheck %s

// The GELU's output is read by the backward pass (the second linear's
// weight gradient): a copy computes it again just before that reader, and
// the forward one is read by the forward pass only. Its input stays
// alive anyway (the GELU gradient reads it). The tanh is not in `ops`.
// CHECK-LABEL: mpc.model @mlp
//       CHECK:   %[[H:.*]] = mpc.linear %x, %w1
//       CHECK:   %[[G:.*]] = mpc.gelu %[[H]] approximate tanh
//       CHECK:   %[[Y:.*]] = mpc.linear %[[G]], %w2
//       CHECK:   %[[T:.*]] = mpc.tanh %[[Y]]
//       CHECK:   mpc.tanh_grad {{.*}}, %[[T]]
//       CHECK:   %[[G2:.*]] = mpc.gelu %[[H]] approximate tanh
//  CHECK-NEXT:   mpc.matmul {{.*}}, %[[G2]] transpose_lhs
//       CHECK:   mpc.gelu_grad {{.*}}, %[[H]] approximate tanh
//   CHECK-NOT:   mpc.gelu %
mpc.model @mlp inputs(%x: tensor<4x8xf32>) params(%w1: tensor<16x8xf32> = normal(1.0), %w2: tensor<8x16xf32> = normal(1.0)) {
  %h = mpc.linear %x, %w1 : tensor<4x8xf32>, tensor<16x8xf32>
  %g = mpc.gelu %h approximate tanh : tensor<4x16xf32>
  %y = mpc.linear %g, %w2 : tensor<4x16xf32>, tensor<8x16xf32>
  %t = mpc.tanh %y : tensor<4x8xf32>
  %l = mpc.reduce_sum %t dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A GELU the backward pass does not read (its output feeds only a sum,
// whose gradient does not need it) is left alone.
// CHECK-LABEL: mpc.model @unread
//   CHECK-NOT:   mpc.gelu {{.*}}
//       CHECK:   %[[G:.*]] = mpc.gelu
//   CHECK-NOT:   mpc.gelu {{.*}}
//       CHECK:   mpc.output
mpc.model @unread inputs(%x: tensor<4x8xf32>) params(%w: tensor<8x8xf32> = normal(1.0)) {
  %h = mpc.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %g = mpc.gelu %h approximate tanh : tensor<4x8xf32>
  %l = mpc.reduce_sum %g dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A model without parameters has no gradients, hence no backward pass to
// recompute for.
// CHECK-LABEL: mpc.model @no_params
//       CHECK:   mpc.gelu
//   CHECK-NOT:   mpc.gelu
mpc.model @no_params inputs(%x: tensor<4x8xf32>) params() {
  %g = mpc.gelu %x approximate tanh : tensor<4x8xf32>
  %l = mpc.reduce_sum %g dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}
