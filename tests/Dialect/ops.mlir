// RUN: mpc-opt %s --split-input-file | FileCheck %s
// RUN: mpc-opt %s --split-input-file | mpc-opt --split-input-file | FileCheck %s
// RUN: mpc-opt %s --split-input-file --mlir-print-op-generic \
// RUN:   | mpc-opt --split-input-file | FileCheck %s
// RUN: mpc-opt %s --split-input-file --mlir-print-op-generic \
// RUN:   | FileCheck %s --check-prefix=GENERIC

// Round trip of every op, attribute and keyword form of the mpc dialect. The
// GENERIC prefix pins the result types that ops with inferred types infer.

//===----------------------------------------------------------------------===//
// mpc.model and mpc.output
//===----------------------------------------------------------------------===//

// A model with all three argument groups, an initialiser of every kind and
// arity, and extra outputs. Argument names survive printing.
// not-trainable: its parameters are f32, bf16 and f16 at once, and the
// fused optimizer updates one storage type (the round trip is the test).
// CHECK-LABEL: mpc.model @model_all_groups
//  CHECK-NEXT:     inputs(%x: tensor<8x4xf32>, %tokens: tensor<8xi64>, %h: tensor<8x4xf16>, %b16: tensor<8x4xbf16>, %y: tensor<8xi32>)
//  CHECK-NEXT:     params(%zeros: tensor<4xf32> = zeros,
//  CHECK-NEXT:            %ones: tensor<4xf32> = ones,
//  CHECK-NEXT:            %const: tensor<4xf32> = constant(0.5),
//  CHECK-NEXT:            %const_int: tensor<4xf32> = constant(-3),
//  CHECK-NEXT:            %normal_std: tensor<4x4xf32> = normal(0.02),
//  CHECK-NEXT:            %normal_mean_std: tensor<4x4xf32> = normal(-1, 1.0e-05),
//  CHECK-NEXT:            %uniform: tensor<4x4xf32> = uniform(-0.0357, 0.0357),
//  CHECK-NEXT:            %ku: tensor<4x4xf32> = kaiming_uniform,
//  CHECK-NEXT:            %ku_a: tensor<4x4xf32> = kaiming_uniform(2.23606797749979),
//  CHECK-NEXT:            %kn: tensor<4x4x3x3xf32> = kaiming_normal,
//  CHECK-NEXT:            %kn_a: tensor<4x4x3x3xf32> = kaiming_normal(0),
//  CHECK-NEXT:            %xu: tensor<4x4xf32> = xavier_uniform,
//  CHECK-NEXT:            %xu_gain: tensor<4x4xf32> = xavier_uniform(1.5),
//  CHECK-NEXT:            %xn: tensor<4x4xbf16> = xavier_normal,
//  CHECK-NEXT:            %xn_gain: tensor<4x4xf16> = xavier_normal(200),
//  CHECK-NEXT:            %enc.layers.0.w: tensor<4x4xf32> = normal(0, 2))
//  CHECK-NEXT:     state(%bn.running_mean: tensor<4xf32> = zeros,
//  CHECK-NEXT:           %bn.running_var: tensor<4xf32> = ones) {
//       CHECK:   %[[H:.*]] = mpc.linear %x, %normal_std, %zeros : tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>
//       CHECK:   %[[N:.*]] = mpc.batch_norm %[[H]], %ones, %const, %bn.running_mean, %bn.running_var : tensor<8x4xf32>, tensor<4xf32>
//       CHECK:   %[[LOSS:.*]] = mpc.cross_entropy %[[N]], %y : tensor<8x4xf32>, tensor<8xi32>
//       CHECK:   mpc.output loss(%[[LOSS]] : tensor<f32>) logits(%[[N]] : tensor<8x4xf32>) hidden.act(%[[H]] : tensor<8x4xf32>) tokens(%tokens : tensor<8xi64>)
//  CHECK-NEXT: }
mpc.model @model_all_groups
    inputs(%x: tensor<8x4xf32>, %tokens: tensor<8xi64>, %h: tensor<8x4xf16>,
           %b16: tensor<8x4xbf16>, %y: tensor<8xi32>)
    params(%zeros: tensor<4xf32> = zeros,
           %ones: tensor<4xf32> = ones,
           %const: tensor<4xf32> = constant(0.5),
           %const_int: tensor<4xf32> = constant(-3),
           %normal_std: tensor<4x4xf32> = normal(0.02),
           %normal_mean_std: tensor<4x4xf32> = normal(-1.0, 1.0e-5),
           %uniform: tensor<4x4xf32> = uniform(-0.0357, 0.0357),
           %ku: tensor<4x4xf32> = kaiming_uniform,
           %ku_a: tensor<4x4xf32> = kaiming_uniform(2.23606797749979),
           %kn: tensor<4x4x3x3xf32> = kaiming_normal,
           %kn_a: tensor<4x4x3x3xf32> = kaiming_normal(0),
           %xu: tensor<4x4xf32> = xavier_uniform,
           %xu_gain: tensor<4x4xf32> = xavier_uniform(1.5),
           %xn: tensor<4x4xbf16> = xavier_normal,
           %xn_gain: tensor<4x4xf16> = xavier_normal(2.0e2),
           %enc.layers.0.w: tensor<4x4xf32> = normal(0, 2))
    state(%bn.running_mean: tensor<4xf32> = zeros,
          %bn.running_var: tensor<4xf32> = ones) {
  %h0 = mpc.linear %x, %normal_std, %zeros
      : tensor<8x4xf32>, tensor<4x4xf32>, tensor<4xf32>
  %n = mpc.batch_norm %h0, %ones, %const, %bn.running_mean, %bn.running_var
      : tensor<8x4xf32>, tensor<4xf32>
  %loss = mpc.cross_entropy %n, %y : tensor<8x4xf32>, tensor<8xi32>
  mpc.output loss(%loss : tensor<f32>) logits(%n : tensor<8x4xf32>)
      hidden.act(%h0 : tensor<8x4xf32>) tokens(%tokens : tensor<8xi64>)
}

// -----

// The smallest model: no inputs, no parameters, no state, loss only.
// CHECK-LABEL: mpc.model @model_empty_groups
//  CHECK-NEXT:     inputs()
//  CHECK-NEXT:     params() {
//  CHECK-NEXT:   %[[C:.*]] = mpc.constant dense<1.000000e+00> : tensor<f32>
//  CHECK-NEXT:   mpc.output loss(%[[C]] : tensor<f32>)
//  CHECK-NEXT: }
mpc.model @model_empty_groups inputs() params() {
  %c = mpc.constant dense<1.0> : tensor<f32>
  mpc.output loss(%c : tensor<f32>)
}

// -----

// Discardable attributes on a model and on its output are kept.
// CHECK-LABEL: mpc.model @model_attributes
//  CHECK-NEXT:     inputs(%x: tensor<2xf32>)
//  CHECK-NEXT:     params(%w: tensor<2xf32> = zeros) attributes {mpc.note = "kept"} {
//       CHECK:   mpc.output loss(%{{.*}} : tensor<f32>) {mpc.tag = 1 : i64}
mpc.model @model_attributes inputs(%x: tensor<2xf32>)
    params(%w: tensor<2xf32> = zeros) attributes {mpc.note = "kept"} {
  %s = mpc.mul %x, %w : tensor<2xf32>, tensor<2xf32>
  %l = mpc.reduce_sum %s dims [0] : tensor<2xf32>
  mpc.output loss(%l : tensor<f32>) {mpc.tag = 1}
}

// -----

// A bf16 loss is a valid loss (a 0-d float tensor).
// CHECK-LABEL: mpc.model @model_bf16_loss
//       CHECK:   mpc.output loss(%{{.*}} : tensor<bf16>)
mpc.model @model_bf16_loss inputs(%x: tensor<bf16>) params() {
  mpc.output loss(%x : tensor<bf16>)
}

// -----

// The initialiser attribute on its own, outside a model.
// CHECK-LABEL: func.func @init_attr
//  CHECK-SAME:   init.a = #mpc.init<zeros>
//  CHECK-SAME:   init.b = #mpc.init<normal(0.02)>
//  CHECK-SAME:   init.c = #mpc.init<uniform(-1, 1.0e+20)>
//  CHECK-SAME:   init.d = #mpc.init<constant(-0.0)>
//  CHECK-SAME:   init.e = #mpc.init<constant(200)>
//  CHECK-SAME:   init.f = #mpc.init<constant(1.5)>
//  CHECK-SAME:   init.g = #mpc.init<kaiming_normal(0.001)>
func.func @init_attr() attributes {
    init.a = #mpc.init<zeros>, init.b = #mpc.init<normal(2.0e-2)>,
    init.c = #mpc.init<uniform(-1, 1.0e20)>, init.d = #mpc.init<constant(-0.0)>,
    init.e = #mpc.init<constant(200 : ui8)>,
    init.f = #mpc.init<constant(1.5 : bf16)>,
    init.g = #mpc.init<kaiming_normal(0.001)>} {
  return
}

