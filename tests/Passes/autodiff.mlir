// RUN: mpc-opt %s --mpc-autodiff --split-input-file --verify-diagnostics \
// RUN:   | FileCheck %s

// Only the branch the loss depends on gets backward ops; a parameter the loss
// ignores gets a zero gradient, and no gradient flows to the input. The
// extra output is dropped (evaluation returns it); canonicalize removes what
// only it read.
// CHECK-LABEL: mpc.model @negative_unused_branch
//       CHECK:   %[[A:.*]] = mpc.matmul %x, %w
//       CHECK:   %[[U:.*]] = mpc.matmul %x, %v
//       CHECK:   %[[T:.*]] = mpc.tanh %[[U]]
//       CHECK:   %[[S:.*]] = mpc.reduce_sum %[[A]]
//       CHECK:   %[[ONE:.*]] = mpc.constant {mpc.gradient_seed} dense<1.000000e+00> : tensor<f32>
//       CHECK:   %[[R:.*]] = mpc.reshape %[[ONE]] : tensor<f32> to tensor<1x1xf32>
//       CHECK:   %[[B:.*]] = mpc.broadcast %[[R]] : tensor<1x1xf32> to tensor<4x8xf32>
//       CHECK:   %[[DW:.*]] = mpc.matmul %x, %[[B]] transpose_lhs
//       CHECK:   %[[DV:.*]] = mpc.constant dense<0.000000e+00> : tensor<8x8xf32>
//   CHECK-NOT:   mpc.tanh_grad
//       CHECK:   mpc.output loss(%[[S]] : tensor<f32>) gradients(%[[DW]] : tensor<8x8xf32>, %[[DV]] : tensor<8x8xf32>)
mpc.model @negative_unused_branch
    inputs(%x: tensor<4x8xf32>)
    params(%w: tensor<8x8xf32> = normal(1.0), %v: tensor<8x8xf32> = normal(1.0)) {
  %a = mpc.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %unused = mpc.matmul %x, %v : tensor<4x8xf32>, tensor<8x8xf32>
  %t = mpc.tanh %unused : tensor<4x8xf32>
  %s = mpc.reduce_sum %a dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%s : tensor<f32>) extra(%t : tensor<4x8xf32>)
}

// -----

// An MLP: cross-entropy's fused softmax gradient, relu's mask (from its
// output, which the next layer keeps anyway), the weight
// gradients as transposed GEMMs, bias gradients as column sums. The input x
// is not a parameter, so the first layer computes no dx.
// CHECK-LABEL: mpc.model @mlp_classifier
//       CHECK:   %[[H:.*]] = mpc.linear %x, %w1, %b1
//       CHECK:   %[[A:.*]] = mpc.relu %[[H]]
//       CHECK:   %[[L:.*]] = mpc.linear %[[A]], %w2, %b2
//       CHECK:   %[[LOSS:.*]] = mpc.cross_entropy %[[L]], %y
//       CHECK:   %[[ONE:.*]] = mpc.constant {mpc.gradient_seed} dense<1.000000e+00>
//       CHECK:   %[[DL:.*]] = mpc.cross_entropy_grad %[[ONE]], %[[L]], %y
//       CHECK:   %[[DA:.*]] = mpc.matmul %[[DL]], %w2 : tensor<8x3xf32>, tensor<3x5xf32>
//       CHECK:   %[[DW2:.*]] = mpc.matmul %[[DL]], %[[A]] transpose_lhs
//       CHECK:   %[[DB2:.*]] = mpc.reduce_sum %[[DL]] dims [0]
//       CHECK:   %[[DH:.*]] = mpc.relu_grad %[[DA]], %[[A]]
//       CHECK:   %[[DW1:.*]] = mpc.matmul %[[DH]], %x transpose_lhs
//       CHECK:   %[[DB1:.*]] = mpc.reduce_sum %[[DH]] dims [0]
//   CHECK-NOT:   mpc.matmul %[[DH]], %w1
//       CHECK:   gradients(%[[DW1]] : tensor<5x4xf32>, %[[DB1]] : tensor<5xf32>, %[[DW2]] : tensor<3x5xf32>, %[[DB2]] : tensor<3xf32>)
mpc.model @mlp_classifier
    inputs(%x: tensor<8x4xf32>, %y: tensor<8xi32>)
    params(%w1: tensor<5x4xf32> = kaiming_uniform, %b1: tensor<5xf32> = zeros,
           %w2: tensor<3x5xf32> = kaiming_uniform, %b2: tensor<3xf32> = zeros) {
  %h = mpc.linear %x, %w1, %b1 : tensor<8x4xf32>, tensor<5x4xf32>, tensor<5xf32>
  %a = mpc.relu %h : tensor<8x5xf32>
  %l = mpc.linear %a, %w2, %b2 : tensor<8x5xf32>, tensor<3x5xf32>, tensor<3xf32>
  %loss = mpc.cross_entropy %l, %y : tensor<8x3xf32>, tensor<8xi32>
  mpc.output loss(%loss : tensor<f32>)
}

// -----

