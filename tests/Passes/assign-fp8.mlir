// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=bf16" \
// RUN:   --mpc-autodiff --canonicalize --cse --mpc-assign-fp8=gemms=all \
// RUN:   | FileCheck %s
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=bf16" \
// RUN:   --mpc-autodiff --canonicalize --cse \
// RUN:   --mpc-assign-fp8="gemms=all unscaled" | FileCheck %s --check-prefix=UNSCALED
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=bf16" \
// RUN:   --mpc-autodiff --canonicalize --cse --mpc-assign-fp8 \
// RUN:   | FileCheck %s --check-prefix=NONE
// Delayed scaling: the model gains the table the quantizations share.
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=bf16" \
// RUN:   --mpc-autodiff --canonicalize --cse \
// RUN:   --mpc-assign-fp8="gemms=all history=16 margin=2" \
// RUN:   | FileCheck %s --check-prefix=DELAYED
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=bf16" \
// RUN:   --mpc-autodiff --canonicalize --cse \
// RUN:   --mpc-assign-fp8="gemms=auto history=16" \
// RUN:   | FileCheck %s --check-prefix=AUTO-DELAYED
// RUN: not mpc-opt %s --split-input-file --mpc-assign-fp8="gemms=all history=4 unscaled" \
// RUN:   2>&1 | FileCheck %s --check-prefix=BAD-OPTIONS
// BAD-OPTIONS: error: mpc-assign-fp8: expects history >= 0, margin in [0, 32], and no history with unscaled
// RUN: not mpc-opt %S/Inputs/fp8-taken-name.mlir --mpc-assign-fp8="gemms=all history=4" \
// RUN:   2>&1 | FileCheck %s --check-prefix=TAKEN-NAME
// TAKEN-NAME: error: 'mpc.model' op has a tensor named 'fp8.scaling', the name of delayed FP8 scaling's state
// gemms=auto on an H100's figures (the defaults): these GEMMs are far too
// small to pay for quantizing their operands; each says so. With memory
// a thousand times faster (bandwidth-gbs), quantizing is nearly free and
// FP8's faster products win; on a GPU without FP8 tensor cores, nothing
// does.
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=bf16" \
// RUN:   --mpc-autodiff --canonicalize --cse --mpc-assign-fp8=gemms=auto \
// RUN:   | FileCheck %s --check-prefix=AUTO
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=bf16" \
// RUN:   --mpc-autodiff --canonicalize --cse \
// RUN:   --mpc-assign-fp8="gemms=auto bandwidth-gbs=3350000" \
// RUN:   | FileCheck %s --check-prefix=AUTO-FAST
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=bf16" \
// RUN:   --mpc-autodiff --canonicalize --cse \
// RUN:   --mpc-assign-fp8="gemms=auto fp8-tflops=0" \
// RUN:   | FileCheck %s --check-prefix=AUTO-NONE