// -----

//===----------------------------------------------------------------------===//
// GEMM-like ops
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @linear_bias
//  CHECK-SAME:   (%[[X:.*]]: tensor<64x784xf32>, %[[W:.*]]: tensor<256x784xf32>, %[[B:.*]]: tensor<256xf32>) -> tensor<64x256xf32>
//       CHECK:   %[[R:.*]] = mpc.linear %[[X]], %[[W]], %[[B]] : tensor<64x784xf32>, tensor<256x784xf32>, tensor<256xf32>
//       CHECK:   return %[[R]] : tensor<64x256xf32>
// GENERIC-LABEL: sym_name = "linear_bias"
//       GENERIC:   "mpc.linear"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<64x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<64x256xf32>
func.func @linear_bias(%x: tensor<64x784xf32>, %w: tensor<256x784xf32>, %b: tensor<256xf32>) -> tensor<64x256xf32> {
  %0 = mpc.linear %x, %w, %b : tensor<64x784xf32>, tensor<256x784xf32>, tensor<256xf32>
  return %0 : tensor<64x256xf32>
}

// CHECK-LABEL: func.func @linear_no_bias_batched
//  CHECK-SAME:   (%[[X:.*]]: tensor<4x16x64xbf16>, %[[W:.*]]: tensor<192x64xbf16>)
//       CHECK:   mpc.linear %[[X]], %[[W]] : tensor<4x16x64xbf16>, tensor<192x64xbf16>
// GENERIC-LABEL: sym_name = "linear_no_bias_batched"
//       GENERIC:   "mpc.linear"(%{{.*}}, %{{.*}}) : (tensor<4x16x64xbf16>, tensor<192x64xbf16>) -> tensor<4x16x192xbf16>
func.func @linear_no_bias_batched(%x: tensor<4x16x64xbf16>, %w: tensor<192x64xbf16>) -> tensor<4x16x192xbf16> {
  %0 = mpc.linear %x, %w : tensor<4x16x64xbf16>, tensor<192x64xbf16>
  return %0 : tensor<4x16x192xbf16>
}

// A rank-1 input is a single vector: [K] -> [N].
// CHECK-LABEL: func.func @linear_vector
//       CHECK:   mpc.linear %{{.*}}, %{{.*}} : tensor<8xf16>, tensor<3x8xf16>
// GENERIC-LABEL: sym_name = "linear_vector"
//       GENERIC:   "mpc.linear"(%{{.*}}, %{{.*}}) : (tensor<8xf16>, tensor<3x8xf16>) -> tensor<3xf16>
func.func @linear_vector(%x: tensor<8xf16>, %w: tensor<3x8xf16>) -> tensor<3xf16> {
  %0 = mpc.linear %x, %w : tensor<8xf16>, tensor<3x8xf16>
  return %0 : tensor<3xf16>
}

// CHECK-LABEL: func.func @matmul
//  CHECK-SAME:   (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8x2xf32>)
//       CHECK:   mpc.matmul %[[A]], %[[B]] : tensor<4x8xf32>, tensor<8x2xf32>
// GENERIC-LABEL: sym_name = "matmul"
//       GENERIC:   "mpc.matmul"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) -> tensor<4x2xf32> {
  %0 = mpc.matmul %a, %b : tensor<4x8xf32>, tensor<8x2xf32>
  return %0 : tensor<4x2xf32>
}

// CHECK-LABEL: func.func @fp8_gemm
//       CHECK:   %[[Q:.*]], %[[S:.*]] = mpc.quantize %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf8E4M3FN>
//       CHECK:   %[[G:.*]], %[[GS:.*]] = mpc.quantize %{{.*}} unscaled : tensor<2x8xbf16> to tensor<2x8xf8E5M2>
//       CHECK:   mpc.transpose %[[Q]] perm [1, 0] : tensor<4x8xf8E4M3FN>
//       CHECK:   mpc.scaled_matmul %[[G]][%[[GS]]], %[[Q]][%[[S]]] : tensor<2x8xf8E5M2>, tensor<4x8xf8E4M3FN> -> tensor<2x4xf32>
//       CHECK:   mpc.scaled_matmul %[[Q]][%[[S]]], %[[Q]][%[[S]]] bias %{{.*}} : tensor<4x8xf8E4M3FN>, tensor<4x8xf8E4M3FN>, tensor<4xbf16> -> tensor<4x4xbf16>
// GENERIC-LABEL: sym_name = "fp8_gemm"
//       GENERIC:   "mpc.quantize"(%{{.*}}) : (tensor<4x8xbf16>) -> (tensor<4x8xf8E4M3FN>, tensor<f32>)
//       GENERIC:   "mpc.transpose"(%{{.*}}) <{permutation = array<i64: 1, 0>}> : (tensor<4x8xf8E4M3FN>) -> tensor<8x4xf8E4M3FN>
func.func @fp8_gemm(%x: tensor<4x8xbf16>, %dy: tensor<2x8xbf16>, %b: tensor<4xbf16>) -> (tensor<2x4xf32>, tensor<4x4xbf16>, tensor<8x4xf8E4M3FN>) {
  %q, %s = mpc.quantize %x : tensor<4x8xbf16> to tensor<4x8xf8E4M3FN>
  %g, %gs = mpc.quantize %dy unscaled : tensor<2x8xbf16> to tensor<2x8xf8E5M2>
  %qt = mpc.transpose %q perm [1, 0] : tensor<4x8xf8E4M3FN>
  %0 = mpc.scaled_matmul %g[%gs], %q[%s] : tensor<2x8xf8E5M2>, tensor<4x8xf8E4M3FN> -> tensor<2x4xf32>
  %1 = mpc.scaled_matmul %q[%s], %q[%s] bias %b : tensor<4x8xf8E4M3FN>, tensor<4x8xf8E4M3FN>, tensor<4xbf16> -> tensor<4x4xbf16>
  return %0, %1, %qt : tensor<2x4xf32>, tensor<4x4xbf16>, tensor<8x4xf8E4M3FN>
}

// CHECK-LABEL: func.func @matmul_transpose_lhs
//       CHECK:   mpc.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<8x4xf32>, tensor<8x2xf32>
//   CHECK-NOT:   transpose_rhs
// GENERIC-LABEL: sym_name = "matmul_transpose_lhs"
//       GENERIC:   "mpc.matmul"(%{{.*}}, %{{.*}}) <{transpose_lhs}> : (tensor<8x4xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
func.func @matmul_transpose_lhs(%a: tensor<8x4xf32>, %b: tensor<8x2xf32>) -> tensor<4x2xf32> {
  %0 = mpc.matmul %a, %b transpose_lhs : tensor<8x4xf32>, tensor<8x2xf32>
  return %0 : tensor<4x2xf32>
}

// CHECK-LABEL: func.func @matmul_transpose_rhs
//       CHECK:   mpc.matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<4x8xf16>, tensor<2x8xf16>
// GENERIC-LABEL: sym_name = "matmul_transpose_rhs"
//       GENERIC:   "mpc.matmul"(%{{.*}}, %{{.*}}) <{transpose_rhs}> : (tensor<4x8xf16>, tensor<2x8xf16>) -> tensor<4x2xf16>
func.func @matmul_transpose_rhs(%a: tensor<4x8xf16>, %b: tensor<2x8xf16>) -> tensor<4x2xf16> {
  %0 = mpc.matmul %a, %b transpose_rhs : tensor<4x8xf16>, tensor<2x8xf16>
  return %0 : tensor<4x2xf16>
}

// CHECK-LABEL: func.func @matmul_transpose_both
//       CHECK:   mpc.matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<8x4xbf16>, tensor<2x8xbf16>
// GENERIC-LABEL: sym_name = "matmul_transpose_both"
//       GENERIC:   "mpc.matmul"(%{{.*}}, %{{.*}}) <{transpose_lhs, transpose_rhs}> : (tensor<8x4xbf16>, tensor<2x8xbf16>) -> tensor<4x2xbf16>
func.func @matmul_transpose_both(%a: tensor<8x4xbf16>, %b: tensor<2x8xbf16>) -> tensor<4x2xbf16> {
  %0 = mpc.matmul %a, %b transpose_lhs transpose_rhs : tensor<8x4xbf16>, tensor<2x8xbf16>
  return %0 : tensor<4x2xbf16>
}

