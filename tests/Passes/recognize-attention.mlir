// RUN: mpc-opt %s --split-input-file --mpc-recognize-attention | FileCheck %s

// Written-out attention becomes mpc.attention; what must stay written out
// stays, each case with its reason.

// GPT-2's form: heads transposed in, scaled, causally masked, transposed
// back. The attention reads and writes [B, T, H, D] directly: no transpose
// is left, nor the mask and the -inf fill that only it read.
// CHECK-LABEL: func.func @causal_bthd
//  CHECK-SAME:   (%[[Q:.*]]: tensor<2x16x3x8xf32>, %[[K:.*]]: tensor<2x16x3x8xf32>, %[[V:.*]]: tensor<2x16x3x8xf32>)
//  CHECK-NEXT:   %[[Y:.*]], %{{.*}} = mpc.attention %[[Q]], %[[K]], %[[V]] scale 2.500000e-01 causal layout bthd : tensor<2x16x3x8xf32>, tensor<2x16x3x8xf32>, tensor<2x16x3x8xf32>
//  CHECK-NEXT:   return %[[Y]] : tensor<2x16x3x8xf32>
func.func @causal_bthd(%q: tensor<2x16x3x8xf32>, %k: tensor<2x16x3x8xf32>, %v: tensor<2x16x3x8xf32>) -> tensor<2x16x3x8xf32> {
  %mask = mpc.causal_mask : tensor<16x16xi1>
  %neg_inf = mpc.constant dense<0xFF800000> : tensor<f32>
  %qh = mpc.transpose %q perm [0, 2, 1, 3] : tensor<2x16x3x8xf32>
  %kh = mpc.transpose %k perm [0, 2, 1, 3] : tensor<2x16x3x8xf32>
  %vh = mpc.transpose %v perm [0, 2, 1, 3] : tensor<2x16x3x8xf32>
  %s = mpc.batch_matmul %qh, %kh transpose_rhs : tensor<2x3x16x8xf32>, tensor<2x3x16x8xf32>
  %c = mpc.scale %s by 0.25 : tensor<2x3x16x16xf32>
  %m = mpc.where %mask, %c, %neg_inf : tensor<16x16xi1>, tensor<2x3x16x16xf32>, tensor<f32>
  %p = mpc.softmax %m dim 3 : tensor<2x3x16x16xf32>
  %y = mpc.batch_matmul %p, %vh : tensor<2x3x16x16xf32>, tensor<2x3x16x8xf32>
  %yt = mpc.transpose %y perm [0, 2, 1, 3] : tensor<2x3x16x8xf32>
  return %yt : tensor<2x16x3x8xf32>
}

// -----

// No scale, no mask, [B, H, T, D] operands, other lengths for keys and a
// smaller value head dim.
// CHECK-LABEL: func.func @plain_bhtd
//  CHECK-NEXT:   %[[Y:.*]], %{{.*}} = mpc.attention %arg0, %arg1, %arg2 scale 1.000000e+00 : tensor<2x3x5x8xf16>, tensor<2x3x7x8xf16>, tensor<2x3x7x4xf16>
//  CHECK-NEXT:   return %[[Y]]
func.func @plain_bhtd(%q: tensor<2x3x5x8xf16>, %k: tensor<2x3x7x8xf16>, %v: tensor<2x3x7x4xf16>) -> tensor<2x3x5x4xf16> {
  %s = mpc.batch_matmul %q, %k transpose_rhs : tensor<2x3x5x8xf16>, tensor<2x3x7x8xf16>
  %p = mpc.softmax %s dim 3 : tensor<2x3x5x7xf16>
  %y = mpc.batch_matmul %p, %v : tensor<2x3x5x7xf16>, tensor<2x3x7x4xf16>
  return %y : tensor<2x3x5x4xf16>
}

// -----