// A hidden layer and a classifier. The hidden layer's GEMMs run in FP8: its
// input and weight quantized to e4m3 once each, the forward product in
// bf16 with the bias added before rounding, and the weight gradient read
// from the forward pass's e4m3 input and the e5m2 gradient, written in f32
// for the master weight (the widening cast folded away). Every scaled
// GEMM reads its operands along K; the weight gradient's contract over
// the rows, so it reads transposed copies of both, which their
// quantizations write in the same pass (`transposed`). The input needs
// no gradient, so there is no third GEMM. The classifier's linear and its
// two gradient GEMMs stay bf16, as the reshapes nothing reads now go.
// CHECK-LABEL: mpc.model @layer
//   CHECK-DAG:   %[[W1:[^ ,]+]] = mpc.cast %w1 : tensor<32x32xf32> to tensor<32x32xbf16>
//   CHECK-DAG:   %[[X:[^ ,]+]] = mpc.cast %x : tensor<2x8x32xf32> to tensor<2x8x32xbf16>
//   CHECK-DAG:   %[[QW:[^ ,]+]], %[[SW:[^ ,]+]] = mpc.quantize %[[W1]] : tensor<32x32xbf16> to tensor<32x32xf8E4M3FN>
//   CHECK-DAG:   %[[QX:[^ ,]+]], %[[SX:[^ ,]+]], %[[QXT:[^ ,]+]] = mpc.quantize %[[X]] : tensor<2x8x32xbf16> to tensor<2x8x32xf8E4M3FN> transposed tensor<32x16xf8E4M3FN>
//       CHECK:   %[[QX2:[^ ,]+]] = mpc.reshape %[[QX]] : tensor<2x8x32xf8E4M3FN> to tensor<16x32xf8E4M3FN>
//  CHECK-NEXT:   %[[H:[^ ,]+]] = mpc.scaled_matmul %[[QX2]][%[[SX]]], %[[QW]][%[[SW]]] bias %{{.*}} : tensor<16x32xf8E4M3FN>, tensor<32x32xf8E4M3FN>, tensor<32xbf16> -> tensor<16x32xbf16>
//       CHECK:   %[[LOGITS:[^ ,]+]] = mpc.linear %{{.*}}, %{{.*}} : tensor<16x32xbf16>, tensor<16x32xbf16>
//       CHECK:   %[[DL:[^ ,]+]] = mpc.cross_entropy_grad
//       CHECK:   mpc.matmul %[[DL]], %{{.*}} : tensor<16x16xbf16>, tensor<16x32xbf16>
//       CHECK:   mpc.matmul %[[DL]], %{{.*}} transpose_lhs : tensor<16x16xbf16>, tensor<16x32xbf16>
//       CHECK:   %[[DH:[^ ,]+]] = mpc.gelu_grad
//       CHECK:   %{{.*}}, %[[SDH:[^ ,]+]], %[[QDHT:[^ ,]+]] = mpc.quantize %[[DH]] : tensor<2x8x32xbf16> to tensor<2x8x32xf8E5M2> transposed tensor<32x16xf8E5M2>
//       CHECK:   %[[DW:[^ ,]+]] = mpc.scaled_matmul %[[QDHT]][%[[SDH]]], %[[QXT]][%[[SX]]] : tensor<32x16xf8E5M2>, tensor<32x16xf8E4M3FN> -> tensor<32x32xf32>
//       CHECK:   mpc.output loss(%{{.*}}) gradients(%[[DW]] : tensor<32x32xf32>
//   CHECK-NOT:   mpc.reshape %[[X]]
//   CHECK-NOT:   mpc.transpose
// UNSCALED-LABEL: mpc.model @layer
//       UNSCALED:   mpc.quantize %{{.*}} unscaled : tensor<32x32xbf16> to tensor<32x32xf8E4M3FN>
// NONE-LABEL: mpc.model @layer
//   NONE-NOT:   mpc.quantize
//   NONE-NOT:   mpc.scaled_matmul
// Three quantizations, three columns of the table (4 + 16 rows), the e4m3
// ones (the weight, the input) before the e5m2 gradient's; each with the
// margin.
// DELAYED-LABEL: mpc.model @layer
//       DELAYED:   state(%fp8.scaling: tensor<20x3xf32> = zeros) {
//       DELAYED:   mpc.quantize %{{.*}} delayed(%fp8.scaling[0] margin 2 : tensor<20x3xf32>) : tensor<32x32xbf16> to tensor<32x32xf8E4M3FN>
//       DELAYED:   mpc.quantize %{{.*}} delayed(%fp8.scaling[1] margin 2 : tensor<20x3xf32>) : tensor<2x8x32xbf16> to tensor<2x8x32xf8E4M3FN>
//       DELAYED:   mpc.quantize %{{.*}} delayed(%fp8.scaling[2] margin 2 : tensor<20x3xf32>) : tensor<2x8x32xbf16> to tensor<2x8x32xf8E5M2>
// The layer's GEMMs are decided together: the forward linear and its
// weight gradient carry one reason.
// AUTO-LABEL: mpc.model @layer
//   AUTO-NOT:   mpc.quantize
//       AUTO:   mpc.linear {{.*}} {mpc.fp8 = "FP8 does not pay: its faster products save [[SAVED:[0-9.]+ ns]], quantizing and unfused epilogues add [[ADDED:[0-9.]+ [nu]s]]"}
//       AUTO:   mpc.matmul {{.*}} transpose_lhs {mpc.fp8 = "FP8 does not pay: its faster products save [[SAVED]], quantizing and unfused epilogues add [[ADDED]]"}
// AUTO-FAST-LABEL: mpc.model @layer
//       AUTO-FAST:   mpc.scaled_matmul
//       AUTO-FAST:   mpc.scaled_matmul
// AUTO-NONE-LABEL: mpc.model @layer
//       AUTO-NONE:   mpc.linear {{.*}} {mpc.fp8 = "the GPU has no FP8 tensor cores"}
mpc.model @layer inputs(%x: tensor<2x8x32xf32>, %y: tensor<16xi32>) params(%w1: tensor<32x32xf32> = normal(0.02), %b1: tensor<32xf32> = zeros, %w2: tensor<16x32xf32> = normal(0.02)) {
  %h = mpc.linear %x, %w1, %b1 : tensor<2x8x32xf32>, tensor<32x32xf32>, tensor<32xf32>
  %g = mpc.gelu %h approximate tanh : tensor<2x8x32xf32>
  %g2 = mpc.reshape %g : tensor<2x8x32xf32> to tensor<16x32xf32>
  %logits = mpc.linear %g2, %w2 : tensor<16x32xf32>, tensor<16x32xf32>
  %l = mpc.cross_entropy %logits, %y : tensor<16x16xf32>, tensor<16xi32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Two layers back to back: the second reads the first's FP8 product, an
// activation (e4m3), and its input gradient is the e5m2 operand of the
// first's weight gradient. The input gradient contracts over the weight's
// rows: it reads the transposed copy, which the weight's quantization
// writes. Each tensor is quantized once: the two weights, the input, the
// hidden activation, and the two gradients.
// CHECK-LABEL: mpc.model @chain
//       CHECK:   %{{.*}}, %{{.*}}, %[[W2T:[^ ,]+]] = mpc.quantize %{{.*}} : tensor<32x32xbf16> to tensor<32x32xf8E4M3FN> transposed tensor<32x32xf8E4M3FN>
// CHECK-COUNT-2:   mpc.quantize {{.*}} to tensor<{{.*}}f8E4M3FN>
//       CHECK:   %[[H:[^ ,]+]] = mpc.scaled_matmul
//       CHECK:   %[[QH:[^ ,]+]], %{{.*}} = mpc.quantize %[[H]] : tensor<16x32xbf16> to tensor<16x32xf8E4M3FN>
//       CHECK:   mpc.scaled_matmul %[[QH]]
//       CHECK:   mpc.quantize %{{.*}} : tensor<16x32xbf16> to tensor<16x32xf8E5M2>
//       CHECK:   %[[DH:[^ ,]+]] = mpc.scaled_matmul %{{.*}}, %[[W2T]][%{{.*}}] : tensor<16x32xf8E5M2>, tensor<32x32xf8E4M3FN> -> tensor<16x32xbf16>
//       CHECK:   mpc.quantize %[[DH]] : tensor<16x32xbf16> to tensor<16x32xf8E5M2>
//   CHECK-NOT:   mpc.quantize
//       CHECK:   mpc.output
// The e5m2 columns follow the e4m3 ones, whatever the program order.
// DELAYED-LABEL: mpc.model @chain
//       DELAYED:   state(%fp8.scaling: tensor<20x6xf32> = zeros) {
// DELAYED-COUNT-4:   delayed(%fp8.scaling[{{[0-3]}}] {{.*}} to tensor<{{.*}}f8E4M3FN>
// DELAYED-COUNT-2:   delayed(%fp8.scaling[{{[45]}}] {{.*}} to tensor<{{.*}}f8E5M2>
mpc.model @chain inputs(%x: tensor<16x32xf32>) params(%w1: tensor<32x32xf32> = normal(0.02), %w2: tensor<32x32xf32> = normal(0.02)) {
  %h = mpc.matmul %x, %w1 transpose_rhs : tensor<16x32xf32>, tensor<32x32xf32>
  %y = mpc.matmul %h, %w2 transpose_rhs : tensor<16x32xf32>, tensor<32x32xf32>
  %l = mpc.reduce_sum %y dims [0, 1] : tensor<16x32xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Dims that are not multiples of 16 (cuBLASLt's FP8 alignment) stay bf16.
// CHECK-LABEL: mpc.model @unaligned
//   CHECK-NOT:   mpc.quantize
//       CHECK:   mpc.linear
//   CHECK-NOT:   mpc.scaled_matmul
mpc.model @unaligned inputs(%x: tensor<16x24xf32>) params(%w: tensor<32x24xf32> = normal(0.02)) {
  %h = mpc.linear %x, %w : tensor<16x24xf32>, tensor<32x24xf32>
  %l = mpc.reduce_sum %h dims [0, 1] : tensor<16x32xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A GELU runs in the passes that quantize its output (with current
// scaling the amax pass and the cast), which happens only where the next
// layer runs in FP8 too: gemms=auto decides an MLP's two layers (and their
// gradients) as one, with one reason, whatever the scaling.
// CHECK-LABEL: mpc.model @mlp_block
// UNSCALED-LABEL: mpc.model @mlp_block
// NONE-LABEL: mpc.model @mlp_block
// AUTO-FAST-LABEL: mpc.model @mlp_block
// AUTO-NONE-LABEL: mpc.model @mlp_block
// DELAYED-LABEL: mpc.model @mlp_block
// AUTO-DELAYED-LABEL: mpc.model @mlp_block
//       AUTO-DELAYED:   mpc.linear {{.*}} {mpc.fp8 = "[[REASON:[^"]+]]"}
//       AUTO-DELAYED:   mpc.linear {{.*}} {mpc.fp8 = "[[REASON]]"}
// AUTO-LABEL: mpc.model @mlp_block
//       AUTO:   mpc.linear {{.*}} {mpc.fp8 = "[[REASON:[^"]+]]"}
//       AUTO:   mpc.linear {{.*}} {mpc.fp8 = "[[REASON]]"}
mpc.model @mlp_block inputs(%x: tensor<64x32xf32>) params(%w1: tensor<128x32xf32> = normal(0.02), %b1: tensor<128xf32> = zeros, %w2: tensor<32x128xf32> = normal(0.02), %b2: tensor<32xf32> = zeros) {
  %h = mpc.linear %x, %w1, %b1 : tensor<64x32xf32>, tensor<128x32xf32>, tensor<128xf32>
  %g = mpc.gelu %h approximate tanh : tensor<64x128xf32>
  %y = mpc.linear %g, %w2, %b2 : tensor<64x128xf32>, tensor<32x128xf32>, tensor<32xf32>
  %l = mpc.reduce_sum %y dims [0, 1] : tensor<64x32xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// With current scaling a layer norm's kernel finds the amax of what it
// stores (mpc-form-kernels), and so do the attention kernels: quantizing
// their results reads them once, not twice. Three GEMMs of one shape,
// reading the norm's result, a ReLU's, and an attention's output: what FP8
// adds differs by 4096 x 1024 bf16 elements read at 3.35 TB/s, 2.50 us.
// Under delayed scaling none has an amax pass.
// AUTO-LABEL: mpc.model @norm_input
//       AUTO:   mpc.matmul {{.*}} transpose_rhs {mpc.fp8 = "FP8 does not pay: its faster products save 4.34 us, quantizing and unfused epilogues add 5.32 us"}
//  AUTO-NEXT:   mpc.relu
//       AUTO:   mpc.matmul {{.*}} transpose_rhs {mpc.fp8 = "FP8 does not pay: its faster products save 4.34 us, quantizing and unfused epilogues add 7.83 us"}
//       AUTO:   mpc.attention
//       AUTO:   mpc.matmul {{.*}} transpose_rhs {mpc.fp8 = "FP8 does not pay: its faster products save 4.34 us, quantizing and unfused epilogues add 5.32 us"}
mpc.model @norm_input inputs(%x: tensor<4096x1024xf32>) params(%g: tensor<1024xf32> = ones, %b: tensor<1024xf32> = zeros, %w1: tensor<1024x1024xf32> = normal(0.02), %w2: tensor<1024x1024xf32> = normal(0.02), %w3: tensor<1024x1024xf32> = normal(0.02)) {
  %n = mpc.layer_norm %x, %g, %b : tensor<4096x1024xf32>, tensor<1024xf32>
  %h = mpc.matmul %n, %w1 transpose_rhs : tensor<4096x1024xf32>, tensor<1024x1024xf32>
  %r = mpc.relu %h : tensor<4096x1024xf32>
  %y = mpc.matmul %r, %w2 transpose_rhs : tensor<4096x1024xf32>, tensor<1024x1024xf32>
  %y4 = mpc.reshape %y : tensor<4096x1024xf32> to tensor<4x1024x16x64xf32>
  %o, %lse = mpc.attention %y4, %y4, %y4 scale 0.125 causal layout bthd : tensor<4x1024x16x64xf32>, tensor<4x1024x16x64xf32>, tensor<4x1024x16x64xf32>
  %o2 = mpc.reshape %o : tensor<4x1024x16x64xf32> to tensor<4096x1024xf32>
  %z = mpc.matmul %o2, %w3 transpose_rhs : tensor<4096x1024xf32>, tensor<1024x1024xf32>
  %l = mpc.reduce_sum %z dims [0, 1] : tensor<4096x1024xf32>
  mpc.output loss(%l : tensor<f32>)
}