// CHECK-LABEL: func.func @batch_matmul
//       CHECK:   mpc.batch_matmul %{{.*}}, %{{.*}} : tensor<4x2x16x32xf32>, tensor<4x2x32x8xf32>
// GENERIC-LABEL: sym_name = "batch_matmul"
//       GENERIC:   "mpc.batch_matmul"(%{{.*}}, %{{.*}}) : (tensor<4x2x16x32xf32>, tensor<4x2x32x8xf32>) -> tensor<4x2x16x8xf32>
func.func @batch_matmul(%a: tensor<4x2x16x32xf32>, %b: tensor<4x2x32x8xf32>) -> tensor<4x2x16x8xf32> {
  %0 = mpc.batch_matmul %a, %b : tensor<4x2x16x32xf32>, tensor<4x2x32x8xf32>
  return %0 : tensor<4x2x16x8xf32>
}

// Attention scores: q · kᵀ.
// CHECK-LABEL: func.func @batch_matmul_transpose_rhs
//       CHECK:   mpc.batch_matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<4x2x16x32xf32>, tensor<4x2x16x32xf32>
// GENERIC-LABEL: sym_name = "batch_matmul_transpose_rhs"
//       GENERIC:   "mpc.batch_matmul"(%{{.*}}, %{{.*}}) <{transpose_rhs}> : (tensor<4x2x16x32xf32>, tensor<4x2x16x32xf32>) -> tensor<4x2x16x16xf32>
func.func @batch_matmul_transpose_rhs(%q: tensor<4x2x16x32xf32>, %k: tensor<4x2x16x32xf32>) -> tensor<4x2x16x16xf32> {
  %0 = mpc.batch_matmul %q, %k transpose_rhs : tensor<4x2x16x32xf32>, tensor<4x2x16x32xf32>
  return %0 : tensor<4x2x16x16xf32>
}

// CHECK-LABEL: func.func @batch_matmul_transpose_lhs
//       CHECK:   mpc.batch_matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<3x5x4xf16>, tensor<3x5x6xf16>
// GENERIC-LABEL: sym_name = "batch_matmul_transpose_lhs"
//       GENERIC:   "mpc.batch_matmul"(%{{.*}}, %{{.*}}) <{transpose_lhs}> : (tensor<3x5x4xf16>, tensor<3x5x6xf16>) -> tensor<3x4x6xf16>
func.func @batch_matmul_transpose_lhs(%a: tensor<3x5x4xf16>, %b: tensor<3x5x6xf16>) -> tensor<3x4x6xf16> {
  %0 = mpc.batch_matmul %a, %b transpose_lhs : tensor<3x5x4xf16>, tensor<3x5x6xf16>
  return %0 : tensor<3x4x6xf16>
}

// CHECK-LABEL: func.func @batch_matmul_transpose_both
//       CHECK:   mpc.batch_matmul %{{.*}}, %{{.*}} transpose_lhs transpose_rhs : tensor<3x5x4xf32>, tensor<3x6x5xf32>
// GENERIC-LABEL: sym_name = "batch_matmul_transpose_both"
//       GENERIC:   "mpc.batch_matmul"(%{{.*}}, %{{.*}}) <{transpose_lhs, transpose_rhs}> : (tensor<3x5x4xf32>, tensor<3x6x5xf32>) -> tensor<3x4x6xf32>
func.func @batch_matmul_transpose_both(%a: tensor<3x5x4xf32>, %b: tensor<3x6x5xf32>) -> tensor<3x4x6xf32> {
  %0 = mpc.batch_matmul %a, %b transpose_lhs transpose_rhs : tensor<3x5x4xf32>, tensor<3x6x5xf32>
  return %0 : tensor<3x4x6xf32>
}

// Defaults: stride 1, padding 0, dilation 1, groups 1.
// CHECK-LABEL: func.func @conv2d_defaults
//  CHECK-SAME:   (%[[X:.*]]: tensor<8x3x32x32xf32>, %[[W:.*]]: tensor<16x3x3x3xf32>)
//       CHECK:   mpc.conv2d %[[X]], %[[W]] : tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>
// GENERIC-LABEL: sym_name = "conv2d_defaults"
//       GENERIC:   "mpc.conv2d"(%{{.*}}, %{{.*}}) : (tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>) -> tensor<8x16x30x30xf32>
func.func @conv2d_defaults(%x: tensor<8x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) -> tensor<8x16x30x30xf32> {
  %0 = mpc.conv2d %x, %w : tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>
  return %0 : tensor<8x16x30x30xf32>
}

// CHECK-LABEL: func.func @conv2d_stride_padding_bias
//  CHECK-SAME:   (%[[X:.*]]: tensor<8x3x32x32xf32>, %[[W:.*]]: tensor<16x3x3x3xf32>, %[[B:.*]]: tensor<16xf32>)
//       CHECK:   mpc.conv2d %[[X]], %[[W]], %[[B]] stride [2, 2] padding [1, 1] : tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>
// GENERIC-LABEL: sym_name = "conv2d_stride_padding_bias"
//       GENERIC:   "mpc.conv2d"(%{{.*}}, %{{.*}}, %{{.*}}) <{padding = array<i64: 1, 1>, stride = array<i64: 2, 2>}> : (tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<8x16x16x16xf32>
func.func @conv2d_stride_padding_bias(%x: tensor<8x3x32x32xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>) -> tensor<8x16x16x16xf32> {
  %0 = mpc.conv2d %x, %w, %b stride [2, 2] padding [1, 1] : tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>
  return %0 : tensor<8x16x16x16xf32>
}

// Every attribute at once: a grouped, dilated, strided, asymmetric conv.
// H: (20 + 2*2 - 2*(3-1) - 1) / 2 + 1 = 10; W: (10 + 0 - 1*(1-1) - 1) / 3 + 1 = 4.
// CHECK-LABEL: func.func @conv2d_all_attributes
//       CHECK:   mpc.conv2d %{{.*}}, %{{.*}}, %{{.*}} stride [2, 3] padding [2, 0] dilation [2, 1] groups 2 : tensor<2x4x20x10xbf16>, tensor<6x2x3x1xbf16>, tensor<6xbf16>
// GENERIC-LABEL: sym_name = "conv2d_all_attributes"
//       GENERIC:   "mpc.conv2d"(%{{.*}}, %{{.*}}, %{{.*}}) <{dilation = array<i64: 2, 1>, groups = 2 : i64, padding = array<i64: 2, 0>, stride = array<i64: 2, 3>}> : (tensor<2x4x20x10xbf16>, tensor<6x2x3x1xbf16>, tensor<6xbf16>) -> tensor<2x6x10x4xbf16>
func.func @conv2d_all_attributes(%x: tensor<2x4x20x10xbf16>, %w: tensor<6x2x3x1xbf16>, %b: tensor<6xbf16>) -> tensor<2x6x10x4xbf16> {
  %0 = mpc.conv2d %x, %w, %b stride [2, 3] padding [2, 0] dilation [2, 1] groups 2 : tensor<2x4x20x10xbf16>, tensor<6x2x3x1xbf16>, tensor<6xbf16>
  return %0 : tensor<2x6x10x4xbf16>
}

