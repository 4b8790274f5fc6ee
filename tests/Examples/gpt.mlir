// examples/gpt.mlir parses, verifies and round-trips through the custom and
// the generic form; `mpc compile --emit=mlir` prints the same model; and the
// precision policy puts exactly its GEMMs in `lower` and its norms, softmax
// and loss in `keep_f32`.

// RUN: mpc-opt %examples/gpt.mlir | mpc-opt | FileCheck %s
// RUN: mpc-opt --mlir-print-op-generic %examples/gpt.mlir | mpc-opt | FileCheck %s
// RUN: mpc compile %examples/gpt.mlir --emit=mlir | FileCheck %s
// RUN: mpc-opt --mlir-print-op-generic %examples/gpt.mlir \
// RUN:   | FileCheck %s --check-prefix=GENERIC
// RUN: mpc-opt --mpc-test-precision-policy --mlir-print-op-on-diagnostic=false \
// RUN:     %examples/gpt.mlir -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LOWER \
// RUN:       --implicit-check-not="precision: lower"
// RUN: mpc-opt --mpc-test-precision-policy --mlir-print-op-on-diagnostic=false \
// RUN:     %examples/gpt.mlir -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=KEEP \
// RUN:       --implicit-check-not="precision: keep_f32"

// The inputs and every parameter, in order, with its initialiser: these names
// are the checkpoint's tensor names.
// CHECK-LABEL: mpc.model @gpt
//  CHECK-NEXT:   inputs(%idx: tensor<4x16xi32>, %targets: tensor<64xi32>)
//  CHECK-NEXT:   params(%wte.weight: tensor<64x32xf32> = normal(0.02),
//  CHECK-NEXT:          %wpe.weight: tensor<16x32xf32> = normal(0.02),
//  CHECK-NEXT:          %h0.ln_1.weight: tensor<32xf32> = ones,
//  CHECK-NEXT:          %h0.ln_1.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %h0.attn.qkv.weight: tensor<96x32xf32> = normal(0.02),
//  CHECK-NEXT:          %h0.attn.qkv.bias: tensor<96xf32> = zeros,
//  CHECK-NEXT:          %h0.attn.proj.weight: tensor<32x32xf32> = normal(0.02),
//  CHECK-NEXT:          %h0.attn.proj.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %h0.ln_2.weight: tensor<32xf32> = ones,
//  CHECK-NEXT:          %h0.ln_2.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %h0.mlp.fc.weight: tensor<128x32xf32> = normal(0.02),
//  CHECK-NEXT:          %h0.mlp.fc.bias: tensor<128xf32> = zeros,
//  CHECK-NEXT:          %h0.mlp.proj.weight: tensor<32x128xf32> = normal(0.02),
//  CHECK-NEXT:          %h0.mlp.proj.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %h1.ln_1.weight: tensor<32xf32> = ones,
//  CHECK-NEXT:          %h1.ln_1.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %h1.attn.qkv.weight: tensor<96x32xf32> = normal(0.02),
//  CHECK-NEXT:          %h1.attn.qkv.bias: tensor<96xf32> = zeros,
//  CHECK-NEXT:          %h1.attn.proj.weight: tensor<32x32xf32> = normal(0.02),
//  CHECK-NEXT:          %h1.attn.proj.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %h1.ln_2.weight: tensor<32xf32> = ones,
//  CHECK-NEXT:          %h1.ln_2.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %h1.mlp.fc.weight: tensor<128x32xf32> = normal(0.02),
//  CHECK-NEXT:          %h1.mlp.fc.bias: tensor<128xf32> = zeros,
//  CHECK-NEXT:          %h1.mlp.proj.weight: tensor<32x128xf32> = normal(0.02),
//  CHECK-NEXT:          %h1.mlp.proj.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %ln_f.weight: tensor<32xf32> = ones,
//  CHECK-NEXT:          %ln_f.bias: tensor<32xf32> = zeros,
//  CHECK-NEXT:          %lm_head.weight: tensor<64x32xf32> = normal(0.02)) {

// Embeddings: the [16, 32] position table broadcasts over the batch.
//  CHECK-NEXT:   %[[TOK:.*]] = mpc.embedding %wte.weight, %idx : tensor<64x32xf32>, tensor<4x16xi32>
//  CHECK-NEXT:   %[[X0:.*]] = mpc.add %[[TOK]], %wpe.weight : tensor<4x16x32xf32>, tensor<16x32xf32>
//  CHECK-NEXT:   %[[CAUSAL:.*]] = mpc.causal_mask : tensor<16x16xi1>
//  CHECK-NEXT:   %[[NEG_INF:.*]] = mpc.constant dense<0xFF800000> : tensor<f32>

