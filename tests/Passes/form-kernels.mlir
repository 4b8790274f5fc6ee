// RUN: mpc-opt %s --split-input-file --mpc-form-kernels | FileCheck %s
// RUN: mpc-opt %s --split-input-file --mpc-form-kernels=siblings=false \
// RUN:   | FileCheck %s --check-prefix=NOSIB
// RUN: mpc-opt %s --split-input-file --mpc-form-kernels=views=false \
// RUN:   | FileCheck %s --check-prefix=NOVIEWS
// RUN: mpc-opt %s --split-input-file --mpc-form-kernels=gemm-epilogues=false \
// RUN:   | FileCheck %s --check-prefix=NOEPI
// RUN: mpc-opt %s --split-input-file --mpc-form-kernels=rows=false \
// RUN:   | FileCheck %s --check-prefix=NOROWS
// RUN: mpc-opt %s --split-input-file --mpc-form-kernels=attention-views=false \
// RUN:   | FileCheck %s --check-prefix=NOATT
// RUN: mpc-opt %s --split-input-file --mpc-form-kernels=classifier=false \
// RUN:   | FileCheck %s --check-prefix=NOCLS
// RUN: mpc-opt %s --split-input-file --mpc-form-kernels=classifier-gemms=false \
// RUN:   | FileCheck %s --check-prefix=NOCGEMM
// The groups print in a form that parses back.
// RUN: mpc-opt %s --split-input-file \
// RUN:   --mpc-form-kernels=batch-norm-gradient-prologues=false \
// RUN:   | FileCheck %s --check-prefix=NOBNP
// RUN: mpc-opt %s --split-input-file --mpc-form-kernels | mpc-opt --split-input-file | FileCheck %s

// One case per rule of mpc-form-kernels (passes/Passes.td), and the cases
// that must not fuse, with the reason.