// Depthwise: groups equal to the channels, dilation without bias.
// CHECK-LABEL: func.func @conv2d_depthwise
//       CHECK:   mpc.conv2d %{{.*}}, %{{.*}} dilation [2, 2] groups 4 : tensor<1x4x9x9xf16>, tensor<4x1x3x3xf16>
// GENERIC-LABEL: sym_name = "conv2d_depthwise"
//       GENERIC:   "mpc.conv2d"(%{{.*}}, %{{.*}}) <{dilation = array<i64: 2, 2>, groups = 4 : i64}> : (tensor<1x4x9x9xf16>, tensor<4x1x3x3xf16>) -> tensor<1x4x5x5xf16>
func.func @conv2d_depthwise(%x: tensor<1x4x9x9xf16>, %w: tensor<4x1x3x3xf16>) -> tensor<1x4x5x5xf16> {
  %0 = mpc.conv2d %x, %w dilation [2, 2] groups 4 : tensor<1x4x9x9xf16>, tensor<4x1x3x3xf16>
  return %0 : tensor<1x4x5x5xf16>
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @add_same_shape
//  CHECK-SAME:   (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4x8xf32>)
//       CHECK:   mpc.add %[[A]], %[[B]] : tensor<4x8xf32>, tensor<4x8xf32>
// GENERIC-LABEL: sym_name = "add_same_shape"
//       GENERIC:   "mpc.add"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
func.func @add_same_shape(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = mpc.add %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Right-aligned broadcast of a bias row.
// CHECK-LABEL: func.func @add_broadcast_row
//       CHECK:   mpc.add %{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<8xf32>
// GENERIC-LABEL: sym_name = "add_broadcast_row"
//       GENERIC:   "mpc.add"(%{{.*}}, %{{.*}}) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
func.func @add_broadcast_row(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = mpc.add %a, %b : tensor<4x8xf32>, tensor<8xf32>
  return %0 : tensor<4x8xf32>
}

// Size-1 dims on both sides broadcast against each other.
// CHECK-LABEL: func.func @sub_broadcast_both
//       CHECK:   mpc.sub %{{.*}}, %{{.*}} : tensor<4x1xf16>, tensor<1x8xf16>
// GENERIC-LABEL: sym_name = "sub_broadcast_both"
//       GENERIC:   "mpc.sub"(%{{.*}}, %{{.*}}) : (tensor<4x1xf16>, tensor<1x8xf16>) -> tensor<4x8xf16>
func.func @sub_broadcast_both(%a: tensor<4x1xf16>, %b: tensor<1x8xf16>) -> tensor<4x8xf16> {
  %0 = mpc.sub %a, %b : tensor<4x1xf16>, tensor<1x8xf16>
  return %0 : tensor<4x8xf16>
}

// A scalar (0-d) operand broadcasts to anything.
// CHECK-LABEL: func.func @mul_scalar
//       CHECK:   mpc.mul %{{.*}}, %{{.*}} : tensor<f32>, tensor<2x3xf32>
// GENERIC-LABEL: sym_name = "mul_scalar"
//       GENERIC:   "mpc.mul"(%{{.*}}, %{{.*}}) : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @mul_scalar(%a: tensor<f32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mpc.mul %a, %b : tensor<f32>, tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @div
//       CHECK:   mpc.div %{{.*}}, %{{.*}} : tensor<2x1x3xbf16>, tensor<5x1xbf16>
// GENERIC-LABEL: sym_name = "div"
//       GENERIC:   "mpc.div"(%{{.*}}, %{{.*}}) : (tensor<2x1x3xbf16>, tensor<5x1xbf16>) -> tensor<2x5x3xbf16>
func.func @div(%a: tensor<2x1x3xbf16>, %b: tensor<5x1xbf16>) -> tensor<2x5x3xbf16> {
  %0 = mpc.div %a, %b : tensor<2x1x3xbf16>, tensor<5x1xbf16>
  return %0 : tensor<2x5x3xbf16>
}

// CHECK-LABEL: func.func @unary
//  CHECK-SAME:   (%[[X:.*]]: tensor<4x8xf32>)
//       CHECK:   %[[NEG:.*]] = mpc.neg %[[X]] : tensor<4x8xf32>
//       CHECK:   %[[RELU:.*]] = mpc.relu %[[NEG]] : tensor<4x8xf32>
//       CHECK:   %[[TANH:.*]] = mpc.tanh %[[RELU]] : tensor<4x8xf32>
//       CHECK:   %[[SIG:.*]] = mpc.sigmoid %[[TANH]] : tensor<4x8xf32>
//       CHECK:   %[[SILU:.*]] = mpc.silu %[[SIG]] : tensor<4x8xf32>
//       CHECK:   %[[EXP:.*]] = mpc.exp %[[SILU]] : tensor<4x8xf32>
//       CHECK:   %[[LOG:.*]] = mpc.log %[[EXP]] : tensor<4x8xf32>
//       CHECK:   %[[SQRT:.*]] = mpc.sqrt %[[LOG]] : tensor<4x8xf32>
//       CHECK:   %[[RSQRT:.*]] = mpc.rsqrt %[[SQRT]] : tensor<4x8xf32>
//       CHECK:   %[[RELU6:.*]] = mpc.clamp %[[RSQRT]] min 0.000000e+00 max 6.000000e+00 : tensor<4x8xf32>
//       CHECK:   %[[MIN:.*]] = mpc.clamp %[[RELU6]] min -1.000000e+00 : tensor<4x8xf32>
//       CHECK:   %[[MAX:.*]] = mpc.clamp %[[MIN]] max 1.000000e+00 : tensor<4x8xf32>
//       CHECK:   return %[[MAX]]
func.func @unary(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = mpc.neg %x : tensor<4x8xf32>
  %1 = mpc.relu %0 : tensor<4x8xf32>
  %2 = mpc.tanh %1 : tensor<4x8xf32>
  %3 = mpc.sigmoid %2 : tensor<4x8xf32>
  %s = mpc.silu %3 : tensor<4x8xf32>
  %4 = mpc.exp %s : tensor<4x8xf32>
  %5 = mpc.log %4 : tensor<4x8xf32>
  %6 = mpc.sqrt %5 : tensor<4x8xf32>
  %7 = mpc.rsqrt %6 : tensor<4x8xf32>
  %8 = mpc.clamp %7 min 0.0 max 6.0 : tensor<4x8xf32>
  %9 = mpc.clamp %8 min -1.0 : tensor<4x8xf32>
  %10 = mpc.clamp %9 max 1.0 : tensor<4x8xf32>
  return %10 : tensor<4x8xf32>
}

// Unary ops take every float type and 0-d tensors.
// CHECK-LABEL: func.func @unary_half_types
//       CHECK:   mpc.relu %{{.*}} : tensor<f16>
//       CHECK:   mpc.exp %{{.*}} : tensor<3xbf16>
func.func @unary_half_types(%a: tensor<f16>, %b: tensor<3xbf16>) -> (tensor<f16>, tensor<3xbf16>) {
  %0 = mpc.relu %a : tensor<f16>
  %1 = mpc.exp %b : tensor<3xbf16>
  return %0, %1 : tensor<f16>, tensor<3xbf16>
}

// The default approximation (erf) is elided; tanh is printed.
// CHECK-LABEL: func.func @gelu
//       CHECK:   %[[E:.*]] = mpc.gelu %{{.*}} : tensor<4x8xf32>
//       CHECK:   %[[E2:.*]] = mpc.gelu %[[E]] : tensor<4x8xf32>
//       CHECK:   mpc.gelu %[[E2]] approximate tanh : tensor<4x8xf32>
// GENERIC-LABEL: sym_name = "gelu"
//       GENERIC:   "mpc.gelu"(%{{.*}}) <{approximate = 0 : i32}>
//       GENERIC:   "mpc.gelu"(%{{.*}}) <{approximate = 0 : i32}>
//       GENERIC:   "mpc.gelu"(%{{.*}}) <{approximate = 1 : i32}>
func.func @gelu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = mpc.gelu %x : tensor<4x8xf32>
  %1 = mpc.gelu %0 approximate erf : tensor<4x8xf32>
  %2 = mpc.gelu %1 approximate tanh : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @scale
//       CHECK:   mpc.scale %{{.*}} by 1.250000e-01 : tensor<4x8xf32>
//       CHECK:   mpc.scale %{{.*}} by -6.550400e+04 : tensor<4x8xf32>
// GENERIC-LABEL: sym_name = "scale"
//       GENERIC:   "mpc.scale"(%{{.*}}) <{factor = 1.250000e-01 : f64}>
func.func @scale(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = mpc.scale %x by 0.125 : tensor<4x8xf32>
  %1 = mpc.scale %0 by -65504.0 : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// The mask and both branches broadcast together.
// CHECK-LABEL: func.func @where
//  CHECK-SAME:   (%[[M:.*]]: tensor<16x16xi1>, %[[S:.*]]: tensor<4x2x16x16xf32>, %[[F:.*]]: tensor<f32>)
//       CHECK:   mpc.where %[[M]], %[[S]], %[[F]] : tensor<16x16xi1>, tensor<4x2x16x16xf32>, tensor<f32>
// GENERIC-LABEL: sym_name = "where"
//       GENERIC:   "mpc.where"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<16x16xi1>, tensor<4x2x16x16xf32>, tensor<f32>) -> tensor<4x2x16x16xf32>
func.func @where(%mask: tensor<16x16xi1>, %scores: tensor<4x2x16x16xf32>, %fill: tensor<f32>) -> tensor<4x2x16x16xf32> {
  %0 = mpc.where %mask, %scores, %fill : tensor<16x16xi1>, tensor<4x2x16x16xf32>, tensor<f32>
  return %0 : tensor<4x2x16x16xf32>
}

// The condition alone may set the result shape.
// CHECK-LABEL: func.func @where_condition_shape
// GENERIC-LABEL: sym_name = "where_condition_shape"
//       GENERIC:   "mpc.where"(%{{.*}}, %{{.*}}, %{{.*}}) : (tensor<3x4xi1>, tensor<4xf16>, tensor<1xf16>) -> tensor<3x4xf16>
func.func @where_condition_shape(%mask: tensor<3x4xi1>, %a: tensor<4xf16>, %b: tensor<1xf16>) -> tensor<3x4xf16> {
  %0 = mpc.where %mask, %a, %b : tensor<3x4xi1>, tensor<4xf16>, tensor<1xf16>
  return %0 : tensor<3x4xf16>
}

// The default seed (0) is elided.
// CHECK-LABEL: func.func @dropout
//       CHECK:   %[[D:.*]] = mpc.dropout %{{.*}} rate 1.000000e-01 seed 7 : tensor<4x8xf32>
//       CHECK:   %[[D2:.*]] = mpc.dropout %[[D]] rate 0.000000e+00 : tensor<4x8xf32>
//       CHECK:   mpc.dropout %[[D2]] rate 5.000000e-01 : tensor<4x8xf32>
// GENERIC-LABEL: sym_name = "dropout"
//       GENERIC:   "mpc.dropout"(%{{.*}}) <{rate = 1.000000e-01 : f64, seed = 7 : i64}>
//       GENERIC:   "mpc.dropout"(%{{.*}}) <{rate = 0.000000e+00 : f64, seed = 0 : i64}>
func.func @dropout(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = mpc.dropout %x rate 0.1 seed 7 : tensor<4x8xf32>
  %1 = mpc.dropout %0 rate 0.0 : tensor<4x8xf32>
  %2 = mpc.dropout %1 rate 0.5 seed 0 : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @cast
//       CHECK:   %[[H:.*]] = mpc.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xf16>
//       CHECK:   %[[B:.*]] = mpc.cast %[[H]] : tensor<4x8xf16> to tensor<4x8xbf16>
//       CHECK:   mpc.cast %[[B]] : tensor<4x8xbf16> to tensor<4x8xf32>
func.func @cast(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = mpc.cast %x : tensor<4x8xf32> to tensor<4x8xf16>
  %1 = mpc.cast %0 : tensor<4x8xf16> to tensor<4x8xbf16>
  %2 = mpc.cast %1 : tensor<4x8xbf16> to tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @constant
//       CHECK:   mpc.constant dense<0xFF800000> : tensor<f32>
//       CHECK:   mpc.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf16>
//       CHECK:   mpc.constant dense<0.000000e+00> : tensor<2x3xbf16>
//       CHECK:   mpc.constant {mpc.tag} dense<5.000000e-01> : tensor<f32>
func.func @constant() -> (tensor<f32>, tensor<2xf16>, tensor<2x3xbf16>, tensor<f32>) {
  %0 = mpc.constant dense<0xFF800000> : tensor<f32>
  %1 = mpc.constant dense<[1.0, 2.0]> : tensor<2xf16>
  %2 = mpc.constant dense<0.0> : tensor<2x3xbf16>
  %3 = mpc.constant {mpc.tag} dense<0.5> : tensor<f32>
  return %0, %1, %2, %3 : tensor<f32>, tensor<2xf16>, tensor<2x3xbf16>, tensor<f32>
}

// CHECK-LABEL: func.func @causal_mask
//       CHECK:   mpc.causal_mask : tensor<16x16xi1>
//       CHECK:   mpc.causal_mask : tensor<4x2x8x8xi1>
func.func @causal_mask() -> (tensor<16x16xi1>, tensor<4x2x8x8xi1>) {
  %0 = mpc.causal_mask : tensor<16x16xi1>
  %1 = mpc.causal_mask : tensor<4x2x8x8xi1>
  return %0, %1 : tensor<16x16xi1>, tensor<4x2x8x8xi1>
}

// -----

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reduce_sum
//       CHECK:   mpc.reduce_sum %{{.*}} dims [1] : tensor<4x8xf32>
// GENERIC-LABEL: sym_name = "reduce_sum"
//       GENERIC:   "mpc.reduce_sum"(%{{.*}}) <{dims = array<i64: 1>}> : (tensor<4x8xf32>) -> tensor<4xf32>
func.func @reduce_sum(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %0 = mpc.reduce_sum %x dims [1] : tensor<4x8xf32>
  return %0 : tensor<4xf32>
}

// Reducing every dim gives a 0-d tensor.
// CHECK-LABEL: func.func @reduce_sum_all
//       CHECK:   mpc.reduce_sum %{{.*}} dims [1, 0] : tensor<4x8xf32>
// GENERIC-LABEL: sym_name = "reduce_sum_all"
//       GENERIC:   "mpc.reduce_sum"(%{{.*}}) <{dims = array<i64: 1, 0>}> : (tensor<4x8xf32>) -> tensor<f32>
func.func @reduce_sum_all(%x: tensor<4x8xf32>) -> tensor<f32> {
  %0 = mpc.reduce_sum %x dims [1, 0] : tensor<4x8xf32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @reduce_mean_keepdim
//       CHECK:   mpc.reduce_mean %{{.*}} dims [0, 2] keepdim : tensor<4x8x16xf16>
// GENERIC-LABEL: sym_name = "reduce_mean_keepdim"
//       GENERIC:   "mpc.reduce_mean"(%{{.*}}) <{dims = array<i64: 0, 2>, keepdim}> : (tensor<4x8x16xf16>) -> tensor<1x8x1xf16>
func.func @reduce_mean_keepdim(%x: tensor<4x8x16xf16>) -> tensor<1x8x1xf16> {
  %0 = mpc.reduce_mean %x dims [0, 2] keepdim : tensor<4x8x16xf16>
  return %0 : tensor<1x8x1xf16>
}

// CHECK-LABEL: func.func @reduce_mean
//       CHECK:   mpc.reduce_mean %{{.*}} dims [2] : tensor<4x8x16xf32>
// GENERIC-LABEL: sym_name = "reduce_mean"
//       GENERIC:   "mpc.reduce_mean"(%{{.*}}) <{dims = array<i64: 2>}> : (tensor<4x8x16xf32>) -> tensor<4x8xf32>
func.func @reduce_mean(%x: tensor<4x8x16xf32>) -> tensor<4x8xf32> {
  %0 = mpc.reduce_mean %x dims [2] : tensor<4x8x16xf32>
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @reduce_max
//       CHECK:   mpc.reduce_max %{{.*}} dims [3] keepdim : tensor<4x2x16x16xbf16>
// GENERIC-LABEL: sym_name = "reduce_max"
//       GENERIC:   "mpc.reduce_max"(%{{.*}}) <{dims = array<i64: 3>, keepdim}> : (tensor<4x2x16x16xbf16>) -> tensor<4x2x16x1xbf16>
func.func @reduce_max(%x: tensor<4x2x16x16xbf16>) -> tensor<4x2x16x1xbf16> {
  %0 = mpc.reduce_max %x dims [3] keepdim : tensor<4x2x16x16xbf16>
  return %0 : tensor<4x2x16x1xbf16>
}

// CHECK-LABEL: func.func @reduce_max_no_keepdim
//       CHECK:   mpc.reduce_max %{{.*}} dims [0] : tensor<4x2xf32>
// GENERIC-LABEL: sym_name = "reduce_max_no_keepdim"
//       GENERIC:   "mpc.reduce_max"(%{{.*}}) <{dims = array<i64: 0>}> : (tensor<4x2xf32>) -> tensor<2xf32>
func.func @reduce_max_no_keepdim(%x: tensor<4x2xf32>) -> tensor<2xf32> {
  %0 = mpc.reduce_max %x dims [0] : tensor<4x2xf32>
  return %0 : tensor<2xf32>
}

// CHECK-LABEL: func.func @softmax
//       CHECK:   mpc.softmax %{{.*}} dim 3 : tensor<4x2x16x16xf32>
//       CHECK:   mpc.softmax %{{.*}} dim 0 : tensor<8xf16>
func.func @softmax(%s: tensor<4x2x16x16xf32>, %v: tensor<8xf16>) -> (tensor<4x2x16x16xf32>, tensor<8xf16>) {
  %0 = mpc.softmax %s dim 3 : tensor<4x2x16x16xf32>
  %1 = mpc.softmax %v dim 0 : tensor<8xf16>
  return %0, %1 : tensor<4x2x16x16xf32>, tensor<8xf16>
}

// CHECK-LABEL: func.func @log_softmax
//       CHECK:   mpc.log_softmax %{{.*}} dim 1 : tensor<64x10xf32>
func.func @log_softmax(%s: tensor<64x10xf32>) -> tensor<64x10xf32> {
  %0 = mpc.log_softmax %s dim 1 : tensor<64x10xf32>
  return %0 : tensor<64x10xf32>
}

// The default eps (1e-5) is elided; gamma may span several trailing dims.
// CHECK-LABEL: func.func @layer_norm
//  CHECK-SAME:   (%[[X:.*]]: tensor<4x16x64xf32>, %[[G:.*]]: tensor<64xf32>, %[[B:.*]]: tensor<64xf32>, %[[G2:.*]]: tensor<16x64xf32>, %[[B2:.*]]: tensor<16x64xf32>)
//       CHECK:   %[[Y:.*]] = mpc.layer_norm %[[X]], %[[G]], %[[B]] : tensor<4x16x64xf32>, tensor<64xf32>
//       CHECK:   %[[Y2:.*]] = mpc.layer_norm %[[Y]], %[[G]], %[[B]] eps 9.9999999999999995E-7 : tensor<4x16x64xf32>, tensor<64xf32>
//       CHECK:   mpc.layer_norm %[[Y2]], %[[G2]], %[[B2]] : tensor<4x16x64xf32>, tensor<16x64xf32>
// GENERIC-LABEL: sym_name = "layer_norm"
//       GENERIC:   "mpc.layer_norm"(%{{.*}}, %{{.*}}, %{{.*}}) <{eps = 1.000000e-05 : f64}>
//       GENERIC:   "mpc.layer_norm"(%{{.*}}, %{{.*}}, %{{.*}}) <{eps = 9.9999999999999995E-7 : f64}>
func.func @layer_norm(%x: tensor<4x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %g2: tensor<16x64xf32>, %b2: tensor<16x64xf32>) -> tensor<4x16x64xf32> {
  %0 = mpc.layer_norm %x, %g, %b eps 1.0e-05 : tensor<4x16x64xf32>, tensor<64xf32>
  %1 = mpc.layer_norm %0, %g, %b eps 1.0e-06 : tensor<4x16x64xf32>, tensor<64xf32>
  %2 = mpc.layer_norm %1, %g2, %b2 : tensor<4x16x64xf32>, tensor<16x64xf32>
  return %2 : tensor<4x16x64xf32>
}

// rms_norm: the default eps (1e-6, Llama's) is elided; gamma may be f32
// beside a half input.
// CHECK-LABEL: func.func @rms_norm
//       CHECK:   %[[Y:.*]] = mpc.rms_norm %{{.*}}, %{{.*}} : tensor<4x16x64xbf16>, tensor<64xf32>
//       CHECK:   mpc.rms_norm %[[Y]], %{{.*}} eps 1.000000e-05 : tensor<4x16x64xbf16>, tensor<64xf32>
// GENERIC-LABEL: sym_name = "rms_norm"
//       GENERIC:   "mpc.rms_norm"(%{{.*}}, %{{.*}}) <{eps = 9.9999999999999995E-7 : f64}>
func.func @rms_norm(%x: tensor<4x16x64xbf16>, %g: tensor<64xf32>) -> tensor<4x16x64xbf16> {
  %0 = mpc.rms_norm %x, %g eps 1.0e-06 : tensor<4x16x64xbf16>, tensor<64xf32>
  %1 = mpc.rms_norm %0, %g eps 1.0e-05 : tensor<4x16x64xbf16>, tensor<64xf32>
  return %1 : tensor<4x16x64xbf16>
}

// Defaults (momentum 0.1, eps 1e-5) are elided.
// CHECK-LABEL: func.func @batch_norm
//  CHECK-SAME:   (%[[X:.*]]: tensor<8x16x32x32xf32>, %[[G:.*]]: tensor<16xf32>, %[[B:.*]]: tensor<16xf32>, %[[M:.*]]: tensor<16xf32>, %[[V:.*]]: tensor<16xf32>
//       CHECK:   %[[Y:.*]] = mpc.batch_norm %[[X]], %[[G]], %[[B]], %[[M]], %[[V]] : tensor<8x16x32x32xf32>, tensor<16xf32>
//       CHECK:   %[[Y2:.*]] = mpc.batch_norm %[[Y]], %[[G]], %[[B]], %[[M]], %[[V]] momentum 0.000000e+00 eps 1.000000e-03 : tensor<8x16x32x32xf32>, tensor<16xf32>
//       CHECK:   mpc.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} momentum 1.000000e+00 : tensor<8x16xf16>, tensor<16xf16>
//       CHECK:   mpc.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} eps 2.000000e-05 : tensor<8x16xf16>, tensor<16xf16>
// bf16 parameters (without master weights) beside f32 running statistics:
// their type follows gamma's after `running`.
//       CHECK:   mpc.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %[[M]], %[[V]] : tensor<8x16xbf16>, tensor<16xbf16> running tensor<16xf32>
// The saved statistics' type follows, after `stats`, with or without the
// running statistics'.
//       CHECK:   %{{.*}}, %{{.*}} = mpc.batch_norm %[[X]], %[[G]], %[[B]], %[[M]], %[[V]] : tensor<8x16x32x32xf32>, tensor<16xf32> stats tensor<2x16xf32>
//       CHECK:   %{{.*}}, %{{.*}} = mpc.batch_norm %{{.*}}, %{{.*}}, %{{.*}}, %[[M]], %[[V]] : tensor<8x16xbf16>, tensor<16xbf16> running tensor<16xf32> stats tensor<2x16xf32>
// GENERIC-LABEL: sym_name = "batch_norm"
//       GENERIC:   "mpc.batch_norm"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{eps = 1.000000e-05 : f64, momentum = 1.000000e-01 : f64}>
func.func @batch_norm(%x: tensor<8x16x32x32xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>,
                      %x2: tensor<8x16xf16>, %g2: tensor<16xf16>,
                      %x3: tensor<8x16xbf16>, %g3: tensor<16xbf16>) -> (tensor<8x16x32x32xf32>, tensor<8x16xf16>, tensor<8x16xbf16>) {
  %0 = mpc.batch_norm %x, %g, %b, %m, %v momentum 0.1 : tensor<8x16x32x32xf32>, tensor<16xf32>
  %1 = mpc.batch_norm %0, %g, %b, %m, %v momentum 0.0 eps 1.0e-3 : tensor<8x16x32x32xf32>, tensor<16xf32>
  %2 = mpc.batch_norm %x2, %g2, %g2, %g2, %g2 momentum 1.0 : tensor<8x16xf16>, tensor<16xf16>
  %3 = mpc.batch_norm %2, %g2, %g2, %g2, %g2 eps 2.0e-5 : tensor<8x16xf16>, tensor<16xf16>
  %4 = mpc.batch_norm %x3, %g3, %g3, %m, %v : tensor<8x16xbf16>, tensor<16xbf16> running tensor<16xf32>
  %5, %s5 = mpc.batch_norm %x, %g, %b, %m, %v : tensor<8x16x32x32xf32>, tensor<16xf32> stats tensor<2x16xf32>
  %6, %s6 = mpc.batch_norm %x3, %g3, %g3, %m, %v : tensor<8x16xbf16>, tensor<16xbf16> running tensor<16xf32> stats tensor<2x16xf32>
  return %1, %3, %4 : tensor<8x16x32x32xf32>, tensor<8x16xf16>, tensor<8x16xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// Embedding and loss
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @embedding
//  CHECK-SAME:   (%[[T:.*]]: tensor<64x32xf32>, %[[I:.*]]: tensor<4x16xi32>)
//       CHECK:   mpc.embedding %[[T]], %[[I]] : tensor<64x32xf32>, tensor<4x16xi32>
// GENERIC-LABEL: sym_name = "embedding"
//       GENERIC:   "mpc.embedding"(%{{.*}}, %{{.*}}) : (tensor<64x32xf32>, tensor<4x16xi32>) -> tensor<4x16x32xf32>
func.func @embedding(%wte: tensor<64x32xf32>, %tokens: tensor<4x16xi32>) -> tensor<4x16x32xf32> {
  %0 = mpc.embedding %wte, %tokens : tensor<64x32xf32>, tensor<4x16xi32>
  return %0 : tensor<4x16x32xf32>
}

// i64 indices, and 0-d indices give one row.
// CHECK-LABEL: func.func @embedding_i64_scalar
//       CHECK:   mpc.embedding %{{.*}}, %{{.*}} : tensor<10x3xbf16>, tensor<i64>
// GENERIC-LABEL: sym_name = "embedding_i64_scalar"
//       GENERIC:   "mpc.embedding"(%{{.*}}, %{{.*}}) : (tensor<10x3xbf16>, tensor<i64>) -> tensor<3xbf16>
func.func @embedding_i64_scalar(%t: tensor<10x3xbf16>, %i: tensor<i64>) -> tensor<3xbf16> {
  %0 = mpc.embedding %t, %i : tensor<10x3xbf16>, tensor<i64>
  return %0 : tensor<3xbf16>
}

// The loss is an f32 scalar whatever the logits' type.
// CHECK-LABEL: func.func @cross_entropy
//  CHECK-SAME:   (%[[L:.*]]: tensor<64x10xf32>, %[[Y:.*]]: tensor<64xi32>)
//       CHECK:   mpc.cross_entropy %[[L]], %[[Y]] : tensor<64x10xf32>, tensor<64xi32>
// GENERIC-LABEL: sym_name = "cross_entropy"
//       GENERIC:   "mpc.cross_entropy"(%{{.*}}, %{{.*}}) : (tensor<64x10xf32>, tensor<64xi32>) -> tensor<f32>
func.func @cross_entropy(%logits: tensor<64x10xf32>, %y: tensor<64xi32>) -> tensor<f32> {
  %0 = mpc.cross_entropy %logits, %y : tensor<64x10xf32>, tensor<64xi32>
  return %0 : tensor<f32>
}

// -----

// mse_loss: an f32 scalar whatever the operands' type.
// CHECK-LABEL: func.func @mse_loss
//       CHECK:   mpc.mse_loss %{{.*}}, %{{.*}} : tensor<64x3xbf16>, tensor<64x3xbf16>
// GENERIC-LABEL: sym_name = "mse_loss"
//       GENERIC:   "mpc.mse_loss"(%{{.*}}, %{{.*}}) : (tensor<64x3xbf16>, tensor<64x3xbf16>) -> tensor<f32>
func.func @mse_loss(%y: tensor<64x3xbf16>, %t: tensor<64x3xbf16>) -> tensor<f32> {
  %0 = mpc.mse_loss %y, %t : tensor<64x3xbf16>, tensor<64x3xbf16>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @cross_entropy_ignore_index
//       CHECK:   mpc.cross_entropy %{{.*}}, %{{.*}} ignore_index -100 : tensor<4x16x50xf16>, tensor<4x16xi64>
// GENERIC-LABEL: sym_name = "cross_entropy_ignore_index"
//       GENERIC:   "mpc.cross_entropy"(%{{.*}}, %{{.*}}) <{ignore_index = -100 : i64}> : (tensor<4x16x50xf16>, tensor<4x16xi64>) -> tensor<f32>
func.func @cross_entropy_ignore_index(%logits: tensor<4x16x50xf16>, %y: tensor<4x16xi64>) -> tensor<f32> {
  %0 = mpc.cross_entropy %logits, %y ignore_index -100 : tensor<4x16x50xf16>, tensor<4x16xi64>
  return %0 : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reshape
//       CHECK:   %[[R:.*]] = mpc.reshape %{{.*}} : tensor<4x16x64xf32> to tensor<64x64xf32>
//       CHECK:   mpc.reshape %[[R]] : tensor<64x64xf32> to tensor<4096xf32>
func.func @reshape(%x: tensor<4x16x64xf32>) -> tensor<4096xf32> {
  %0 = mpc.reshape %x : tensor<4x16x64xf32> to tensor<64x64xf32>
  %1 = mpc.reshape %0 : tensor<64x64xf32> to tensor<4096xf32>
  return %1 : tensor<4096xf32>
}

// CHECK-LABEL: func.func @reshape_scalar
//       CHECK:   mpc.reshape %{{.*}} : tensor<1x1xf16> to tensor<f16>
func.func @reshape_scalar(%x: tensor<1x1xf16>) -> tensor<f16> {
  %0 = mpc.reshape %x : tensor<1x1xf16> to tensor<f16>
  return %0 : tensor<f16>
}

// CHECK-LABEL: func.func @transpose
//       CHECK:   mpc.transpose %{{.*}} perm [0, 2, 1, 3] : tensor<4x16x2x32xf32>
// GENERIC-LABEL: sym_name = "transpose"
//       GENERIC:   "mpc.transpose"(%{{.*}}) <{permutation = array<i64: 0, 2, 1, 3>}> : (tensor<4x16x2x32xf32>) -> tensor<4x2x16x32xf32>
func.func @transpose(%x: tensor<4x16x2x32xf32>) -> tensor<4x2x16x32xf32> {
  %0 = mpc.transpose %x perm [0, 2, 1, 3] : tensor<4x16x2x32xf32>
  return %0 : tensor<4x2x16x32xf32>
}

// CHECK-LABEL: func.func @transpose_rotate
//       CHECK:   mpc.transpose %{{.*}} perm [2, 0, 1] : tensor<2x3x5xbf16>
// GENERIC-LABEL: sym_name = "transpose_rotate"
//       GENERIC:   "mpc.transpose"(%{{.*}}) <{permutation = array<i64: 2, 0, 1>}> : (tensor<2x3x5xbf16>) -> tensor<5x2x3xbf16>
func.func @transpose_rotate(%x: tensor<2x3x5xbf16>) -> tensor<5x2x3xbf16> {
  %0 = mpc.transpose %x perm [2, 0, 1] : tensor<2x3x5xbf16>
  return %0 : tensor<5x2x3xbf16>
}

// CHECK-LABEL: func.func @broadcast
//       CHECK:   mpc.broadcast %{{.*}} : tensor<64xf32> to tensor<16x64xf32>
//       CHECK:   mpc.broadcast %{{.*}} : tensor<4x1xf16> to tensor<2x4x8xf16>
//       CHECK:   mpc.broadcast %{{.*}} : tensor<bf16> to tensor<3xbf16>
func.func @broadcast(%b: tensor<64xf32>, %c: tensor<4x1xf16>, %s: tensor<bf16>) -> (tensor<16x64xf32>, tensor<2x4x8xf16>, tensor<3xbf16>) {
  %0 = mpc.broadcast %b : tensor<64xf32> to tensor<16x64xf32>
  %1 = mpc.broadcast %c : tensor<4x1xf16> to tensor<2x4x8xf16>
  %2 = mpc.broadcast %s : tensor<bf16> to tensor<3xbf16>
  return %0, %1, %2 : tensor<16x64xf32>, tensor<2x4x8xf16>, tensor<3xbf16>
}

// CHECK-LABEL: func.func @slice
//       CHECK:   mpc.slice %{{.*}} starts [0, 0, 64] limits [4, 16, 128] : tensor<4x16x192xf32>
//   CHECK-NOT:   strides
// GENERIC-LABEL: sym_name = "slice"
//       GENERIC:   "mpc.slice"(%{{.*}}) <{limits = array<i64: 4, 16, 128>, starts = array<i64: 0, 0, 64>}> : (tensor<4x16x192xf32>) -> tensor<4x16x64xf32>
func.func @slice(%qkv: tensor<4x16x192xf32>) -> tensor<4x16x64xf32> {
  %0 = mpc.slice %qkv starts [0, 0, 64] limits [4, 16, 128] : tensor<4x16x192xf32>
  return %0 : tensor<4x16x64xf32>
}

// Strided: ceil((10 - 1) / 3) = 3 and ceil((4 - 0) / 2) = 2. (An empty
// range would give an extent of 0, which invalid.mlir rejects.)
// CHECK-LABEL: func.func @slice_strides
//       CHECK:   mpc.slice %{{.*}} starts [1, 0] limits [10, 4] strides [3, 1] : tensor<10x4xf16>
//       CHECK:   mpc.slice %{{.*}} starts [2, 0] limits [3, 4] strides [2, 2] : tensor<10x4xf16>
// GENERIC-LABEL: sym_name = "slice_strides"
//       GENERIC:   "mpc.slice"(%{{.*}}) <{limits = array<i64: 10, 4>, starts = array<i64: 1, 0>, strides = array<i64: 3, 1>}> : (tensor<10x4xf16>) -> tensor<3x4xf16>
//       GENERIC:   "mpc.slice"(%{{.*}}) <{limits = array<i64: 3, 4>, starts = array<i64: 2, 0>, strides = array<i64: 2, 2>}> : (tensor<10x4xf16>) -> tensor<1x2xf16>
func.func @slice_strides(%x: tensor<10x4xf16>) -> (tensor<3x4xf16>, tensor<1x2xf16>) {
  %0 = mpc.slice %x starts [1, 0] limits [10, 4] strides [3, 1] : tensor<10x4xf16>
  %1 = mpc.slice %x starts [2, 0] limits [3, 4] strides [2, 2] : tensor<10x4xf16>
  return %0, %1 : tensor<3x4xf16>, tensor<1x2xf16>
}

// CHECK-LABEL: func.func @concat
//  CHECK-SAME:   (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4x2xf32>)
//       CHECK:   mpc.concat %[[A]], %[[B]], %[[A]] dim 1 : tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x8xf32>
// GENERIC-LABEL: sym_name = "concat"
//       GENERIC:   "mpc.concat"(%{{.*}}, %{{.*}}, %{{.*}}) <{dim = 1 : i64}> : (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x8xf32>) -> tensor<4x18xf32>
func.func @concat(%a: tensor<4x8xf32>, %b: tensor<4x2xf32>) -> tensor<4x18xf32> {
  %0 = mpc.concat %a, %b, %a dim 1 : tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x8xf32>
  return %0 : tensor<4x18xf32>
}

// CHECK-LABEL: func.func @concat_single
//       CHECK:   mpc.concat %{{.*}} dim 0 : tensor<3xbf16>
// GENERIC-LABEL: sym_name = "concat_single"
//       GENERIC:   "mpc.concat"(%{{.*}}) <{dim = 0 : i64}> : (tensor<3xbf16>) -> tensor<3xbf16>
func.func @concat_single(%a: tensor<3xbf16>) -> tensor<3xbf16> {
  %0 = mpc.concat %a dim 0 : tensor<3xbf16>
  return %0 : tensor<3xbf16>
}

// -----

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

// The stride defaults to the kernel.
// CHECK-LABEL: func.func @max_pool2d
//       CHECK:   mpc.max_pool2d %{{.*}} kernel [2, 2] : tensor<8x16x32x32xf32>
// GENERIC-LABEL: sym_name = "max_pool2d"
//       GENERIC:   "mpc.max_pool2d"(%{{.*}}) <{kernel = array<i64: 2, 2>}> : (tensor<8x16x32x32xf32>) -> tensor<8x16x16x16xf32>
func.func @max_pool2d(%x: tensor<8x16x32x32xf32>) -> tensor<8x16x16x16xf32> {
  %0 = mpc.max_pool2d %x kernel [2, 2] : tensor<8x16x32x32xf32>
  return %0 : tensor<8x16x16x16xf32>
}

// (32 + 2 - 3) / 2 + 1 = 16 and (7 + 0 - 3) / 1 + 1 = 5.
// CHECK-LABEL: func.func @max_pool2d_stride_padding
//       CHECK:   mpc.max_pool2d %{{.*}} kernel [3, 3] stride [2, 1] padding [1, 0] : tensor<1x3x32x7xf16>
// GENERIC-LABEL: sym_name = "max_pool2d_stride_padding"
//       GENERIC:   "mpc.max_pool2d"(%{{.*}}) <{kernel = array<i64: 3, 3>, padding = array<i64: 1, 0>, stride = array<i64: 2, 1>}> : (tensor<1x3x32x7xf16>) -> tensor<1x3x16x5xf16>
func.func @max_pool2d_stride_padding(%x: tensor<1x3x32x7xf16>) -> tensor<1x3x16x5xf16> {
  %0 = mpc.max_pool2d %x kernel [3, 3] stride [2, 1] padding [1, 0] : tensor<1x3x32x7xf16>
  return %0 : tensor<1x3x16x5xf16>
}

// A window that does not divide the input drops the remainder: (7 - 2) / 2 + 1 = 3.
// CHECK-LABEL: func.func @avg_pool2d
//       CHECK:   mpc.avg_pool2d %{{.*}} kernel [2, 2] : tensor<2x4x7x7xbf16>
// GENERIC-LABEL: sym_name = "avg_pool2d"
//       GENERIC:   "mpc.avg_pool2d"(%{{.*}}) <{kernel = array<i64: 2, 2>}> : (tensor<2x4x7x7xbf16>) -> tensor<2x4x3x3xbf16>
func.func @avg_pool2d(%x: tensor<2x4x7x7xbf16>) -> tensor<2x4x3x3xbf16> {
  %0 = mpc.avg_pool2d %x kernel [2, 2] : tensor<2x4x7x7xbf16>
  return %0 : tensor<2x4x3x3xbf16>
}

// ceil_mode rounds up: (7 - 2) / 2 + 1 = 3 becomes 4, the last window
// holding one row and column of the input (squeezenet's MaxPool).
// CHECK-LABEL: func.func @max_pool2d_ceil_mode
//       CHECK:   mpc.max_pool2d %{{.*}} kernel [2, 2] ceil_mode : tensor<1x3x7x7xf32>
// GENERIC-LABEL: sym_name = "max_pool2d_ceil_mode"
//       GENERIC:   "mpc.max_pool2d"(%{{.*}}) <{ceil_mode, kernel = array<i64: 2, 2>}> : (tensor<1x3x7x7xf32>) -> tensor<1x3x4x4xf32>
func.func @max_pool2d_ceil_mode(%x: tensor<1x3x7x7xf32>) -> tensor<1x3x4x4xf32> {
  %0 = mpc.max_pool2d %x kernel [2, 2] ceil_mode : tensor<1x3x7x7xf32>
  return %0 : tensor<1x3x4x4xf32>
}

// Rows: (6 + 2 - 3) / 2 + 1 rounds up to 4, the last window starting at
// input row 5. Columns, stride 4: rounding up would add a window starting
// at column 2 * 4 - 1 = 7, in the trailing padding, which ceil_mode drops
// (PyTorch's rule): 2.
// CHECK-LABEL: func.func @avg_pool2d_ceil_mode
//       CHECK:   mpc.avg_pool2d %{{.*}} kernel [3, 3] stride [2, 4] padding [1, 1] ceil_mode : tensor<1x1x6x6xf32>
func.func @avg_pool2d_ceil_mode(%x: tensor<1x1x6x6xf32>) -> tensor<1x1x4x2xf32> {
  %0 = mpc.avg_pool2d %x kernel [3, 3] stride [2, 4] padding [1, 1] ceil_mode : tensor<1x1x6x6xf32>
  return %0 : tensor<1x1x4x2xf32>
}

// CHECK-LABEL: func.func @avg_pool2d_stride
//       CHECK:   mpc.avg_pool2d %{{.*}} kernel [2, 4] stride [1, 1] : tensor<2x4x8x8xf32>
// GENERIC-LABEL: sym_name = "avg_pool2d_stride"
//       GENERIC:   "mpc.avg_pool2d"(%{{.*}}) <{kernel = array<i64: 2, 4>, stride = array<i64: 1, 1>}> : (tensor<2x4x8x8xf32>) -> tensor<2x4x7x5xf32>
func.func @avg_pool2d_stride(%x: tensor<2x4x8x8xf32>) -> tensor<2x4x7x5xf32> {
  %0 = mpc.avg_pool2d %x kernel [2, 4] stride [1, 1] : tensor<2x4x8x8xf32>
  return %0 : tensor<2x4x7x5xf32>
}

// CHECK-LABEL: func.func @avg_pool2d_padding
//       CHECK:   mpc.avg_pool2d %{{.*}} kernel [3, 3] padding [1, 1] : tensor<2x4x9x9xf32>
// GENERIC-LABEL: sym_name = "avg_pool2d_padding"
//       GENERIC:   "mpc.avg_pool2d"(%{{.*}}) <{kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>}> : (tensor<2x4x9x9xf32>) -> tensor<2x4x3x3xf32>
func.func @avg_pool2d_padding(%x: tensor<2x4x9x9xf32>) -> tensor<2x4x3x3xf32> {
  %0 = mpc.avg_pool2d %x kernel [3, 3] padding [1, 1] : tensor<2x4x9x9xf32>
  return %0 : tensor<2x4x3x3xf32>
}

// -----

// mpc.attention in both layouts, causal, with a mask and plain; the
// logsumexp is f32 whatever the operands' type, and the result takes the
// value's head dim.
// CHECK-LABEL: func.func @attention
//       CHECK:   mpc.attention %{{.*}}, %{{.*}}, %{{.*}} scale 1.250000e-01 causal : tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>
//       CHECK:   mpc.attention %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 causal layout bthd : tensor<2x16x3x8xbf16>, tensor<2x16x3x8xbf16>, tensor<2x16x3x8xbf16>
//       CHECK:   mpc.attention %{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} : tensor<5x7xi1> scale 1.000000e+00 : tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x4xf32>
// GENERIC-LABEL: sym_name = "attention"
//       GENERIC:   -> (tensor<2x3x16x8xf16>, tensor<2x3x16xf32>)
//       GENERIC:   -> (tensor<2x16x3x8xbf16>, tensor<2x3x16xf32>)
//       GENERIC:   -> (tensor<2x3x5x4xf32>, tensor<2x3x5xf32>)
func.func @attention(%q: tensor<2x3x16x8xf16>, %t: tensor<2x16x3x8xbf16>,
                     %a: tensor<2x3x5x8xf32>, %b: tensor<2x3x7x8xf32>,
                     %c: tensor<2x3x7x4xf32>, %m: tensor<5x7xi1>) {
  %0:2 = mpc.attention %q, %q, %q scale 0.125 causal : tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>
  %1:2 = mpc.attention %t, %t, %t scale 0.5 causal layout bthd : tensor<2x16x3x8xbf16>, tensor<2x16x3x8xbf16>, tensor<2x16x3x8xbf16>
  %2:2 = mpc.attention %a, %b, %c mask %m : tensor<5x7xi1> scale 1.0 : tensor<2x3x5x8xf32>, tensor<2x3x7x8xf32>, tensor<2x3x7x4xf32>
  return
}