// A [T, S] mask that is not causal_mask's becomes the mask operand.
// CHECK-LABEL: func.func @mask_operand
//  CHECK-NEXT:   mpc.attention %arg0, %arg0, %arg0 mask %arg1 : tensor<16x16xi1> scale 1.250000e-01 : tensor<2x3x16x8xf32>
func.func @mask_operand(%q: tensor<2x3x16x8xf32>, %mask: tensor<16x16xi1>) -> tensor<2x3x16x8xf32> {
  %neg_inf = mpc.constant dense<0xFF800000> : tensor<f32>
  %s = mpc.batch_matmul %q, %q transpose_rhs : tensor<2x3x16x8xf32>, tensor<2x3x16x8xf32>
  %c = mpc.scale %s by 0.125 : tensor<2x3x16x16xf32>
  %m = mpc.where %mask, %c, %neg_inf : tensor<16x16xi1>, tensor<2x3x16x16xf32>, tensor<f32>
  %p = mpc.softmax %m dim 3 : tensor<2x3x16x16xf32>
  %y = mpc.batch_matmul %p, %q : tensor<2x3x16x16xf32>, tensor<2x3x16x8xf32>
  return %y : tensor<2x3x16x8xf32>
}

// -----

// Transposed in but not back out: the bhtd form, reading the transposes.
// CHECK-LABEL: func.func @not_transposed_back
//       CHECK:   %[[QH:.*]] = mpc.transpose %arg0
//       CHECK:   mpc.attention %[[QH]], %[[QH]], %[[QH]] scale 1.000000e+00 :
//   CHECK-NOT:   mpc.softmax
func.func @not_transposed_back(%q: tensor<2x16x3x8xf32>) -> tensor<2x3x16x8xf32> {
  %qh = mpc.transpose %q perm [0, 2, 1, 3] : tensor<2x16x3x8xf32>
  %s = mpc.batch_matmul %qh, %qh transpose_rhs : tensor<2x3x16x8xf32>, tensor<2x3x16x8xf32>
  %p = mpc.softmax %s dim 3 : tensor<2x3x16x16xf32>
  %y = mpc.batch_matmul %p, %qh : tensor<2x3x16x16xf32>, tensor<2x3x16x8xf32>
  return %y : tensor<2x3x16x8xf32>
}

// -----

// Not rewritten: the scores are returned too, so they are stored anyway.
// CHECK-LABEL: func.func @score_read_elsewhere
//   CHECK-NOT:   mpc.attention
//       CHECK:   mpc.softmax
func.func @score_read_elsewhere(%q: tensor<2x3x16x8xf32>) -> (tensor<2x3x16x8xf32>, tensor<2x3x16x16xf32>) {
  %s = mpc.batch_matmul %q, %q transpose_rhs : tensor<2x3x16x8xf32>, tensor<2x3x16x8xf32>
  %p = mpc.softmax %s dim 3 : tensor<2x3x16x16xf32>
  %y = mpc.batch_matmul %p, %q : tensor<2x3x16x16xf32>, tensor<2x3x16x8xf32>
  return %y, %s : tensor<2x3x16x8xf32>, tensor<2x3x16x16xf32>
}

// -----

// Not rewritten: the probabilities are returned too.
// CHECK-LABEL: func.func @probabilities_read_elsewhere
//   CHECK-NOT:   mpc.attention
//       CHECK:   mpc.softmax
func.func @probabilities_read_elsewhere(%q: tensor<2x3x16x8xf32>) -> (tensor<2x3x16x8xf32>, tensor<2x3x16x16xf32>) {
  %s = mpc.batch_matmul %q, %q transpose_rhs : tensor<2x3x16x8xf32>, tensor<2x3x16x8xf32>
  %p = mpc.softmax %s dim 3 : tensor<2x3x16x16xf32>
  %y = mpc.batch_matmul %p, %q : tensor<2x3x16x16xf32>, tensor<2x3x16x8xf32>
  return %y, %p : tensor<2x3x16x8xf32>, tensor<2x3x16x16xf32>
}

// -----

// Not rewritten: a softmax over the queries (dim 2) is not attention's.
// CHECK-LABEL: func.func @softmax_over_queries
//   CHECK-NOT:   mpc.attention
//       CHECK:   mpc.softmax %{{.*}} dim 2
func.func @softmax_over_queries(%q: tensor<2x3x16x8xf32>) -> tensor<2x3x16x8xf32> {
  %s = mpc.batch_matmul %q, %q transpose_rhs : tensor<2x3x16x8xf32>, tensor<2x3x16x8xf32>
  %p = mpc.softmax %s dim 2 : tensor<2x3x16x16xf32>
  %y = mpc.batch_matmul %p, %q : tensor<2x3x16x16xf32>, tensor<2x3x16x8xf32>
  return %y : tensor<2x3x16x8xf32>
}

// -----