// Views are index arithmetic: q and k are read from qkv through slice,
// reshape and transpose, and the two loops (one shape, one common input)
// are one kernel writing both heads.
// CHECK-LABEL: mpc.model @views
//       CHECK:   %[[QK:.*]]:2 = mpc.fusion loop {
//  CHECK-NEXT:     mpc.slice
//  CHECK-NEXT:     mpc.slice
//  CHECK-NEXT:     mpc.reshape
//  CHECK-NEXT:     mpc.reshape
//  CHECK-NEXT:     mpc.transpose
//  CHECK-NEXT:     mpc.transpose
//  CHECK-NEXT:     mpc.yield
//  CHECK-NEXT:   } : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
//  CHECK-NEXT:   mpc.batch_matmul %[[QK]]#0, %[[QK]]#1
// Without sibling fusion, one kernel per head.
// NOSIB-LABEL: mpc.model @views
//       NOSIB:   mpc.fusion loop {
//       NOSIB:   } : tensor<2x2x4x4xf32>
//       NOSIB:   mpc.fusion loop {
//       NOSIB:   } : tensor<2x2x4x4xf32>
//  NOSIB-NEXT:   mpc.batch_matmul
// Without views, every view is a kernel (or, a reshape, an alias).
// NOVIEWS-LABEL: mpc.model @views
//   NOVIEWS-NOT:   mpc.fusion
//       NOVIEWS:   mpc.output
mpc.model @views inputs(%qkv: tensor<2x4x24xf32>) params() {
  %q = mpc.slice %qkv starts [0, 0, 0] limits [2, 4, 8] : tensor<2x4x24xf32>
  %k = mpc.slice %qkv starts [0, 0, 8] limits [2, 4, 16] : tensor<2x4x24xf32>
  %q4 = mpc.reshape %q : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %k4 = mpc.reshape %k : tensor<2x4x8xf32> to tensor<2x4x2x4xf32>
  %qh = mpc.transpose %q4 perm [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %kh = mpc.transpose %k4 perm [0, 2, 1, 3] : tensor<2x4x2x4xf32>
  %s = mpc.batch_matmul %qh, %kh transpose_rhs : tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>
  %l = mpc.reduce_sum %s dims [0, 1, 2, 3] : tensor<2x2x4x4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// slice_grad is a view too: the gradient of a split is written once, each
// element from the slice that took it or 0, summed in registers.
// CHECK-LABEL: mpc.model @slice_grads
//       CHECK:   mpc.fusion loop {
//  CHECK-NEXT:     mpc.slice_grad %dq
//  CHECK-NEXT:     mpc.slice_grad %dk
//  CHECK-NEXT:     mpc.add
//  CHECK-NEXT:     mpc.yield
//  CHECK-NEXT:   } : tensor<2x4x16xf32>
mpc.model @slice_grads inputs(%dq: tensor<2x4x8xf32>, %dk: tensor<2x4x8xf32>) params() {
  %a = mpc.slice_grad %dq starts [0, 0, 0] strides [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x16xf32>
  %b = mpc.slice_grad %dk starts [0, 0, 8] strides [1, 1, 1] : tensor<2x4x8xf32> -> tensor<2x4x16xf32>
  %d = mpc.add %a, %b : tensor<2x4x16xf32>, tensor<2x4x16xf32>
  %l = mpc.reduce_sum %d dims [0, 1, 2] : tensor<2x4x16xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// An elementwise chain is one kernel; tanh's result, read again after the
// kernel, is one more output of it.
// CHECK-LABEL: mpc.model @chain
//       CHECK:   %[[G:.*]]:2 = mpc.fusion loop {
//  CHECK-NEXT:     %[[A:.*]] = mpc.mul %x, %w
//  CHECK-NEXT:     %[[B:.*]] = mpc.tanh %[[A]]
//  CHECK-NEXT:     %[[C:.*]] = mpc.scale %[[B]]
//  CHECK-NEXT:     mpc.yield %[[B]], %[[C]]
//       CHECK:   mpc.reduce_sum %[[G]]#1
//       CHECK:   mpc.reduce_sum %[[G]]#0
mpc.model @chain inputs(%x: tensor<4x8xf32>) params(%w: tensor<8xf32> = normal(1.0)) {
  %a = mpc.mul %x, %w : tensor<4x8xf32>, tensor<8xf32>
  %b = mpc.tanh %a : tensor<4x8xf32>
  %c = mpc.scale %b by 2.0 : tensor<4x8xf32>
  %s = mpc.reduce_sum %c dims [0, 1] : tensor<4x8xf32>
  %t = mpc.reduce_sum %b dims [0, 1] : tensor<4x8xf32>
  %l = mpc.add %s, %t : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Must not fuse: exp of the 8-element %v would be recomputed for each of
// the 32 elements it is broadcast to.
// CHECK-LABEL: mpc.model @no_recompute
//       CHECK:   %[[E:.*]] = mpc.exp %v
//  CHECK-NEXT:   mpc.fusion loop {
//  CHECK-NEXT:     mpc.mul %x, %[[E]]
//  CHECK-NEXT:     mpc.neg
mpc.model @no_recompute inputs(%x: tensor<4x8xf32>, %v: tensor<8xf32>) params() {
  %e = mpc.exp %v : tensor<8xf32>
  %a = mpc.mul %x, %e : tensor<4x8xf32>, tensor<8xf32>
  %b = mpc.neg %a : tensor<4x8xf32>
  %l = mpc.reduce_sum %b dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Must not fuse: exp's result is read (by the reduction) before the kernel
// that would compute it runs.
// CHECK-LABEL: mpc.model @read_between
//       CHECK:   %[[E:.*]] = mpc.exp %x
//  CHECK-NEXT:   %[[S:.*]] = mpc.reduce_sum %[[E]]
//  CHECK-NEXT:   mpc.fusion loop {
//  CHECK-NEXT:     mpc.mul %[[E]], %[[S]]
mpc.model @read_between inputs(%x: tensor<4x8xf32>) params() {
  %a = mpc.exp %x : tensor<4x8xf32>
  %s = mpc.reduce_sum %a dims [0] : tensor<4x8xf32>
  %b = mpc.mul %a, %s : tensor<4x8xf32>, tensor<8xf32>
  %c = mpc.neg %b : tensor<4x8xf32>
  %l = mpc.reduce_sum %c dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// GEMM epilogues: a tanh GELU of a biased linear (cuBLASLt's
// GELU_AUX_BIAS; the GEMM writes both), a widening cast that is a matmul's
// only reader (the GEMM writes f32); a reduce_sum's widening cast (the
// reduction writes f32). Must not fuse: the erf GELU (no such epilogue),
// the cast of a product that is read elsewhere too.
// CHECK-LABEL: mpc.model @epilogues
//       CHECK:   %[[H:.*]]:2 = mpc.fusion gemm {
//  CHECK-NEXT:     mpc.linear
//  CHECK-NEXT:     mpc.gelu {{.*}} approximate tanh
//  CHECK-NEXT:     mpc.yield
//  CHECK-NEXT:   } : tensor<4x16xf16>, tensor<4x16xf16>
//  CHECK-NEXT:   mpc.gelu %[[H]]#0 :
//  CHECK-NEXT:   mpc.fusion gemm {
//  CHECK-NEXT:     mpc.matmul
//  CHECK-NEXT:     mpc.cast {{.*}} to tensor<16x8xf32>
//  CHECK-NEXT:     mpc.yield
//  CHECK-NEXT:   } : tensor<16x8xf32>
//  CHECK-NEXT:   mpc.fusion reduce {
//  CHECK-NEXT:     mpc.reduce_sum %x dims [0]
//  CHECK-NEXT:     mpc.cast {{.*}} to tensor<8xf32>
//  CHECK-NEXT:     mpc.yield
//  CHECK-NEXT:   } : tensor<8xf32>
//  CHECK-NEXT:   %[[P:.*]] = mpc.matmul
//  CHECK-NEXT:   mpc.cast %[[P]]
//  CHECK-NEXT:   mpc.reduce_sum %[[P]]
// NOEPI-LABEL: mpc.model @epilogues
//   NOEPI-NOT:   mpc.fusion gemm
//   NOEPI-NOT:   mpc.fusion reduce
//       NOEPI:   mpc.output
mpc.model @epilogues inputs(%x: tensor<4x8xf16>, %g: tensor<4x16xf16>) params(%w: tensor<16x8xf16> = normal(0.02), %b: tensor<16xf16> = zeros) {
  %h = mpc.linear %x, %w, %b : tensor<4x8xf16>, tensor<16x8xf16>, tensor<16xf16>
  %y = mpc.gelu %h approximate tanh : tensor<4x16xf16>
  %e = mpc.gelu %h : tensor<4x16xf16>
  %dw = mpc.matmul %g, %x transpose_lhs : tensor<4x16xf16>, tensor<4x8xf16>
  %dw32 = mpc.cast %dw : tensor<16x8xf16> to tensor<16x8xf32>
  %db = mpc.reduce_sum %x dims [0] : tensor<4x8xf16>
  %db32 = mpc.cast %db : tensor<8xf16> to tensor<8xf32>
  %p = mpc.matmul %g, %x transpose_lhs : tensor<4x16xf16>, tensor<4x8xf16>
  %p32 = mpc.cast %p : tensor<16x8xf16> to tensor<16x8xf32>
  %q = mpc.reduce_sum %p dims [0, 1] : tensor<16x8xf16>
  %l0 = mpc.reduce_sum %dw32 dims [0, 1] : tensor<16x8xf32>
  %l1 = mpc.reduce_sum %db32 dims [0] : tensor<8xf32>
  %l2 = mpc.reduce_sum %p32 dims [0, 1] : tensor<16x8xf32>
  %l3 = mpc.add %l0, %l1 : tensor<f32>, tensor<f32>
  %l = mpc.add %l3, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>) y(%y : tensor<4x16xf16>) e(%e : tensor<4x16xf16>) q(%q : tensor<f16>)
}

// -----

// Row kernels: the scale and causal mask before a softmax are computed as
// the softmax reads its input (the scores are never stored); the mask and
// scale after a softmax gradient are applied before it stores.
// CHECK-LABEL: mpc.model @rows
//       CHECK:   %[[P:.*]] = mpc.fusion row {
//  CHECK-NEXT:     mpc.constant dense<0xFF800000>
//  CHECK-NEXT:     mpc.scale %s
//  CHECK-NEXT:     mpc.where
//  CHECK-NEXT:     mpc.softmax
//  CHECK-NEXT:     mpc.yield
//       CHECK:   mpc.fusion row {
//  CHECK-NEXT:     mpc.softmax_grad %dy, %[[P]]
//  CHECK-NEXT:     mpc.where
//  CHECK-NEXT:     mpc.scale
//  CHECK-NEXT:     mpc.yield
// NOROWS-LABEL: mpc.model @rows
//   NOROWS-NOT:   mpc.fusion row
//       NOROWS:   mpc.output
mpc.model @rows inputs(%s: tensor<2x4x4xf32>, %dy: tensor<2x4x4xf32>) params() {
  %mask = mpc.causal_mask : tensor<4x4xi1>
  %ninf = mpc.constant dense<0xFF800000> : tensor<f32>
  %zero = mpc.constant dense<0.0> : tensor<f32>
  %scaled = mpc.scale %s by 0.5 : tensor<2x4x4xf32>
  %masked = mpc.where %mask, %scaled, %ninf : tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>
  %p = mpc.softmax %masked dim 2 : tensor<2x4x4xf32>
  %dp = mpc.softmax_grad %dy, %p dim 2 : tensor<2x4x4xf32>
  %dm = mpc.where %mask, %dp, %zero : tensor<4x4xi1>, tensor<2x4x4xf32>, tensor<f32>
  %ds = mpc.scale %dm by 0.5 : tensor<2x4x4xf32>
  %l = mpc.reduce_sum %ds dims [0, 1, 2] : tensor<2x4x4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Must not fuse: the softmax's input is read by another op as well, so it
// is stored anyway.
// CHECK-LABEL: mpc.model @row_input_read_elsewhere
//   CHECK-NOT:   mpc.fusion
//       CHECK:   mpc.output
mpc.model @row_input_read_elsewhere inputs(%s: tensor<2x4x4xf32>) params() {
  %scaled = mpc.scale %s by 0.5 : tensor<2x4x4xf32>
  %p = mpc.softmax %scaled dim 2 : tensor<2x4x4xf32>
  %m = mpc.mul %p, %scaled : tensor<2x4x4xf32>, tensor<2x4x4xf32>
  %l = mpc.reduce_sum %m dims [0, 1, 2] : tensor<2x4x4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Must not fuse: a parameter's half copy, which the fused optimizer writes;
// its reader loads it.
// CHECK-LABEL: mpc.model @half_copy
//       CHECK:   %[[W16:.*]] = mpc.cast %w
//  CHECK-NEXT:   mpc.fusion loop {
//  CHECK-NEXT:     mpc.mul %x, %[[W16]]
//  CHECK-NEXT:     mpc.cast
mpc.model @half_copy inputs(%x: tensor<4x8xf16>) params(%w: tensor<4x8xf32> = normal(1.0)) {
  %w16 = mpc.cast %w : tensor<4x8xf32> to tensor<4x8xf16>
  %a = mpc.mul %x, %w16 : tensor<4x8xf16>, tensor<4x8xf16>
  %b = mpc.cast %a : tensor<4x8xf16> to tensor<4x8xf32>
  %l = mpc.reduce_sum %b dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A layer norm's input gradient gets the residual gradient added before it
// is stored; its parameter gradients are written as before. Must not fuse
// (second model): a parameter gradient read before the add, where the
// group would run. Gamma is an input: as a parameter, the loss would
// depend on it through the gradient op, which mpc-autodiff does not
// differentiate.
// CHECK-LABEL: mpc.model @norm_grad
//       CHECK:   %{{.*}}:3 = mpc.fusion row {
//  CHECK-NEXT:     %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = mpc.layer_norm_grad %dy, %x, %gamma
//  CHECK-NEXT:     %[[S:.*]] = mpc.add %[[DX]], %dr
//  CHECK-NEXT:     mpc.yield %[[DG]], %[[DB]], %[[S]]
// NOROWS-LABEL: mpc.model @norm_grad
//   NOROWS-NOT:   mpc.fusion row
//       NOROWS:   mpc.output
mpc.model @norm_grad inputs(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %dr: tensor<4x8xf32>, %gamma: tensor<8xf32>) params() {
  %dx, %dg, %db = mpc.layer_norm_grad %dy, %x, %gamma : tensor<4x8xf32>, tensor<8xf32>
  %s = mpc.add %dx, %dr : tensor<4x8xf32>, tensor<4x8xf32>
  %l0 = mpc.reduce_sum %s dims [0, 1] : tensor<4x8xf32>
  %l1 = mpc.reduce_sum %dg dims [0] : tensor<8xf32>
  %l2 = mpc.reduce_sum %db dims [0] : tensor<8xf32>
  %l3 = mpc.add %l0, %l1 : tensor<f32>, tensor<f32>
  %l = mpc.add %l3, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// CHECK-LABEL: mpc.model @norm_grad_read_before
//   CHECK-NOT:   mpc.fusion row
//       CHECK:   mpc.output
mpc.model @norm_grad_read_before inputs(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %gamma: tensor<8xf32>) params() {
  %dx, %dg, %db = mpc.layer_norm_grad %dy, %x, %gamma : tensor<4x8xf32>, tensor<8xf32>
  %e = mpc.exp %dg : tensor<8xf32>
  %s = mpc.mul %dx, %e : tensor<4x8xf32>, tensor<8xf32>
  %l0 = mpc.reduce_sum %s dims [0, 1] : tensor<4x8xf32>
  %l1 = mpc.reduce_sum %db dims [0] : tensor<8xf32>
  %l = mpc.add %l0, %l1 : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A residual sum before a layer norm is computed by the layer norm's kernel,
// which also stores it for the next residual sum. Must not fuse: the sum
// read before the layer norm (by the second model's exp).
// CHECK-LABEL: mpc.model @norm_residual
//       CHECK:   %[[G:.*]]:2 = mpc.fusion row {
//  CHECK-NEXT:     %[[S:.*]] = mpc.add %x, %r
//  CHECK-NEXT:     %[[N:.*]] = mpc.layer_norm %[[S]]
//  CHECK-NEXT:     mpc.yield %[[S]], %[[N]]
// NOROWS-LABEL: mpc.model @norm_residual
//   NOROWS-NOT:   mpc.fusion row
//       NOROWS:   mpc.output
mpc.model @norm_residual inputs(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>) params(%gamma: tensor<8xf32> = ones, %beta: tensor<8xf32> = zeros) {
  %s = mpc.add %x, %r : tensor<4x8xf32>, tensor<4x8xf32>
  %n = mpc.layer_norm %s, %gamma, %beta : tensor<4x8xf32>, tensor<8xf32>
  %t = mpc.add %s, %n : tensor<4x8xf32>, tensor<4x8xf32>
  %l = mpc.reduce_sum %t dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// CHECK-LABEL: mpc.model @norm_residual_read_before
//   CHECK-NOT:   mpc.fusion row
//       CHECK:   mpc.output
mpc.model @norm_residual_read_before inputs(%x: tensor<4x8xf32>, %r: tensor<4x8xf32>) params(%gamma: tensor<8xf32> = ones, %beta: tensor<8xf32> = zeros) {
  %s = mpc.add %x, %r : tensor<4x8xf32>, tensor<4x8xf32>
  %e = mpc.exp %s : tensor<4x8xf32>
  %n = mpc.layer_norm %s, %gamma, %beta : tensor<4x8xf32>, tensor<8xf32>
  %t = mpc.add %e, %n : tensor<4x8xf32>, tensor<4x8xf32>
  %l = mpc.reduce_sum %t dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Attention reads q, k and v in place: the slices and reshapes that make
// them from the QKV projection's output join the attention and its
// gradient, each group with its own copy (views cost nothing to repeat),
// and the originals go.
// CHECK-LABEL: mpc.model @attention_views
//       CHECK:   %[[Y:.*]]:2 = mpc.fusion attention {
//  CHECK-NEXT:     mpc.slice %qkv starts [0, 0, 0]
//  CHECK-NEXT:     mpc.reshape
//  CHECK-NEXT:     mpc.slice %qkv starts [0, 0, 32]
//  CHECK-NEXT:     mpc.reshape
//  CHECK-NEXT:     mpc.slice %qkv starts [0, 0, 64]
//  CHECK-NEXT:     mpc.reshape
//  CHECK-NEXT:     mpc.attention
//  CHECK-NEXT:     mpc.yield
//       CHECK:   mpc.fusion attention {
//  CHECK-NEXT:     mpc.slice %qkv starts [0, 0, 0]
//       CHECK:     mpc.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[Y]]#0, %[[Y]]#1
//  CHECK-NEXT:     mpc.yield
//   CHECK-NOT:   mpc.slice
// NOATT-LABEL: mpc.model @attention_views
//   NOATT-NOT:   mpc.fusion attention
mpc.model @attention_views inputs(%qkv: tensor<2x16x96xf16>, %dy: tensor<2x16x2x16xf16>) params() {
  %q = mpc.slice %qkv starts [0, 0, 0] limits [2, 16, 32] : tensor<2x16x96xf16>
  %k = mpc.slice %qkv starts [0, 0, 32] limits [2, 16, 64] : tensor<2x16x96xf16>
  %v = mpc.slice %qkv starts [0, 0, 64] limits [2, 16, 96] : tensor<2x16x96xf16>
  %q4 = mpc.reshape %q : tensor<2x16x32xf16> to tensor<2x16x2x16xf16>
  %k4 = mpc.reshape %k : tensor<2x16x32xf16> to tensor<2x16x2x16xf16>
  %v4 = mpc.reshape %v : tensor<2x16x32xf16> to tensor<2x16x2x16xf16>
  %y, %lse = mpc.attention %q4, %k4, %v4 scale 0.25 causal layout bthd : tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>
  %dq, %dk, %dv = mpc.attention_grad %dy, %q4, %k4, %v4, %y, %lse scale 0.25 causal layout bthd : tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>, tensor<2x2x16xf32>
  %a = mpc.add %dq, %dk : tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>
  %b = mpc.add %a, %dv : tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>
  %c = mpc.cast %b : tensor<2x16x2x16xf16> to tensor<2x16x2x16xf32>
  %l = mpc.reduce_sum %c dims [0, 1, 2, 3] : tensor<2x16x2x16xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Not in place: the query is also an output of the model (stored anyway),
// and a transpose that moves the head dim would make it strided, which
// the kernels do not read. Only the key's view joins.
// CHECK-LABEL: mpc.model @attention_views_kept
//       CHECK:   %[[Q:.*]] = mpc.reshape %x
//       CHECK:   %[[V:.*]] = mpc.transpose %w
//       CHECK:   mpc.fusion attention {
//  CHECK-NEXT:     %[[K:.*]] = mpc.reshape %x
//  CHECK-NEXT:     mpc.attention %[[Q]], %[[K]], %[[V]]
mpc.model @attention_views_kept inputs(%x: tensor<2x16x2x16xf32>, %w: tensor<2x16x16x2xf32>) params() {
  %q = mpc.reshape %x : tensor<2x16x2x16xf32> to tensor<2x16x2x16xf32>
  %k = mpc.reshape %x : tensor<2x16x2x16xf32> to tensor<2x16x2x16xf32>
  %v = mpc.transpose %w perm [0, 1, 3, 2] : tensor<2x16x16x2xf32>
  %y, %lse = mpc.attention %q, %k, %v scale 0.25 layout bthd : tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>, tensor<2x16x2x16xf32>
  %l = mpc.reduce_sum %y dims [0, 1, 2, 3] : tensor<2x16x2x16xf32>
  mpc.output loss(%l : tensor<f32>) query(%q : tensor<2x16x2x16xf32>)
}

// -----

// An attention gradient writes dq, dk and dv where the QKV projection's
// gradient puts them side by side (three slice_grads summed, disjoint and
// covering it): the reshapes, slice_grads and adds join its group, which
// yields only the sum.
// CHECK-LABEL: mpc.model @attention_grad_scatter
//       CHECK:   %[[DQKV:.*]] = mpc.fusion attention {
//       CHECK:     mpc.attention_grad
//  CHECK-NEXT:     mpc.reshape
//  CHECK-NEXT:     mpc.reshape
//  CHECK-NEXT:     mpc.reshape
//  CHECK-NEXT:     mpc.slice_grad
//  CHECK-NEXT:     mpc.slice_grad
//  CHECK-NEXT:     mpc.add
//  CHECK-NEXT:     mpc.slice_grad
//  CHECK-NEXT:     %[[SUM:.*]] = mpc.add
//  CHECK-NEXT:     mpc.yield %[[SUM]] : tensor<2x16x96xf16>
//  CHECK-NEXT:   } : tensor<2x16x96xf16>
mpc.model @attention_grad_scatter inputs(%q: tensor<2x16x2x16xf16>, %y: tensor<2x16x2x16xf16>, %lse: tensor<2x2x16xf32>) params() {
  %dq, %dk, %dv = mpc.attention_grad %y, %q, %q, %q, %y, %lse scale 0.25 causal layout bthd : tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>, tensor<2x2x16xf32>
  %v3 = mpc.reshape %dv : tensor<2x16x2x16xf16> to tensor<2x16x32xf16>
  %k3 = mpc.reshape %dk : tensor<2x16x2x16xf16> to tensor<2x16x32xf16>
  %q3 = mpc.reshape %dq : tensor<2x16x2x16xf16> to tensor<2x16x32xf16>
  %sv = mpc.slice_grad %v3 starts [0, 0, 64] strides [1, 1, 1] : tensor<2x16x32xf16> -> tensor<2x16x96xf16>
  %sk = mpc.slice_grad %k3 starts [0, 0, 32] strides [1, 1, 1] : tensor<2x16x32xf16> -> tensor<2x16x96xf16>
  %a = mpc.add %sv, %sk : tensor<2x16x96xf16>, tensor<2x16x96xf16>
  %sq = mpc.slice_grad %q3 starts [0, 0, 0] strides [1, 1, 1] : tensor<2x16x32xf16> -> tensor<2x16x96xf16>
  %b = mpc.add %a, %sq : tensor<2x16x96xf16>, tensor<2x16x96xf16>
  %c = mpc.cast %b : tensor<2x16x96xf16> to tensor<2x16x96xf32>
  %l = mpc.reduce_sum %c dims [0, 1, 2] : tensor<2x16x96xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A current-scaling quantization of what the attention kernels store joins
// their group, which finds the amax as it stores: the forward's output, and
// the sum its gradient is scattered into (with the quantization's bias
// sum). Must not join: delayed scaling (the cast pass raises the table's
// amax itself).
// CHECK-LABEL: mpc.model @attention_amax
//       CHECK:   %[[Y:.*]]:4 = mpc.fusion attention {
//       CHECK:     %[[O:.*]], %{{.*}} = mpc.attention
//  CHECK-NEXT:     mpc.quantize %[[O]] : tensor<2x16x2x16xbf16> to tensor<2x16x2x16xf8E4M3FN>
//  CHECK-NEXT:     mpc.yield
//       CHECK:   mpc.fusion attention {
//       CHECK:     mpc.attention_grad
//       CHECK:     mpc.slice_grad %{{.*}} starts [0, 0, 0]
//  CHECK-NEXT:     %[[SUM:.*]] = mpc.add
//  CHECK-NEXT:     mpc.quantize %[[SUM]] : tensor<2x16x96xbf16> to tensor<2x16x96xf8E5M2> transposed
//  CHECK-NEXT:     mpc.reshape %[[SUM]]
//  CHECK-NEXT:     mpc.reduce_sum
//  CHECK-NEXT:     mpc.cast
//  CHECK-NEXT:     mpc.yield
//       CHECK:   %[[D:.*]] = mpc.fusion attention {
//       CHECK:     mpc.attention
//  CHECK-NEXT:     mpc.yield
//  CHECK-NEXT:   }
//  CHECK-NEXT:   mpc.quantize %[[D]] delayed
mpc.model @attention_amax inputs(%qkv: tensor<2x16x96xbf16>, %dy: tensor<2x16x2x16xbf16>, %w: tensor<32x32xbf16>) params() state(%t: tensor<5x1xf32> = zeros) {
  %q = mpc.slice %qkv starts [0, 0, 0] limits [2, 16, 32] : tensor<2x16x96xbf16>
  %k = mpc.slice %qkv starts [0, 0, 32] limits [2, 16, 64] : tensor<2x16x96xbf16>
  %v = mpc.slice %qkv starts [0, 0, 64] limits [2, 16, 96] : tensor<2x16x96xbf16>
  %q4 = mpc.reshape %q : tensor<2x16x32xbf16> to tensor<2x16x2x16xbf16>
  %k4 = mpc.reshape %k : tensor<2x16x32xbf16> to tensor<2x16x2x16xbf16>
  %v4 = mpc.reshape %v : tensor<2x16x32xbf16> to tensor<2x16x2x16xbf16>
  %y, %lse = mpc.attention %q4, %k4, %v4 scale 0.25 causal layout bthd : tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>
  %qy, %sy = mpc.quantize %y : tensor<2x16x2x16xbf16> to tensor<2x16x2x16xf8E4M3FN>
  %qy2 = mpc.reshape %qy : tensor<2x16x2x16xf8E4M3FN> to tensor<32x32xf8E4M3FN>
  %qw, %sw = mpc.quantize %w : tensor<32x32xbf16> to tensor<32x32xf8E4M3FN>
  %out = mpc.scaled_matmul %qy2[%sy], %qw[%sw] : tensor<32x32xf8E4M3FN>, tensor<32x32xf8E4M3FN> -> tensor<32x32xf32>
  %dq, %dk, %dv = mpc.attention_grad %dy, %q4, %k4, %v4, %y, %lse scale 0.25 causal layout bthd : tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x2x16xf32>
  %v3 = mpc.reshape %dv : tensor<2x16x2x16xbf16> to tensor<2x16x32xbf16>
  %k3 = mpc.reshape %dk : tensor<2x16x2x16xbf16> to tensor<2x16x32xbf16>
  %q3 = mpc.reshape %dq : tensor<2x16x2x16xbf16> to tensor<2x16x32xbf16>
  %sv = mpc.slice_grad %v3 starts [0, 0, 64] strides [1, 1, 1] : tensor<2x16x32xbf16> -> tensor<2x16x96xbf16>
  %sk = mpc.slice_grad %k3 starts [0, 0, 32] strides [1, 1, 1] : tensor<2x16x32xbf16> -> tensor<2x16x96xbf16>
  %a = mpc.add %sv, %sk : tensor<2x16x96xbf16>, tensor<2x16x96xbf16>
  %sq = mpc.slice_grad %q3 starts [0, 0, 0] strides [1, 1, 1] : tensor<2x16x32xbf16> -> tensor<2x16x96xbf16>
  %b = mpc.add %a, %sq : tensor<2x16x96xbf16>, tensor<2x16x96xbf16>
  %qb, %sb, %qbt = mpc.quantize %b : tensor<2x16x96xbf16> to tensor<2x16x96xf8E5M2> transposed tensor<96x32xf8E5M2>
  %b2 = mpc.reshape %b : tensor<2x16x96xbf16> to tensor<32x96xbf16>
  %bs = mpc.reduce_sum %b2 dims [0] : tensor<32x96xbf16>
  %bsf = mpc.cast %bs : tensor<96xbf16> to tensor<96xf32>
  %dw = mpc.scaled_matmul %qbt[%sb], %qw[%sw] : tensor<96x32xf8E5M2>, tensor<32x32xf8E4M3FN> -> tensor<96x32xf32>
  %y2, %lse2 = mpc.attention %q4, %k4, %v4 scale 0.25 causal layout bthd : tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>
  %qd, %sd = mpc.quantize %y2 delayed(%t[0] margin 0 : tensor<5x1xf32>) : tensor<2x16x2x16xbf16> to tensor<2x16x2x16xf8E4M3FN>
  %qd2 = mpc.reshape %qd : tensor<2x16x2x16xf8E4M3FN> to tensor<32x32xf8E4M3FN>
  %outd = mpc.scaled_matmul %qd2[%sd], %qw[%sw] : tensor<32x32xf8E4M3FN>, tensor<32x32xf8E4M3FN> -> tensor<32x32xf32>
  %l1 = mpc.reduce_sum %out dims [0, 1] : tensor<32x32xf32>
  %l2 = mpc.reduce_sum %dw dims [0, 1] : tensor<96x32xf32>
  %l3 = mpc.reduce_sum %bsf dims [0] : tensor<96xf32>
  %l4 = mpc.reduce_sum %outd dims [0, 1] : tensor<32x32xf32>
  %a1 = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  %a2 = mpc.add %a1, %l3 : tensor<f32>, tensor<f32>
  %a3 = mpc.add %a2, %l4 : tensor<f32>, tensor<f32>
  mpc.output loss(%a3 : tensor<f32>)
}

// -----

// Not scattered: two of the slices overlap (dk lands on dq's columns), so
// the sum adds them there and the kernels could not write both in place.
// CHECK-LABEL: mpc.model @attention_grad_overlap
//       CHECK:   %{{.*}}, %{{.*}}, %{{.*}} = mpc.attention_grad
//  CHECK-NEXT:   mpc.fusion loop {
mpc.model @attention_grad_overlap inputs(%q: tensor<2x16x2x16xf16>, %y: tensor<2x16x2x16xf16>, %lse: tensor<2x2x16xf32>) params() {
  %dq, %dk, %dv = mpc.attention_grad %y, %q, %q, %q, %y, %lse scale 0.25 causal layout bthd : tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>, tensor<2x16x2x16xf16>, tensor<2x2x16xf32>
  %v3 = mpc.reshape %dv : tensor<2x16x2x16xf16> to tensor<2x16x32xf16>
  %k3 = mpc.reshape %dk : tensor<2x16x2x16xf16> to tensor<2x16x32xf16>
  %q3 = mpc.reshape %dq : tensor<2x16x2x16xf16> to tensor<2x16x32xf16>
  %sv = mpc.slice_grad %v3 starts [0, 0, 64] strides [1, 1, 1] : tensor<2x16x32xf16> -> tensor<2x16x96xf16>
  %sk = mpc.slice_grad %k3 starts [0, 0, 16] strides [1, 1, 1] : tensor<2x16x32xf16> -> tensor<2x16x96xf16>
  %a = mpc.add %sv, %sk : tensor<2x16x96xf16>, tensor<2x16x96xf16>
  %sq = mpc.slice_grad %q3 starts [0, 0, 0] strides [1, 1, 1] : tensor<2x16x32xf16> -> tensor<2x16x96xf16>
  %b = mpc.add %a, %sq : tensor<2x16x96xf16>, tensor<2x16x96xf16>
  %c = mpc.cast %b : tensor<2x16x96xf16> to tensor<2x16x96xf32>
  %l = mpc.reduce_sum %c dims [0, 1, 2] : tensor<2x16x96xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A weight-gradient GEMM (dW = dYᵀ · X) writes the bias gradient too: the
// reduce_sum of its left operand over dim 0, widened to f32, joins it
// (cuBLASLt's BGRADB epilogue; mpc_rt_gemm_bgrad). Not a sum over dim 1,
// which is not the bias gradient of that GEMM.
// CHECK-LABEL: mpc.model @bias_gradient
//       CHECK:   %[[G:.*]]:2 = mpc.fusion gemm {
//  CHECK-NEXT:     mpc.matmul %dy, %x transpose_lhs
//  CHECK-NEXT:     mpc.reduce_sum %dy dims [0]
//  CHECK-NEXT:     mpc.cast {{.*}} to tensor<16x8xf32>
//  CHECK-NEXT:     mpc.cast {{.*}} to tensor<16xf32>
//  CHECK-NEXT:     mpc.yield
//  CHECK-NEXT:   } : tensor<16x8xf32>, tensor<16xf32>
//       CHECK:   mpc.fusion reduce {
//  CHECK-NEXT:     mpc.reduce_sum %dy dims [1]
// NOEPI-LABEL: mpc.model @bias_gradient
//   NOEPI-NOT:   mpc.fusion gemm
mpc.model @bias_gradient inputs(%x: tensor<4x8xf16>, %dy: tensor<4x16xf16>) params() {
  %dw = mpc.matmul %dy, %x transpose_lhs : tensor<4x16xf16>, tensor<4x8xf16>
  %db = mpc.reduce_sum %dy dims [0] : tensor<4x16xf16>
  %dw32 = mpc.cast %dw : tensor<16x8xf16> to tensor<16x8xf32>
  %db32 = mpc.cast %db : tensor<16xf16> to tensor<16xf32>
  %rows = mpc.reduce_sum %dy dims [1] : tensor<4x16xf16>
  %rows32 = mpc.cast %rows : tensor<4xf16> to tensor<4xf32>
  %l0 = mpc.reduce_sum %dw32 dims [0, 1] : tensor<16x8xf32>
  %l1 = mpc.reduce_sum %db32 dims [0] : tensor<16xf32>
  %l2 = mpc.reduce_sum %rows32 dims [0] : tensor<4xf32>
  %s = mpc.add %l0, %l1 : tensor<f32>, tensor<f32>
  %l = mpc.add %s, %l2 : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Without master weights (and at O3) the weight and bias gradients stay in
// the half type: the same epilogue writes both rounded once from its f32
// sums. Not an f32 GEMM (O0 keeps its reduce_sum), nor a bias gradient of
// another type than the product's.
// CHECK-LABEL: mpc.model @half_bias_gradient
//       CHECK:   %[[G:.*]]:2 = mpc.fusion gemm {
//  CHECK-NEXT:     mpc.matmul %dy, %x transpose_lhs
//  CHECK-NEXT:     mpc.reduce_sum %dy dims [0]
//  CHECK-NEXT:     mpc.yield
//  CHECK-NEXT:   } : tensor<16x8xbf16>, tensor<16xbf16>
//       CHECK:   mpc.matmul %dy32, %x32 transpose_lhs
//   CHECK-NOT:   mpc.fusion gemm
// NOEPI-LABEL: mpc.model @half_bias_gradient
//   NOEPI-NOT:   mpc.fusion gemm
mpc.model @half_bias_gradient inputs(%x: tensor<4x8xbf16>, %dy: tensor<4x16xbf16>, %x32: tensor<4x8xf32>, %dy32: tensor<4x16xf32>) params() {
  %dw = mpc.matmul %dy, %x transpose_lhs : tensor<4x16xbf16>, tensor<4x8xbf16>
  %db = mpc.reduce_sum %dy dims [0] : tensor<4x16xbf16>
  %w32 = mpc.matmul %dy32, %x32 transpose_lhs : tensor<4x16xf32>, tensor<4x8xf32>
  %b32 = mpc.reduce_sum %dy32 dims [0] : tensor<4x16xf32>
  %h0 = mpc.reduce_sum %dw dims [0, 1] : tensor<16x8xbf16>
  %h1 = mpc.reduce_sum %db dims [0] : tensor<16xbf16>
  %l0 = mpc.cast %h0 : tensor<bf16> to tensor<f32>
  %l1 = mpc.cast %h1 : tensor<bf16> to tensor<f32>
  %l2 = mpc.reduce_sum %w32 dims [0, 1] : tensor<16x8xf32>
  %l3 = mpc.reduce_sum %b32 dims [0] : tensor<16xf32>
  %s0 = mpc.add %l0, %l1 : tensor<f32>, tensor<f32>
  %s1 = mpc.add %l2, %l3 : tensor<f32>, tensor<f32>
  %l = mpc.add %s0, %s1 : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// The GELU gradient of a GEMM's product (through the reshape back to the
// activation's shape) is the GEMM's epilogue (cuBLASLt's DGELU, which
// takes the derivative at the GELU's input: mpc_rt_gemm_dgelu). Not for a
// product 12 wide (cuBLASLt wants the GELU input's leading dimension
// divisible by 8), nor for the erf GELU.
// CHECK-LABEL: mpc.model @gelu_gradient
//       CHECK:   mpc.fusion gemm {
//  CHECK-NEXT:     mpc.matmul %dy, %w
//  CHECK-NEXT:     mpc.reshape
//  CHECK-NEXT:     mpc.gelu_grad {{.*}} approximate tanh
//  CHECK-NEXT:     mpc.yield
//  CHECK-NEXT:   } : tensor<2x4x16xf16>
//       CHECK:   %[[NARROW:.*]] = mpc.matmul %dy, %v
//       CHECK:   %[[ERF:.*]] = mpc.matmul %dy, %w
//       CHECK:   mpc.fusion loop {
// NOEPI-LABEL: mpc.model @gelu_gradient
//   NOEPI-NOT:   mpc.fusion gemm
mpc.model @gelu_gradient inputs(%dy: tensor<8x32xf16>, %x: tensor<2x4x16xf16>, %x12: tensor<2x4x12xf16>, %w: tensor<32x16xf16>, %v: tensor<32x12xf16>) params() {
  %p = mpc.matmul %dy, %w : tensor<8x32xf16>, tensor<32x16xf16>
  %p3 = mpc.reshape %p : tensor<8x16xf16> to tensor<2x4x16xf16>
  %g = mpc.gelu_grad %p3, %x approximate tanh : tensor<2x4x16xf16>
  %q = mpc.matmul %dy, %v : tensor<8x32xf16>, tensor<32x12xf16>
  %q3 = mpc.reshape %q : tensor<8x12xf16> to tensor<2x4x12xf16>
  %h = mpc.gelu_grad %q3, %x12 approximate tanh : tensor<2x4x12xf16>
  %r = mpc.matmul %dy, %w : tensor<8x32xf16>, tensor<32x16xf16>
  %r3 = mpc.reshape %r : tensor<8x16xf16> to tensor<2x4x16xf16>
  %e = mpc.gelu_grad %r3, %x : tensor<2x4x16xf16>
  %a = mpc.add %g, %e : tensor<2x4x16xf16>, tensor<2x4x16xf16>
  %c = mpc.cast %a : tensor<2x4x16xf16> to tensor<2x4x16xf32>
  %ch = mpc.cast %h : tensor<2x4x12xf16> to tensor<2x4x12xf32>
  %l0 = mpc.reduce_sum %c dims [0, 1, 2] : tensor<2x4x16xf32>
  %l1 = mpc.reduce_sum %ch dims [0, 1, 2] : tensor<2x4x12xf32>
  %l = mpc.add %l0, %l1 : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A cross-entropy and its gradient over the same logits and targets are one
// classifier group, at the gradient (the seed comes first): one pass per row
// of logits gives the row's loss and gradient. Not a gradient against
// other targets.
// CHECK-LABEL: mpc.model @classifier
//       CHECK:   %[[SEED:.*]] = mpc.loss_scale
//       CHECK:   %[[G:.*]]:2 = mpc.fusion classifier {
//  CHECK-NEXT:     %[[L:.*]] = mpc.cross_entropy %logits, %y
//  CHECK-NEXT:     %[[D:.*]] = mpc.cross_entropy_grad %[[SEED]], %logits, %y
//  CHECK-NEXT:     mpc.yield %[[L]], %[[D]] : tensor<f32>, tensor<4x10xf16>
//  CHECK-NEXT:   } : tensor<f32>, tensor<4x10xf16>
//   CHECK-NOT:   mpc.fusion classifier
//       CHECK:   mpc.cross_entropy_grad %[[SEED]], %logits, %z
// NOCLS-LABEL: mpc.model @classifier
//   NOCLS-NOT:   mpc.fusion classifier
mpc.model @classifier inputs(%logits: tensor<4x10xf16>, %y: tensor<4xi32>, %z: tensor<4xi32>) params() {
  %l = mpc.cross_entropy %logits, %y : tensor<4x10xf16>, tensor<4xi32>
  %seed = mpc.loss_scale : tensor<f32>
  %d = mpc.cross_entropy_grad %seed, %logits, %y : tensor<f32>, tensor<4x10xf16>, tensor<4xi32>
  %e = mpc.cross_entropy_grad %seed, %logits, %z : tensor<f32>, tensor<4x10xf16>, tensor<4xi32>
  %de = mpc.add %d, %e : tensor<4x10xf16>, tensor<4x10xf16>
  %w = mpc.cast %de : tensor<4x10xf16> to tensor<4x10xf32>
  %s = mpc.reduce_sum %w dims [0, 1] : tensor<4x10xf32>
  %t = mpc.add %l, %s : tensor<f32>, tensor<f32>
  mpc.output loss(%t : tensor<f32>)
}

// -----

// The loss read before its gradient (by a step in between) keeps them apart:
// the group would run where the gradient is, after that reader.
// CHECK-LABEL: mpc.model @classifier_loss_read_before
//   CHECK-NOT:   mpc.fusion classifier
mpc.model @classifier_loss_read_before inputs(%logits: tensor<4x10xf32>, %y: tensor<4xi32>) params() {
  %l = mpc.cross_entropy %logits, %y : tensor<4x10xf32>, tensor<4xi32>
  %seed = mpc.reshape %l : tensor<f32> to tensor<f32>
  %d = mpc.cross_entropy_grad %seed, %logits, %y : tensor<f32>, tensor<4x10xf32>, tensor<4xi32>
  %s = mpc.reduce_sum %d dims [0, 1] : tensor<4x10xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// The loss as its own gradient's seed (mpc compile folds the reshape
// above away): the kernel would read the seed before computing it.
// CHECK-LABEL: mpc.model @negative_classifier_loss_seeds_gradient
//   CHECK-NOT:   mpc.fusion classifier
mpc.model @negative_classifier_loss_seeds_gradient inputs(%logits: tensor<4x10xf32>, %y: tensor<4xi32>) params() {
  %l = mpc.cross_entropy %logits, %y : tensor<4x10xf32>, tensor<4xi32>
  %d = mpc.cross_entropy_grad %l, %logits, %y : tensor<f32>, tensor<4x10xf32>, tensor<4xi32>
  %s = mpc.reduce_sum %d dims [0, 1] : tensor<4x10xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// A classifier's bias-free linear (logits read only by the classifier,
// through a reshape) and the GEMMs of its gradient, dX = dlogits · W and
// dW = dlogitsᵀ · X (X through a reshape of the linear's input), with dW's
// widening cast, are one linear_classifier group, placed at the later
// GEMM: code generation runs it over chunks of rows. dX's reshape, which
// came before the later GEMM, moves after it (a view: nothing changes).
// CHECK-LABEL: mpc.model @linear_classifier
//       CHECK:   %[[XR:.*]] = mpc.reshape %x : tensor<2x4x8xbf16> to tensor<8x8xbf16>
//       CHECK:   %[[G:.*]]:3 = mpc.fusion linear_classifier {
//  CHECK-NEXT:     mpc.linear %x, %w
//  CHECK-NEXT:     mpc.reshape
//  CHECK-NEXT:     %[[L:.*]] = mpc.cross_entropy
//  CHECK-NEXT:     %[[D:.*]] = mpc.cross_entropy_grad
//  CHECK-NEXT:     %[[DX:.*]] = mpc.matmul %[[D]], %w :
//  CHECK-NEXT:     %[[DW:.*]] = mpc.matmul %[[D]], %[[XR]] transpose_lhs
//  CHECK-NEXT:     %[[DW32:.*]] = mpc.cast %[[DW]] : tensor<10x8xbf16> to tensor<10x8xf32>
//  CHECK-NEXT:     mpc.yield %[[L]], %[[DX]], %[[DW32]]
//  CHECK-NEXT:   } : tensor<f32>, tensor<8x8xbf16>, tensor<10x8xf32>
//       CHECK:     mpc.reshape %[[G]]#1 : tensor<8x8xbf16> to tensor<2x4x8xbf16>
// NOCGEMM-LABEL: mpc.model @linear_classifier
//   NOCGEMM-NOT:   linear_classifier
//       NOCGEMM:   mpc.fusion classifier
mpc.model @linear_classifier inputs(%x: tensor<2x4x8xbf16>, %w: tensor<10x8xbf16>, %y: tensor<8xi32>) params() {
  %seed = mpc.loss_scale : tensor<f32>
  %logits = mpc.linear %x, %w : tensor<2x4x8xbf16>, tensor<10x8xbf16>
  %flat = mpc.reshape %logits : tensor<2x4x10xbf16> to tensor<8x10xbf16>
  %l = mpc.cross_entropy %flat, %y : tensor<8x10xbf16>, tensor<8xi32>
  %d = mpc.cross_entropy_grad %seed, %flat, %y : tensor<f32>, tensor<8x10xbf16>, tensor<8xi32>
  %dx = mpc.matmul %d, %w : tensor<8x10xbf16>, tensor<10x8xbf16>
  %dx3 = mpc.reshape %dx : tensor<8x8xbf16> to tensor<2x4x8xbf16>
  %xr = mpc.reshape %x : tensor<2x4x8xbf16> to tensor<8x8xbf16>
  %dw = mpc.matmul %d, %xr transpose_lhs : tensor<8x10xbf16>, tensor<8x8xbf16>
  %dxs = mpc.cast %dx3 : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  %s1 = mpc.reduce_sum %dxs dims [0, 1, 2] : tensor<2x4x8xf32>
  %dw32 = mpc.cast %dw : tensor<10x8xbf16> to tensor<10x8xf32>
  %s2 = mpc.reduce_sum %dw32 dims [0, 1] : tensor<10x8xf32>
  %s = mpc.add %s1, %s2 : tensor<f32>, tensor<f32>
  %t = mpc.add %l, %s : tensor<f32>, tensor<f32>
  mpc.output loss(%t : tensor<f32>)
}

// -----

// Not with a biased linear (its bias gradient would need the logits'
// gradient whole), nor where the logits are read by anything else: the
// cross-entropy and its gradient alone are the group.
// CHECK-LABEL: mpc.model @negative_linear_classifier_bias
//   CHECK-NOT:   linear_classifier
//       CHECK:   mpc.fusion classifier
mpc.model @negative_linear_classifier_bias inputs(%x: tensor<8x8xf32>, %w: tensor<10x8xf32>, %b: tensor<10xf32>, %y: tensor<8xi32>) params() {
  %seed = mpc.loss_scale : tensor<f32>
  %logits = mpc.linear %x, %w, %b : tensor<8x8xf32>, tensor<10x8xf32>, tensor<10xf32>
  %l = mpc.cross_entropy %logits, %y : tensor<8x10xf32>, tensor<8xi32>
  %d = mpc.cross_entropy_grad %seed, %logits, %y : tensor<f32>, tensor<8x10xf32>, tensor<8xi32>
  %dx = mpc.matmul %d, %w : tensor<8x10xf32>, tensor<10x8xf32>
  %dw = mpc.matmul %d, %x transpose_lhs : tensor<8x10xf32>, tensor<8x8xf32>
  %s1 = mpc.reduce_sum %dx dims [0, 1] : tensor<8x8xf32>
  %s2 = mpc.reduce_sum %dw dims [0, 1] : tensor<10x8xf32>
  %s = mpc.add %s1, %s2 : tensor<f32>, tensor<f32>
  %t = mpc.add %l, %s : tensor<f32>, tensor<f32>
  mpc.output loss(%t : tensor<f32>)
}

// -----

// CHECK-LABEL: mpc.model @negative_linear_classifier_logits_read
//   CHECK-NOT:   linear_classifier
//       CHECK:   mpc.fusion classifier
mpc.model @negative_linear_classifier_logits_read inputs(%x: tensor<8x8xf32>, %w: tensor<10x8xf32>, %y: tensor<8xi32>) params() {
  %seed = mpc.loss_scale : tensor<f32>
  %logits = mpc.linear %x, %w : tensor<8x8xf32>, tensor<10x8xf32>
  %l = mpc.cross_entropy %logits, %y : tensor<8x10xf32>, tensor<8xi32>
  %d = mpc.cross_entropy_grad %seed, %logits, %y : tensor<f32>, tensor<8x10xf32>, tensor<8xi32>
  %dx = mpc.matmul %d, %w : tensor<8x10xf32>, tensor<10x8xf32>
  %dw = mpc.matmul %d, %x transpose_lhs : tensor<8x10xf32>, tensor<8x8xf32>
  %s0 = mpc.reduce_sum %logits dims [0, 1] : tensor<8x10xf32>
  %s1 = mpc.reduce_sum %dx dims [0, 1] : tensor<8x8xf32>
  %s2 = mpc.reduce_sum %dw dims [0, 1] : tensor<10x8xf32>
  %s3 = mpc.add %s1, %s2 : tensor<f32>, tensor<f32>
  %s = mpc.add %s0, %s3 : tensor<f32>, tensor<f32>
  %t = mpc.add %l, %s : tensor<f32>, tensor<f32>
  mpc.output loss(%t : tensor<f32>)
}

// -----

// An embedding gradient of a half table, widened to f32 by its only reader,
// is a reduce group: the atomics accumulate in the f32 result itself, with
// no rounding to half and back. Not where the half table is read too.
// CHECK-LABEL: mpc.model @embedding_gradient
//       CHECK:   mpc.fusion reduce {
//  CHECK-NEXT:     mpc.embedding_grad %dy, %ids
//  CHECK-NEXT:     mpc.cast {{.*}} to tensor<10x4xf32>
//  CHECK-NEXT:     mpc.yield
//   CHECK-NOT:   mpc.fusion reduce
// NOEPI-LABEL: mpc.model @embedding_gradient
//   NOEPI-NOT:   mpc.fusion reduce
mpc.model @embedding_gradient inputs(%dy: tensor<2x3x4xf16>, %ids: tensor<2x3xi32>) params() {
  %g = mpc.embedding_grad %dy, %ids : tensor<2x3x4xf16>, tensor<2x3xi32> -> tensor<10x4xf16>
  %w = mpc.cast %g : tensor<10x4xf16> to tensor<10x4xf32>
  %h = mpc.embedding_grad %dy, %ids : tensor<2x3x4xf16>, tensor<2x3xi32> -> tensor<10x4xf16>
  %hw = mpc.cast %h : tensor<10x4xf16> to tensor<10x4xf32>
  %hn = mpc.neg %h : tensor<10x4xf16>
  %hnw = mpc.cast %hn : tensor<10x4xf16> to tensor<10x4xf32>
  %s0 = mpc.reduce_sum %w dims [0, 1] : tensor<10x4xf32>
  %s1 = mpc.reduce_sum %hw dims [0, 1] : tensor<10x4xf32>
  %s2 = mpc.reduce_sum %hnw dims [0, 1] : tensor<10x4xf32>
  %s = mpc.add %s0, %s1 : tensor<f32>, tensor<f32>
  %l = mpc.add %s, %s2 : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// The GELU that computes an FP8 quantization's input runs in its pass (a
// row group), and a GELU gradient read after it too (by a bias gradient)
// is stored by that pass. With current scaling too: its amax pass
// evaluates the GELU again rather than read a stored one.
// CHECK-LABEL: mpc.model @quantize_prologue
//       CHECK:   mpc.fusion row {
//  CHECK-NEXT:     mpc.gelu %h
//  CHECK-NEXT:     mpc.quantize %{{.*}} delayed(%t[0]
//  CHECK-NEXT:     mpc.yield
//       CHECK:   %[[DG:.*]]:3 = mpc.fusion row {
//  CHECK-NEXT:     mpc.gelu_grad %dy, %h
//  CHECK-NEXT:     mpc.quantize %{{.*}} delayed(%t[1]
//  CHECK-NEXT:     mpc.yield
//       CHECK:   mpc.reduce_sum %[[DG]]#0
//       CHECK:   mpc.fusion row {
//  CHECK-NEXT:     mpc.gelu %h
//  CHECK-NEXT:     mpc.quantize %{{.*}} : tensor<16x32xbf16> to tensor<16x32xf8E4M3FN>
//  CHECK-NEXT:     mpc.yield
// NOROWS-LABEL: mpc.model @quantize_prologue
//   NOROWS-NOT:   mpc.fusion row
mpc.model @quantize_prologue inputs(%h: tensor<16x32xbf16>, %dy: tensor<16x32xbf16>) params() state(%t: tensor<5x2xf32> = zeros) {
  %g = mpc.gelu %h approximate tanh : tensor<16x32xbf16>
  %q, %s = mpc.quantize %g delayed(%t[0] margin 0 : tensor<5x2xf32>) : tensor<16x32xbf16> to tensor<16x32xf8E4M3FN>
  %dg = mpc.gelu_grad %dy, %h approximate tanh : tensor<16x32xbf16>
  %qd, %sd = mpc.quantize %dg delayed(%t[1] margin 0 : tensor<5x2xf32>) : tensor<16x32xbf16> to tensor<16x32xf8E5M2>
  %db = mpc.reduce_sum %dg dims [0] : tensor<16x32xbf16>
  %g2 = mpc.gelu %h approximate tanh : tensor<16x32xbf16>
  %q2, %s2 = mpc.quantize %g2 : tensor<16x32xbf16> to tensor<16x32xf8E4M3FN>
  %y = mpc.scaled_matmul %q[%s], %q2[%s2] : tensor<16x32xf8E4M3FN>, tensor<16x32xf8E4M3FN> -> tensor<16x16xbf16>
  %yd = mpc.scaled_matmul %qd[%sd], %q[%s] : tensor<16x32xf8E5M2>, tensor<16x32xf8E4M3FN> -> tensor<16x16xbf16>
  %a = mpc.reduce_sum %y dims [0, 1] : tensor<16x16xbf16>
  %b = mpc.reduce_sum %yd dims [0, 1] : tensor<16x16xbf16>
  %c = mpc.reduce_sum %db dims [0] : tensor<32xbf16>
  %ab = mpc.add %a, %b : tensor<bf16>, tensor<bf16>
  %l = mpc.add %ab, %c : tensor<bf16>, tensor<bf16>
  mpc.output loss(%l : tensor<bf16>)
}

// -----

// A delayed quantization that writes a transposed copy (an FP8 weight
// gradient's dY) also sums its input over rows, the bias gradient, with the
// cast of the sum to f32: the row group takes them from their reduce group
// and runs where the quantization was, before the GEMMs that read it; the
// GELU gradient is stored only for another reader (a sum of the 3-d value,
// which stays a reduction of its own).
// CHECK-LABEL: mpc.model @quantize_bias_sum
//       CHECK:   %[[G:.*]]:4 = mpc.fusion row {
//  CHECK-NEXT:     mpc.gelu_grad %dy, %h
//  CHECK-NEXT:     mpc.quantize %{{.*}} delayed(%t[0]
//  CHECK-NEXT:     mpc.reshape %{{.*}} : tensor<2x8x32xbf16> to tensor<16x32xbf16>
//  CHECK-NEXT:     mpc.reduce_sum %{{.*}} dims [0] : tensor<16x32xbf16>
//  CHECK-NEXT:     mpc.cast %{{.*}} : tensor<32xbf16> to tensor<32xf32>
//  CHECK-NEXT:     mpc.yield
//       CHECK:   mpc.scaled_matmul %[[G]]#2[%[[G]]#1]
//       CHECK:   mpc.fusion reduce {
//  CHECK-NEXT:     mpc.reduce_sum %[[G]]#0 dims [0, 1] : tensor<2x8x32xbf16>
//       CHECK:   mpc.reduce_sum %[[G]]#3 dims [0]
// NOROWS-LABEL: mpc.model @quantize_bias_sum
//       NOROWS:   mpc.fusion reduce {
//  NOROWS-NEXT:     mpc.reduce_sum %{{.*}} dims [0] : tensor<16x32xbf16>
mpc.model @quantize_bias_sum inputs(%h: tensor<2x8x32xbf16>, %dy: tensor<2x8x32xbf16>, %x: tensor<32x16xbf16>) params() state(%t: tensor<5x1xf32> = zeros) {
  %dg = mpc.gelu_grad %dy, %h approximate tanh : tensor<2x8x32xbf16>
  %qd, %sd, %qt = mpc.quantize %dg delayed(%t[0] margin 0 : tensor<5x1xf32>) : tensor<2x8x32xbf16> to tensor<2x8x32xf8E5M2> transposed tensor<32x16xf8E5M2>
  %qx, %sx = mpc.quantize %x : tensor<32x16xbf16> to tensor<32x16xf8E4M3FN>
  %dw = mpc.scaled_matmul %qt[%sd], %qx[%sx] : tensor<32x16xf8E5M2>, tensor<32x16xf8E4M3FN> -> tensor<32x32xf32>
  %r = mpc.reshape %dg : tensor<2x8x32xbf16> to tensor<16x32xbf16>
  %db = mpc.reduce_sum %r dims [0] : tensor<16x32xbf16>
  %dbf = mpc.cast %db : tensor<32xbf16> to tensor<32xf32>
  %other = mpc.reduce_sum %dg dims [0, 1] : tensor<2x8x32xbf16>
  %otherf = mpc.cast %other : tensor<32xbf16> to tensor<32xf32>
  %a = mpc.reduce_sum %dw dims [0, 1] : tensor<32x32xf32>
  %b = mpc.reduce_sum %dbf dims [0] : tensor<32xf32>
  %c = mpc.reduce_sum %otherf dims [0] : tensor<32xf32>
  %ab = mpc.add %a, %b : tensor<f32>, tensor<f32>
  %l = mpc.add %ab, %c : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// With current scaling the GELU gradient runs in the amax pass and again
// in the cast pass, which sums the bias gradient: nothing stores it.
// CHECK-LABEL: mpc.model @quantize_bias_sum_current
//       CHECK:   %[[G:.*]]:3 = mpc.fusion row {
//  CHECK-NEXT:     mpc.gelu_grad %dy, %h
//  CHECK-NEXT:     mpc.quantize %{{.*}} : tensor<16x32xbf16> to tensor<16x32xf8E5M2> transposed tensor<32x16xf8E5M2>
//  CHECK-NEXT:     mpc.reduce_sum %{{.*}} dims [0] : tensor<16x32xbf16>
//  CHECK-NEXT:     mpc.cast %{{.*}} : tensor<32xbf16> to tensor<32xf32>
//  CHECK-NEXT:     mpc.yield
//       CHECK:   mpc.scaled_matmul %[[G]]#1[%[[G]]#0]
// NOROWS-LABEL: mpc.model @quantize_bias_sum_current
//   NOROWS-NOT:   mpc.fusion row
mpc.model @quantize_bias_sum_current inputs(%h: tensor<16x32xbf16>, %dy: tensor<16x32xbf16>, %x: tensor<32x16xbf16>) params() {
  %dg = mpc.gelu_grad %dy, %h approximate tanh : tensor<16x32xbf16>
  %qd, %sd, %qt = mpc.quantize %dg : tensor<16x32xbf16> to tensor<16x32xf8E5M2> transposed tensor<32x16xf8E5M2>
  %qx, %sx = mpc.quantize %x : tensor<32x16xbf16> to tensor<32x16xf8E4M3FN>
  %dw = mpc.scaled_matmul %qt[%sd], %qx[%sx] : tensor<32x16xf8E5M2>, tensor<32x16xf8E4M3FN> -> tensor<32x32xf32>
  %db = mpc.reduce_sum %dg dims [0] : tensor<16x32xbf16>
  %dbf = mpc.cast %db : tensor<32xbf16> to tensor<32xf32>
  %a = mpc.reduce_sum %dw dims [0, 1] : tensor<32x32xf32>
  %b = mpc.reduce_sum %dbf dims [0] : tensor<32xf32>
  %l = mpc.add %a, %b : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A current-scaling quantization of what a layer norm's kernel stores joins
// the kernel's group, which finds the amax as it stores (no amax pass):
// after the residual sum the kernel stores too (read after the group).
// The layer norm's input gradient likewise, through its epilogue (the
// residual gradient added), with the quantization's bias sum. Must not
// join: delayed scaling (the cast pass raises the table's amax itself); a
// group whose stored residual sum is read before the quantization (%r2).
// CHECK-LABEL: mpc.model @layer_norm_amax
//       CHECK:   %[[A:.*]]:3 = mpc.fusion row {
//  CHECK-NEXT:     %[[S:.*]] = mpc.add %x, %res
//  CHECK-NEXT:     %[[N:.*]] = mpc.layer_norm %[[S]], %gamma, %beta
//  CHECK-NEXT:     %{{.*}}, %{{.*}}, %{{.*}} = mpc.quantize %[[N]] : tensor<16x32xbf16> to tensor<16x32xf8E4M3FN> transposed
//  CHECK-NEXT:     mpc.yield %[[S]],
//  CHECK-NEXT:   }
//  CHECK-NEXT:   %[[D:.*]] = mpc.layer_norm %[[A]]#0, %gamma, %beta
//  CHECK-NEXT:   mpc.quantize %[[D]] delayed
//       CHECK:   %[[R2:.*]]:2 = mpc.fusion row {
//  CHECK-NEXT:     mpc.add %x, %res
//  CHECK-NEXT:     mpc.layer_norm
//  CHECK-NEXT:     mpc.yield
//       CHECK:   mpc.neg %[[R2]]#0
//       CHECK:   mpc.quantize %[[R2]]#1 :
//       CHECK:   %[[G:.*]]:5 = mpc.fusion row {
//  CHECK-NEXT:     %[[DX:.*]], %{{.*}}, %{{.*}} = mpc.layer_norm_grad %dy, %x, %gamma
//  CHECK-NEXT:     %[[DR:.*]] = mpc.add %[[DX]], %dres
//  CHECK-NEXT:     mpc.quantize %[[DR]] : tensor<16x32xbf16> to tensor<16x32xf8E5M2> transposed
//  CHECK-NEXT:     mpc.reduce_sum %[[DR]] dims [0]
//  CHECK-NEXT:     mpc.cast
//  CHECK-NEXT:     mpc.yield
// NOROWS-LABEL: mpc.model @layer_norm_amax
//   NOROWS-NOT:   mpc.fusion row
mpc.model @layer_norm_amax inputs(%x: tensor<16x32xbf16>, %res: tensor<16x32xbf16>, %dy: tensor<16x32xbf16>, %dres: tensor<16x32xbf16>, %w: tensor<32x32xbf16>, %gamma: tensor<32xbf16>, %beta: tensor<32xbf16>) params() state(%t: tensor<5x1xf32> = zeros) {
  %s = mpc.add %x, %res : tensor<16x32xbf16>, tensor<16x32xbf16>
  %n = mpc.layer_norm %s, %gamma, %beta : tensor<16x32xbf16>, tensor<32xbf16>
  %qn, %sn, %qnt = mpc.quantize %n : tensor<16x32xbf16> to tensor<16x32xf8E4M3FN> transposed tensor<32x16xf8E4M3FN>
  %nd = mpc.layer_norm %s, %gamma, %beta : tensor<16x32xbf16>, tensor<32xbf16>
  %qd, %sd, %qdt = mpc.quantize %nd delayed(%t[0] margin 0 : tensor<5x1xf32>) : tensor<16x32xbf16> to tensor<16x32xf8E4M3FN> transposed tensor<32x16xf8E4M3FN>
  %s2 = mpc.add %x, %res : tensor<16x32xbf16>, tensor<16x32xbf16>
  %n2 = mpc.layer_norm %s2, %gamma, %beta : tensor<16x32xbf16>, tensor<32xbf16>
  %r2 = mpc.neg %s2 : tensor<16x32xbf16>
  %q2, %sc2 = mpc.quantize %n2 : tensor<16x32xbf16> to tensor<16x32xf8E4M3FN>
  %dx, %dg, %db = mpc.layer_norm_grad %dy, %x, %gamma : tensor<16x32xbf16>, tensor<32xbf16>
  %dr = mpc.add %dx, %dres : tensor<16x32xbf16>, tensor<16x32xbf16>
  %qg, %sg, %qgt = mpc.quantize %dr : tensor<16x32xbf16> to tensor<16x32xf8E5M2> transposed tensor<32x16xf8E5M2>
  %qw, %sw = mpc.quantize %w : tensor<32x32xbf16> to tensor<32x32xf8E4M3FN>
  %dw = mpc.scaled_matmul %qgt[%sg], %qnt[%sn] : tensor<32x16xf8E5M2>, tensor<32x16xf8E4M3FN> -> tensor<32x32xf32>
  %dwd = mpc.scaled_matmul %qgt[%sg], %qdt[%sd] : tensor<32x16xf8E5M2>, tensor<32x16xf8E4M3FN> -> tensor<32x32xf32>
  %y = mpc.scaled_matmul %q2[%sc2], %qw[%sw] : tensor<16x32xf8E4M3FN>, tensor<32x32xf8E4M3FN> -> tensor<16x32xf32>
  %bsum = mpc.reduce_sum %dr dims [0] : tensor<16x32xbf16>
  %bsumf = mpc.cast %bsum : tensor<32xbf16> to tensor<32xf32>
  %l1 = mpc.reduce_sum %dw dims [0, 1] : tensor<32x32xf32>
  %l2 = mpc.reduce_sum %dwd dims [0, 1] : tensor<32x32xf32>
  %l3 = mpc.reduce_sum %y dims [0, 1] : tensor<16x32xf32>
  %l4 = mpc.reduce_sum %bsumf dims [0] : tensor<32xf32>
  %l5 = mpc.reduce_sum %r2 dims [0, 1] : tensor<16x32xbf16>
  %l5f = mpc.cast %l5 : tensor<bf16> to tensor<f32>
  %a1 = mpc.add %l1, %l2 : tensor<f32>, tensor<f32>
  %a2 = mpc.add %a1, %l3 : tensor<f32>, tensor<f32>
  %a3 = mpc.add %a2, %l4 : tensor<f32>, tensor<f32>
  %a4 = mpc.add %a3, %l5f : tensor<f32>, tensor<f32>
  %dgs = mpc.reduce_sum %dg dims [0] : tensor<32xbf16>
  %dbs = mpc.reduce_sum %db dims [0] : tensor<32xbf16>
  %dgsf = mpc.cast %dgs : tensor<bf16> to tensor<f32>
  %dbsf = mpc.cast %dbs : tensor<bf16> to tensor<f32>
  %a5 = mpc.add %a4, %dgsf : tensor<f32>, tensor<f32>
  %a6 = mpc.add %a5, %dbsf : tensor<f32>, tensor<f32>
  mpc.output loss(%a6 : tensor<f32>)
}

// -----

// A batch norm's kernel applies the ReLU, or the residual sum and the ReLU,
// to what it normalises and stores only the ReLU's output. The gradient's
// kernel computes the ReLU's gradient (from the ReLU's output, read with
// the batch norm's input) as it reads it, and stores it where the shortcut
// reads it after (%gz, read by %da). Must not fuse: a batch norm's result
// read by anything besides the ReLU (%y3, by %l3).
// CHECK-LABEL: mpc.model @batch_norm_relu
//       CHECK:   %[[A:.*]] = mpc.fusion row {
//  CHECK-NEXT:     %[[Y:.*]] = mpc.batch_norm %x, %g, %b, %m1, %v1
//  CHECK-NEXT:     %[[R:.*]] = mpc.relu %[[Y]]
//  CHECK-NEXT:     mpc.yield %[[R]]
//       CHECK:   %[[Z:.*]] = mpc.fusion row {
//  CHECK-NEXT:     %[[Y2:.*]] = mpc.batch_norm %[[A]], %g, %b, %m2, %v2
//  CHECK-NEXT:     %[[S:.*]] = mpc.add %[[Y2]], %x
//  CHECK-NEXT:     %[[R2:.*]] = mpc.relu %[[S]]
//  CHECK-NEXT:     mpc.yield %[[R2]]
//       CHECK:   %[[Y3:.*]] = mpc.batch_norm %[[Z]], %g, %b, %m3, %v3
//  CHECK-NEXT:   mpc.relu %[[Y3]]
//       CHECK:   %[[G2:.*]]:3 = mpc.fusion row {
//  CHECK-NEXT:     %[[GZ:.*]] = mpc.relu_grad %dz, %[[Z]]
//  CHECK-NEXT:     %[[DA:.*]], %[[DG2:.*]], %[[DB2:.*]] = mpc.batch_norm_grad %[[GZ]], %[[A]], %g
//  CHECK-NEXT:     mpc.yield %[[GZ]], %[[DA]], %[[DG2]]
//       CHECK:   %{{.*}} = mpc.fusion row {
//  CHECK-NEXT:     %[[SUM:.*]] = mpc.add %[[G2]]#1, %[[G2]]#0
//  CHECK-NEXT:     %[[GA:.*]] = mpc.relu_grad %[[SUM]], %[[A]]
//  CHECK-NEXT:     %{{.*}}, %[[DG1:.*]], %{{.*}} = mpc.batch_norm_grad %[[GA]], %x, %g
//  CHECK-NEXT:     mpc.yield %[[DG1]] :
// NOROWS-LABEL: mpc.model @batch_norm_relu
//   NOROWS-NOT:   mpc.fusion row
//       NOROWS:   mpc.output
// Without batch-norm-gradient-prologues (the cpu target), the forward
// groups only.
//  NOBNP-LABEL: mpc.model @batch_norm_relu
//        NOBNP:   mpc.fusion row {
//        NOBNP:   mpc.fusion row {
//    NOBNP-NOT:   mpc.fusion row
//        NOBNP:   mpc.batch_norm_grad
//    NOBNP-NOT:   mpc.fusion row
//        NOBNP:   mpc.output
mpc.model @batch_norm_relu
    inputs(%x: tensor<2x3x4x4xf32>, %dz: tensor<2x3x4x4xf32>,
           %g: tensor<3xf32>, %b: tensor<3xf32>)
    params()
    state(%m1: tensor<3xf32> = zeros, %v1: tensor<3xf32> = ones,
          %m2: tensor<3xf32> = zeros, %v2: tensor<3xf32> = ones,
          %m3: tensor<3xf32> = zeros, %v3: tensor<3xf32> = ones) {
  %y = mpc.batch_norm %x, %g, %b, %m1, %v1 : tensor<2x3x4x4xf32>, tensor<3xf32>
  %a = mpc.relu %y : tensor<2x3x4x4xf32>
  %y2 = mpc.batch_norm %a, %g, %b, %m2, %v2 : tensor<2x3x4x4xf32>, tensor<3xf32>
  %s = mpc.add %y2, %x : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %z = mpc.relu %s : tensor<2x3x4x4xf32>
  %y3 = mpc.batch_norm %z, %g, %b, %m3, %v3 : tensor<2x3x4x4xf32>, tensor<3xf32>
  %r3 = mpc.relu %y3 : tensor<2x3x4x4xf32>
  %gz = mpc.relu_grad %dz, %z : tensor<2x3x4x4xf32>
  %da, %dg2, %db2 = mpc.batch_norm_grad %gz, %a, %g : tensor<2x3x4x4xf32>, tensor<3xf32>
  %sum = mpc.add %da, %gz : tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>
  %ga = mpc.relu_grad %sum, %a : tensor<2x3x4x4xf32>
  %dx, %dg1, %db1 = mpc.batch_norm_grad %ga, %x, %g : tensor<2x3x4x4xf32>, tensor<3xf32>
  %l0 = mpc.reduce_sum %r3 dims [0, 1, 2, 3] : tensor<2x3x4x4xf32>
  %l1 = mpc.reduce_sum %dg2 dims [0] : tensor<3xf32>
  %l2 = mpc.reduce_sum %dg1 dims [0] : tensor<3xf32>
  %l3 = mpc.reduce_sum %y3 dims [0, 1, 2, 3] : tensor<2x3x4x4xf32>
  %l01 = mpc.add %l0, %l1 : tensor<f32>, tensor<f32>
  %l012 = mpc.add %l01, %l2 : tensor<f32>, tensor<f32>
  %l = mpc.add %l012, %l3 : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A max pooling that alone reads a batch norm's ReLU (a ResNet's stem)
// joins the batch norm's group as its last op: the pool's loads normalise,
// and only the pooled values, their window positions and the statistics
// are stored. The pool's gradient stays a kernel of its own: gathered in
// the batch norm gradient's kernels, it is evaluated by each of a sliced
// gradient's two passes (ResNet-50's stem: 0.14 GB fewer, but modelled
// 0.03 ms slower). Must not fuse: a ReLU read besides the pool (%r2, by
// %l2).
// CHECK-LABEL: mpc.model @batch_norm_max_pool
//       CHECK:   %[[F:.*]]:3 = mpc.fusion row {
//  CHECK-NEXT:     %[[Y:.*]], %[[S:.*]] = mpc.batch_norm %x, %g, %b, %m1, %v1
//  CHECK-NEXT:     %[[R:.*]] = mpc.relu %[[Y]]
//  CHECK-NEXT:     %[[P:.*]], %[[I:.*]] = mpc.max_pool2d_with_indices %[[R]]
//  CHECK-NEXT:     mpc.yield %[[S]], %[[P]], %[[I]]
//       CHECK:   %[[R2:.*]] = mpc.fusion row {
//  CHECK-NEXT:     mpc.batch_norm %x, %g, %b, %m2, %v2
//  CHECK-NEXT:     mpc.relu
//  CHECK-NEXT:     mpc.yield
//  CHECK-NEXT:   }
//  CHECK-NEXT:   %[[P2:.*]], %[[I2:.*]] = mpc.max_pool2d_with_indices %[[R2]]
//       CHECK:   %[[D:.*]] = mpc.max_pool2d_indices_grad %[[F]]#1, %[[F]]#2
//  CHECK-NEXT:   mpc.batch_norm_grad %[[D]], %x, %g
// NOROWS-LABEL: mpc.model @batch_norm_max_pool
//   NOROWS-NOT:   mpc.fusion row
//       NOROWS:   mpc.output
// Without batch-norm-gradient-prologues (the cpu target), the forward
// groups only.
//  NOBNP-LABEL: mpc.model @batch_norm_max_pool
//        NOBNP:   mpc.max_pool2d_with_indices
//        NOBNP:   mpc.fusion row {
//    NOBNP-NOT:   mpc.fusion row
//        NOBNP:   mpc.output
mpc.model @batch_norm_max_pool
    inputs(%x: tensor<2x3x6x6xf32>, %g: tensor<3xf32>, %b: tensor<3xf32>)
    params()
    state(%m1: tensor<3xf32> = zeros, %v1: tensor<3xf32> = ones,
          %m2: tensor<3xf32> = zeros, %v2: tensor<3xf32> = ones) {
  %y, %s = mpc.batch_norm %x, %g, %b, %m1, %v1 : tensor<2x3x6x6xf32>, tensor<3xf32> stats tensor<2x3xf32>
  %r = mpc.relu %y : tensor<2x3x6x6xf32>
  %p, %i = mpc.max_pool2d_with_indices %r kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x3x6x6xf32>
  %y2 = mpc.batch_norm %x, %g, %b, %m2, %v2 : tensor<2x3x6x6xf32>, tensor<3xf32>
  %r2 = mpc.relu %y2 : tensor<2x3x6x6xf32>
  %p2, %i2 = mpc.max_pool2d_with_indices %r2 kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x3x6x6xf32>
  %d = mpc.max_pool2d_indices_grad %p, %i kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x3x3x3xf32>, tensor<2x3x3x3xi8> -> tensor<2x3x6x6xf32>
  %dx, %dg, %db = mpc.batch_norm_grad %d, %x, %g : tensor<2x3x6x6xf32>, tensor<3xf32>
  %d2 = mpc.max_pool2d_indices_grad %p2, %i2 kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<2x3x3x3xf32>, tensor<2x3x3x3xi8> -> tensor<2x3x6x6xf32>
  %dx2, %dg2, %db2 = mpc.batch_norm_grad %d2, %x, %g : tensor<2x3x6x6xf32>, tensor<3xf32>
  %l0 = mpc.reduce_sum %dg dims [0] : tensor<3xf32>
  %l1 = mpc.reduce_sum %dg2 dims [0] : tensor<3xf32>
  %l2 = mpc.reduce_sum %r2 dims [0, 1, 2, 3] : tensor<2x3x6x6xf32>
  %l3 = mpc.reduce_sum %d2 dims [0, 1, 2, 3] : tensor<2x3x6x6xf32>
  %ls = mpc.reduce_sum %s dims [0, 1] : tensor<2x3xf32>
  %l01 = mpc.add %l0, %l1 : tensor<f32>, tensor<f32>
  %l012 = mpc.add %l01, %l2 : tensor<f32>, tensor<f32>
  %l0123 = mpc.add %l012, %l3 : tensor<f32>, tensor<f32>
  %l = mpc.add %l0123, %ls : tensor<f32>, tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}