// Block 0, attention, op by op.
//  CHECK-NEXT:   %[[LN1:.*]] = mpc.layer_norm %[[X0]], %h0.ln_1.weight, %h0.ln_1.bias : tensor<4x16x32xf32>, tensor<32xf32>
//  CHECK-NEXT:   %[[QKV:.*]] = mpc.linear %[[LN1]], %h0.attn.qkv.weight, %h0.attn.qkv.bias : tensor<4x16x32xf32>, tensor<96x32xf32>, tensor<96xf32>
//  CHECK-NEXT:   %[[Q:.*]] = mpc.slice %[[QKV]] starts [0, 0, 0] limits [4, 16, 32] : tensor<4x16x96xf32>
//  CHECK-NEXT:   %[[K:.*]] = mpc.slice %[[QKV]] starts [0, 0, 32] limits [4, 16, 64] : tensor<4x16x96xf32>
//  CHECK-NEXT:   %[[V:.*]] = mpc.slice %[[QKV]] starts [0, 0, 64] limits [4, 16, 96] : tensor<4x16x96xf32>
//  CHECK-NEXT:   %[[Q4:.*]] = mpc.reshape %[[Q]] : tensor<4x16x32xf32> to tensor<4x16x2x16xf32>
//  CHECK-NEXT:   %[[K4:.*]] = mpc.reshape %[[K]] : tensor<4x16x32xf32> to tensor<4x16x2x16xf32>
//  CHECK-NEXT:   %[[V4:.*]] = mpc.reshape %[[V]] : tensor<4x16x32xf32> to tensor<4x16x2x16xf32>
//  CHECK-NEXT:   %[[QH:.*]] = mpc.transpose %[[Q4]] perm [0, 2, 1, 3] : tensor<4x16x2x16xf32>
//  CHECK-NEXT:   %[[KH:.*]] = mpc.transpose %[[K4]] perm [0, 2, 1, 3] : tensor<4x16x2x16xf32>
//  CHECK-NEXT:   %[[VH:.*]] = mpc.transpose %[[V4]] perm [0, 2, 1, 3] : tensor<4x16x2x16xf32>
//  CHECK-NEXT:   %[[QK:.*]] = mpc.batch_matmul %[[QH]], %[[KH]] transpose_rhs : tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>
//  CHECK-NEXT:   %[[SCORES:.*]] = mpc.scale %[[QK]] by 2.500000e-01 : tensor<4x2x16x16xf32>
//  CHECK-NEXT:   %[[MASKED:.*]] = mpc.where %[[CAUSAL]], %[[SCORES]], %[[NEG_INF]] : tensor<16x16xi1>, tensor<4x2x16x16xf32>, tensor<f32>
//  CHECK-NEXT:   %[[ATT:.*]] = mpc.softmax %[[MASKED]] dim 3 : tensor<4x2x16x16xf32>
//  CHECK-NEXT:   %[[YH:.*]] = mpc.batch_matmul %[[ATT]], %[[VH]] : tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>
//  CHECK-NEXT:   %[[YT:.*]] = mpc.transpose %[[YH]] perm [0, 2, 1, 3] : tensor<4x2x16x16xf32>
//  CHECK-NEXT:   %[[Y:.*]] = mpc.reshape %[[YT]] : tensor<4x16x2x16xf32> to tensor<4x16x32xf32>
//  CHECK-NEXT:   %[[ATTN:.*]] = mpc.linear %[[Y]], %h0.attn.proj.weight, %h0.attn.proj.bias : tensor<4x16x32xf32>, tensor<32x32xf32>, tensor<32xf32>
//  CHECK-NEXT:   %[[X1:.*]] = mpc.add %[[X0]], %[[ATTN]] : tensor<4x16x32xf32>, tensor<4x16x32xf32>

// Block 0, MLP.
//  CHECK-NEXT:   %[[LN2:.*]] = mpc.layer_norm %[[X1]], %h0.ln_2.weight, %h0.ln_2.bias : tensor<4x16x32xf32>, tensor<32xf32>
//  CHECK-NEXT:   %[[FC:.*]] = mpc.linear %[[LN2]], %h0.mlp.fc.weight, %h0.mlp.fc.bias : tensor<4x16x32xf32>, tensor<128x32xf32>, tensor<128xf32>
//  CHECK-NEXT:   %[[GELU:.*]] = mpc.gelu %[[FC]] approximate tanh : tensor<4x16x128xf32>
//  CHECK-NEXT:   %[[MLP:.*]] = mpc.linear %[[GELU]], %h0.mlp.proj.weight, %h0.mlp.proj.bias : tensor<4x16x128xf32>, tensor<32x128xf32>, tensor<32xf32>
//  CHECK-NEXT:   %[[X2:.*]] = mpc.add %[[X1]], %[[MLP]] : tensor<4x16x32xf32>, tensor<4x16x32xf32>