// Not rewritten: a mask that differs per batch element is not a [T, S]
// mask (mpc.attention's mask is shared by every batch and head).
// CHECK-LABEL: func.func @mask_per_batch
//   CHECK-NOT:   mpc.attention
//       CHECK:   mpc.where
func.func @mask_per_batch(%q: tensor<2x3x16x8xf32>, %mask: tensor<2x1x16x16xi1>) -> tensor<2x3x16x8xf32> {
  %neg_inf = mpc.constant dense<0xFF800000> : tensor<f32>
  %s = mpc.batch_matmul %q, %q transpose_rhs : tensor<2x3x16x8xf32>, tensor<2x3x16x8xf32>
  %m = mpc.where %mask, %s, %neg_inf : tensor<2x1x16x16xi1>, tensor<2x3x16x16xf32>, tensor<f32>
  %p = mpc.softmax %m dim 3 : tensor<2x3x16x16xf32>
  %y = mpc.batch_matmul %p, %q : tensor<2x3x16x16xf32>, tensor<2x3x16x8xf32>
  return %y : tensor<2x3x16x8xf32>
}

// -----

// Not rewritten: a finite fill (-1e4, as some models write it) leaves
// masked keys a little weight, which mpc.attention would not.
// CHECK-LABEL: func.func @finite_fill
//   CHECK-NOT:   mpc.attention
//       CHECK:   mpc.where
func.func @finite_fill(%q: tensor<2x3x16x8xf32>) -> tensor<2x3x16x8xf32> {
  %mask = mpc.causal_mask : tensor<16x16xi1>
  %fill = mpc.constant dense<-1.0e4> : tensor<f32>
  %s = mpc.batch_matmul %q, %q transpose_rhs : tensor<2x3x16x8xf32>, tensor<2x3x16x8xf32>
  %m = mpc.where %mask, %s, %fill : tensor<16x16xi1>, tensor<2x3x16x16xf32>, tensor<f32>
  %p = mpc.softmax %m dim 3 : tensor<2x3x16x16xf32>
  %y = mpc.batch_matmul %p, %q : tensor<2x3x16x16xf32>, tensor<2x3x16x8xf32>
  return %y : tensor<2x3x16x8xf32>
}

// -----

// Not rewritten: q kᵀ without the transpose on k is not a score.
// CHECK-LABEL: func.func @untransposed_key
//   CHECK-NOT:   mpc.attention
func.func @untransposed_key(%q: tensor<2x3x16x16xf32>) -> tensor<2x3x16x16xf32> {
  %s = mpc.batch_matmul %q, %q : tensor<2x3x16x16xf32>, tensor<2x3x16x16xf32>
  %p = mpc.softmax %s dim 3 : tensor<2x3x16x16xf32>
  %y = mpc.batch_matmul %p, %q : tensor<2x3x16x16xf32>, tensor<2x3x16x16xf32>
  return %y : tensor<2x3x16x16xf32>
}

// -----

