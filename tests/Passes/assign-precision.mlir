// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O0" | FileCheck %s --check-prefix=O0
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O1 half=f16" | FileCheck %s --check-prefix=O1
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O1 half=bf16" | FileCheck %s --check-prefix=O1-BF16
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=bf16" | FileCheck %s --check-prefix=O2
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=f16 keep-norm-fp32=false" | FileCheck %s --check-prefix=O2-NORM

// O0 changes nothing.
// O0-LABEL: mpc.model @block
//   O0-NOT:   mpc.cast

// O1 is autocast: the GEMM runs on half operands, then the residual add
// promotes to the widest operand (f32), and the rest stays f32.
// O1-LABEL: mpc.model @block
//       O1:   %[[W:.*]] = mpc.cast %w : tensor<8x8xf32> to tensor<8x8xf16>
//       O1:   %[[N:.*]] = mpc.layer_norm %x, %g, %b : tensor<2x4x8xf32>, tensor<8xf32>
//       O1:   %[[N16:.*]] = mpc.cast %[[N]] : tensor<2x4x8xf32> to tensor<2x4x8xf16>
//       O1:   %[[H:.*]] = mpc.linear %[[N16]], %[[W]] : tensor<2x4x8xf16>, tensor<8x8xf16>
//       O1:   %[[H32:.*]] = mpc.cast %[[H]] : tensor<2x4x8xf16> to tensor<2x4x8xf32>
//       O1:   mpc.add %[[H32]], %x : tensor<2x4x8xf32>, tensor<2x4x8xf32>
//       O1:   mpc.softmax %{{.*}} dim 2 : tensor<2x4x8xf32>
//       O1:   mpc.cross_entropy %{{.*}}, %y : tensor<8x8xf32>, tensor<8xi32>

// O1-BF16-LABEL: mpc.model @block
//       O1-BF16:   mpc.linear %{{.*}}, %{{.*}} : tensor<2x4x8xbf16>, tensor<8x8xbf16>

// O2 is a half model: the input and the weight are cast once at the top,
// every activation is half, layer norm keeps its parameters in f32, the
// cross-entropy reads half logits and yields an f32 loss, and the extra
// output is cast back to its declared f32.
// O2-LABEL: mpc.model @block
//       O2:   %[[W:.*]] = mpc.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
//       O2:   %[[X:.*]] = mpc.cast %x : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
//       O2:   %[[N:.*]] = mpc.layer_norm %[[X]], %g, %b : tensor<2x4x8xbf16>, tensor<8xf32>
//       O2:   %[[H:.*]] = mpc.linear %[[N]], %[[W]] : tensor<2x4x8xbf16>, tensor<8x8xbf16>
//       O2:   %[[R:.*]] = mpc.add %[[H]], %[[X]] : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
//       O2:   %[[A:.*]] = mpc.relu %[[R]] : tensor<2x4x8xbf16>
//       O2:   %[[P:.*]] = mpc.softmax %[[A]] dim 2 : tensor<2x4x8xbf16>
//       O2:   %[[P32:.*]] = mpc.cast %[[P]] : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
//       O2:   %[[L:.*]] = mpc.reshape %[[P]] : tensor<2x4x8xbf16> to tensor<8x8xbf16>
//       O2:   %[[LOSS:.*]] = mpc.cross_entropy %[[L]], %y : tensor<8x8xbf16>, tensor<8xi32>
//       O2:   mpc.output loss(%[[LOSS]] : tensor<f32>) probs(%[[P32]] : tensor<2x4x8xf32>)

// keep-norm-fp32=false: layer norm's parameters are half too.
// O2-NORM-LABEL: mpc.model @block
//       O2-NORM:   mpc.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x8xf16>, tensor<8xf16>
mpc.model @block
    inputs(%x: tensor<2x4x8xf32>, %y: tensor<8xi32>)
    params(%g: tensor<8xf32> = ones, %b: tensor<8xf32> = zeros,
           %w: tensor<8x8xf32> = normal(0.02)) {
  %n = mpc.layer_norm %x, %g, %b : tensor<2x4x8xf32>, tensor<8xf32>
  %h = mpc.linear %n, %w : tensor<2x4x8xf32>, tensor<8x8xf32>
  %r = mpc.add %h, %x : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  %a = mpc.relu %r : tensor<2x4x8xf32>
  %p = mpc.softmax %a dim 2 : tensor<2x4x8xf32>
  %l = mpc.reshape %p : tensor<2x4x8xf32> to tensor<8x8xf32>
  %loss = mpc.cross_entropy %l, %y : tensor<8x8xf32>, tensor<8xi32>
  mpc.output loss(%loss : tensor<f32>) probs(%p : tensor<2x4x8xf32>)
}