// Block 1 reads block 0's output and its own parameters, and shares the mask.
//  CHECK-NEXT:   %[[B1_LN1:.*]] = mpc.layer_norm %[[X2]], %h1.ln_1.weight, %h1.ln_1.bias : tensor<4x16x32xf32>, tensor<32xf32>
//  CHECK-NEXT:   mpc.linear %[[B1_LN1]], %h1.attn.qkv.weight, %h1.attn.qkv.bias : tensor<4x16x32xf32>, tensor<96x32xf32>, tensor<96xf32>
//       CHECK:   mpc.batch_matmul %{{.*}}, %{{.*}} transpose_rhs : tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>
//  CHECK-NEXT:   %[[B1_SCORES:.*]] = mpc.scale %{{.*}} by 2.500000e-01 : tensor<4x2x16x16xf32>
//  CHECK-NEXT:   mpc.where %[[CAUSAL]], %[[B1_SCORES]], %[[NEG_INF]] : tensor<16x16xi1>, tensor<4x2x16x16xf32>, tensor<f32>
//       CHECK:   %[[B1_ATTN:.*]] = mpc.linear %{{.*}}, %h1.attn.proj.weight, %h1.attn.proj.bias : tensor<4x16x32xf32>, tensor<32x32xf32>, tensor<32xf32>
//  CHECK-NEXT:   %[[X3:.*]] = mpc.add %[[X2]], %[[B1_ATTN]] : tensor<4x16x32xf32>, tensor<4x16x32xf32>
//       CHECK:   %[[B1_MLP:.*]] = mpc.linear %{{.*}}, %h1.mlp.proj.weight, %h1.mlp.proj.bias : tensor<4x16x128xf32>, tensor<32x128xf32>, tensor<32xf32>
//  CHECK-NEXT:   %[[X4:.*]] = mpc.add %[[X3]], %[[B1_MLP]] : tensor<4x16x32xf32>, tensor<4x16x32xf32>

// Head: untied lm_head without bias, [B*T, V] logits against [B*T] targets.
//  CHECK-NEXT:   %[[XF:.*]] = mpc.layer_norm %[[X4]], %ln_f.weight, %ln_f.bias : tensor<4x16x32xf32>, tensor<32xf32>
//  CHECK-NEXT:   %[[LOGITS:.*]] = mpc.linear %[[XF]], %lm_head.weight : tensor<4x16x32xf32>, tensor<64x32xf32>
//  CHECK-NEXT:   %[[FLAT:.*]] = mpc.reshape %[[LOGITS]] : tensor<4x16x64xf32> to tensor<64x64xf32>
//  CHECK-NEXT:   %[[LOSS:.*]] = mpc.cross_entropy %[[FLAT]], %targets : tensor<64x64xf32>, tensor<64xi32>
//  CHECK-NEXT:   mpc.output loss(%[[LOSS]] : tensor<f32>) logits(%[[LOGITS]] : tensor<4x16x64xf32>)
//  CHECK-NEXT: }

// Inferred result types, which the custom form leaves implicit.
// GENERIC-LABEL: "mpc.model"()
// GENERIC-SAME:    input_names = ["idx", "targets"]
// GENERIC-SAME:    state_names = []
// GENERIC-SAME:    sym_name = "gpt"
//      GENERIC:  "mpc.embedding"({{.*}}) : (tensor<64x32xf32>, tensor<4x16xi32>) -> tensor<4x16x32xf32>
//      GENERIC:  "mpc.linear"({{.*}}) : (tensor<4x16x32xf32>, tensor<96x32xf32>, tensor<96xf32>) -> tensor<4x16x96xf32>
//      GENERIC:  "mpc.batch_matmul"({{.*}}) <{transpose_rhs}> : (tensor<4x2x16x16xf32>, tensor<4x2x16x16xf32>) -> tensor<4x2x16x16xf32>
//      GENERIC:  "mpc.where"({{.*}}) : (tensor<16x16xi1>, tensor<4x2x16x16xf32>, tensor<f32>) -> tensor<4x2x16x16xf32>
//      GENERIC:  "mpc.linear"({{.*}}) : (tensor<4x16x32xf32>, tensor<128x32xf32>, tensor<128xf32>) -> tensor<4x16x128xf32>
//      GENERIC:  "mpc.linear"({{.*}}) : (tensor<4x16x32xf32>, tensor<64x32xf32>) -> tensor<4x16x64xf32>
//      GENERIC:  "mpc.cross_entropy"({{.*}}) : (tensor<64x64xf32>, tensor<64xi32>) -> tensor<f32>

// The 13 GEMMs, and nothing else, are `lower` with f32 accumulation: per
// block the qkv projection, q·kᵀ, att·v, the output projection and the two
// MLP linears; then the lm head.
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b0_qkv = mpc.linear
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b0_qk = mpc.batch_matmul
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b0_yh = mpc.batch_matmul
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b0_attn = mpc.linear
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b0_fc = mpc.linear
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b0_mlp = mpc.linear
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b1_qkv = mpc.linear
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b1_qk = mpc.batch_matmul
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b1_yh = mpc.batch_matmul
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b1_attn = mpc.linear
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b1_fc = mpc.linear
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %b1_mlp = mpc.linear
//      LOWER: remark: precision: lower, accumulate: 'f32'
// LOWER-NEXT:   %logits = mpc.linear

// The five layer norms, the two softmaxes and the loss stay in f32.
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %b0_ln1 = mpc.layer_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %b0_att = mpc.softmax
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %b0_ln2 = mpc.layer_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %b1_ln1 = mpc.layer_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %b1_att = mpc.softmax
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %b1_ln2 = mpc.layer_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %xf = mpc.layer_norm
//      KEEP: remark: precision: keep_f32, accumulate: 'f32'
// KEEP-NEXT:   %loss = mpc.cross_entropy