// nn.MultiheadAttention as torch.onnx exports it (torch 1.13): heads merged
// into the batch, [B*H, T, D]; the query divided by sqrt(D); kᵀ written out
// as a transpose of the [T, B*H, D] key; a 0/-inf causal attn_mask added.
// The attention runs on [1, B*H, T, D] views, the key transposed into
// place; the division, the scores' scale and the mask go.
// CHECK-LABEL: func.func @multihead_merged_causal
//  CHECK-SAME:   (%[[Q:.*]]: tensor<8x4x8xf32>, %[[K:.*]]: tensor<8x4x8xf32>, %[[V:.*]]: tensor<8x4x8xf32>)
//       CHECK:   %[[QT:.*]] = mpc.transpose %[[Q]] perm [1, 0, 2]
//       CHECK:   %[[VT:.*]] = mpc.transpose %[[V]] perm [1, 0, 2]
//       CHECK:   %[[KT:.*]] = mpc.transpose %[[K]] perm [1, 0, 2]
//       CHECK:   %[[Q4:.*]] = mpc.reshape %[[QT]] : tensor<4x8x8xf32> to tensor<1x4x8x8xf32>
//       CHECK:   %[[K4:.*]] = mpc.reshape %[[KT]] : tensor<4x8x8xf32> to tensor<1x4x8x8xf32>
//       CHECK:   %[[V4:.*]] = mpc.reshape %[[VT]] : tensor<4x8x8xf32> to tensor<1x4x8x8xf32>
//       CHECK:   %[[Y:.*]], %{{.*}} = mpc.attention %[[Q4]], %[[K4]], %[[V4]] scale 0.35355{{[0-9]*}} causal : tensor<1x4x8x8xf32>
//       CHECK:   %[[Y3:.*]] = mpc.reshape %[[Y]] : tensor<1x4x8x8xf32> to tensor<4x8x8xf32>
//       CHECK:   mpc.transpose %[[Y3]] perm [1, 0, 2]
//   CHECK-NOT:   mpc.softmax
//   CHECK-NOT:   mpc.div
func.func @multihead_merged_causal(%q: tensor<8x4x8xf32>, %k: tensor<8x4x8xf32>, %v: tensor<8x4x8xf32>) -> tensor<8x4x8xf32> {
  %qh = mpc.transpose %q perm [1, 0, 2] : tensor<8x4x8xf32>
  %vh = mpc.transpose %v perm [1, 0, 2] : tensor<8x4x8xf32>
  %root = mpc.constant dense<2.82842708> : tensor<f32>
  %qs = mpc.div %qh, %root : tensor<4x8x8xf32>, tensor<f32>
  %kt = mpc.transpose %k perm [1, 2, 0] : tensor<8x4x8xf32>
  %s = mpc.batch_matmul %qs, %kt : tensor<4x8x8xf32>, tensor<4x8x8xf32>
  %c = mpc.scale %s by 1.0 : tensor<4x8x8xf32>
  %mask = mpc.constant dense<[[[0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]]> : tensor<1x8x8xf32>
  %m = mpc.add %c, %mask : tensor<4x8x8xf32>, tensor<1x8x8xf32>
  %p = mpc.softmax %m dim 2 : tensor<4x8x8xf32>
  %y = mpc.batch_matmul %p, %vh : tensor<4x8x8xf32>, tensor<4x8x8xf32>
  %yt = mpc.transpose %y perm [1, 0, 2] : tensor<4x8x8xf32>
  return %yt : tensor<8x4x8xf32>
}

// -----

// Cross-attention (no mask), 3 queries to 5 keys, and a mask of zeros
// added, which hides nothing.
// CHECK-LABEL: func.func @multihead_merged_cross
//       CHECK:   mpc.attention %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 : tensor<1x4x3x8xf32>, tensor<1x4x5x8xf32>, tensor<1x4x5x8xf32>
//   CHECK-NOT:   mpc.softmax
func.func @multihead_merged_cross(%q: tensor<4x3x8xf32>, %k: tensor<5x4x8xf32>, %v: tensor<4x5x8xf32>) -> tensor<4x3x8xf32> {
  %two = mpc.constant dense<2.0> : tensor<f32>
  %qs = mpc.div %q, %two : tensor<4x3x8xf32>, tensor<f32>
  %kt = mpc.transpose %k perm [1, 2, 0] : tensor<5x4x8xf32>
  %s = mpc.batch_matmul %qs, %kt : tensor<4x3x8xf32>, tensor<4x8x5xf32>
  %zeros = mpc.constant dense<0.0> : tensor<3x5xf32>
  %m = mpc.add %s, %zeros : tensor<4x3x5xf32>, tensor<3x5xf32>
  %p = mpc.softmax %m dim 2 : tensor<4x3x5xf32>
  %y = mpc.batch_matmul %p, %v : tensor<4x3x5xf32>, tensor<4x5x8xf32>
  return %y : tensor<4x3x8xf32>
}

// -----

// Not rewritten: an added mask with finite values (a bias such as ALiBi,
// which mpc.attention has no operand for).
// CHECK-LABEL: func.func @additive_bias
//   CHECK-NOT:   mpc.attention
func.func @additive_bias(%q: tensor<4x3x8xf32>) -> tensor<4x3x8xf32> {
  %kt = mpc.transpose %q perm [0, 2, 1] : tensor<4x3x8xf32>
  %s = mpc.batch_matmul %q, %kt : tensor<4x3x8xf32>, tensor<4x8x3xf32>
  %bias = mpc.constant dense<[[0.0, -1.0, -2.0], [0.0, 0.0, -1.0], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %m = mpc.add %s, %bias : tensor<4x3x3xf32>, tensor<3x3xf32>
  %p = mpc.softmax %m dim 2 : tensor<4x3x3xf32>
  %y = mpc.batch_matmul %p, %q : tensor<4x3x3xf32>, tensor<4x3x8xf32>
  return %y : tensor<4x3x8xf32>
}