// -----

// Batch norm keeps its affine parameters and running statistics in f32 at
// every level (the statistics are state it updates in place); at O2 its
// input and output are half.
// O2-LABEL: mpc.model @batch_norm_state_f32
//       O2:   %[[X:.*]] = mpc.cast %x : tensor<2x3x4x4xf32> to tensor<2x3x4x4xbf16>
//       O2:   mpc.batch_norm %[[X]], %g, %b, %mean, %var : tensor<2x3x4x4xbf16>, tensor<3xf32>
// O2-NORM-LABEL: mpc.model @batch_norm_state_f32
//       O2-NORM:   mpc.batch_norm %{{.*}}, %g, %b, %mean, %var : tensor<2x3x4x4xf16>, tensor<3xf32>
mpc.model @batch_norm_state_f32
    inputs(%x: tensor<2x3x4x4xf32>)
    params(%g: tensor<3xf32> = ones, %b: tensor<3xf32> = zeros)
    state(%mean: tensor<3xf32> = zeros, %var: tensor<3xf32> = ones) {
  %y = mpc.batch_norm %x, %g, %b, %mean, %var : tensor<2x3x4x4xf32>, tensor<3xf32>
  %s = mpc.reduce_sum %y dims [0, 1, 2, 3] : tensor<2x3x4x4xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// An mpc.precision attribute overrides the policy for one op, the
// compile-time autocast(enabled=False): this GEMM stays in f32 while the
// next one runs in half.
// At O2 the overridden GEMM reads the f32 input and weight as declared, not
// their half copies.
// O2-LABEL: mpc.model @override_keeps_f32
//       O2:   %[[A:.*]] = mpc.matmul %x, %w {mpc.precision = "f32"} : tensor<4x8xf32>, tensor<8x8xf32>
// O1-LABEL: mpc.model @override_keeps_f32
//       O1:   %[[A:.*]] = mpc.matmul %x, %w {mpc.precision = "f32"} : tensor<4x8xf32>, tensor<8x8xf32>
//       O1:   %[[A16:.*]] = mpc.cast %[[A]] : tensor<4x8xf32> to tensor<4x8xf16>
//       O1:   mpc.matmul %[[A16]], %{{.*}} : tensor<4x8xf16>, tensor<8x8xf16>
mpc.model @override_keeps_f32
    inputs(%x: tensor<4x8xf32>) params(%w: tensor<8x8xf32> = normal(1.0)) {
  %a = mpc.matmul %x, %w {mpc.precision = "f32"} : tensor<4x8xf32>, tensor<8x8xf32>
  %b = mpc.matmul %a, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %s = mpc.reduce_sum %b dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// A constant does not widen an op, as a Python scalar does not in PyTorch:
// the masked scores stay half at O2.
// O2-LABEL: mpc.model @negative_constant_does_not_promote
//       O2:   mpc.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x4xi1>, tensor<4x4xbf16>, tensor<bf16>
mpc.model @negative_constant_does_not_promote
    inputs(%x: tensor<4x4xf32>) params(%w: tensor<4x4xf32> = normal(1.0)) {
  %s = mpc.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32>
  %mask = mpc.causal_mask : tensor<4x4xi1>
  %neg = mpc.constant dense<-1.0e9> : tensor<f32>
  %m = mpc.where %mask, %s, %neg : tensor<4x4xi1>, tensor<4x4xf32>, tensor<f32>
  %t = mpc.reduce_sum %m dims [0, 1] : tensor<4x4xf32>
  mpc.output loss(%t : tensor<f32>)
}