// A value used twice gets the sum of both gradients.
// CHECK-LABEL: mpc.model @fan_out_sums
//       CHECK:   mpc.constant {mpc.gradient_seed} dense<1.000000e+00>
//       CHECK:   %[[D1:.*]] = mpc.mul %{{.*}}, %w : tensor<4xf32>, tensor<4xf32>
//       CHECK:   %[[D2:.*]] = mpc.mul %{{.*}}, %w : tensor<4xf32>, tensor<4xf32>
//       CHECK:   %[[SUM:.*]] = mpc.add %[[D1]], %[[D2]]
//       CHECK:   gradients(%[[SUM]] : tensor<4xf32>)
mpc.model @fan_out_sums inputs() params(%w: tensor<4xf32> = ones) {
  %sq = mpc.mul %w, %w : tensor<4xf32>, tensor<4xf32>
  %s = mpc.reduce_sum %sq dims [0] : tensor<4xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// A broadcast operand's gradient is summed over the broadcast dims and
// reshaped back to the operand's shape.
// CHECK-LABEL: mpc.model @broadcast_bias_unbroadcasts
//       CHECK:   %[[DB:.*]] = mpc.reduce_sum %{{.*}} dims [0] : tensor<4x8xf32>
//       CHECK:   %[[R:.*]] = mpc.reshape %[[DB]] : tensor<8xf32> to tensor<1x8xf32>
//       CHECK:   gradients(%[[R]] : tensor<1x8xf32>)
mpc.model @broadcast_bias_unbroadcasts inputs(%x: tensor<4x8xf32>) params(%b: tensor<1x8xf32> = zeros) {
  %y = mpc.add %x, %b : tensor<4x8xf32>, tensor<1x8xf32>
  %s = mpc.reduce_sum %y dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// Batch norm: gamma and beta get gradients, running statistics do not (they
// are state, updated by the forward op).
// CHECK-LABEL: mpc.model @batch_norm_state_not_differentiated
//       CHECK:   %[[N:.*]] = mpc.batch_norm %x, %g, %b, %mean, %var
//       CHECK:   %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = mpc.batch_norm_grad %{{.*}}, %x, %g
//       CHECK:   gradients(%[[DG]] : tensor<3xf32>, %[[DB]] : tensor<3xf32>)
mpc.model @batch_norm_state_not_differentiated
    inputs(%x: tensor<2x3x4x4xf32>)
    params(%g: tensor<3xf32> = ones, %b: tensor<3xf32> = zeros)
    state(%mean: tensor<3xf32> = zeros, %var: tensor<3xf32> = ones) {
  %y = mpc.batch_norm %x, %g, %b, %mean, %var : tensor<2x3x4x4xf32>, tensor<3xf32>
  %s = mpc.reduce_sum %y dims [0, 1, 2, 3] : tensor<2x3x4x4xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// Embedding: the table's gradient is a scatter-add; integer indices get none.
// Dropout's backward reuses the forward mask through the same rate and seed.
// CHECK-LABEL: mpc.model @embedding_and_dropout
//       CHECK:   %[[E:.*]] = mpc.embedding %table, %ids
//       CHECK:   mpc.dropout %[[E]] rate 5.000000e-01 seed 7
//       CHECK:   %[[DD:.*]] = mpc.dropout %{{.*}} rate 5.000000e-01 seed 7
//       CHECK:   %[[DT:.*]] = mpc.embedding_grad %[[DD]], %ids : tensor<2x3x4xf32>, tensor<2x3xi32> -> tensor<10x4xf32>
//       CHECK:   gradients(%[[DT]] : tensor<10x4xf32>)
mpc.model @embedding_and_dropout
    inputs(%ids: tensor<2x3xi32>) params(%table: tensor<10x4xf32> = normal(1.0)) {
  %e = mpc.embedding %table, %ids : tensor<10x4xf32>, tensor<2x3xi32>
  %d = mpc.dropout %e rate 0.5 seed 7 : tensor<2x3x4xf32>
  %s = mpc.reduce_sum %d dims [0, 1, 2] : tensor<2x3x4xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// The pass runs once: a model that already returns gradients is an error.
mpc.model @twice inputs() params(%w: tensor<f32> = ones) {
  // expected-error@+1 {{model @twice already returns gradients; mpc-autodiff runs once}}
  mpc.output loss(%w : tensor<f32>) gradients(%w : tensor<f32>)
}

// -----

// mpc.attention is differentiated through its output only: a loss that
// depends on the logsumexp through a parameter is an error at the op.
mpc.model @attention_lse_in_loss
    inputs(%r: tensor<1x2x4x8xf32>)
    params(%q: tensor<1x2x4x8xf32> = normal(1.0)) {
  // expected-error@+1 {{'mpc.attention' is differentiated through its first result only, but the loss depends on result #1 through a parameter}}
  %y, %lse = mpc.attention %q, %q, %q scale 0.25 causal : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  %loss = mpc.reduce_sum %lse dims [0, 1, 2] : tensor<1x2x4xf32>
  mpc.output loss(%loss : tensor<f32>)
}
