// RUN: mpc-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mpc-assign-precision="level=O2 half=bf16 master-weights=none" \
// RUN:   | FileCheck %s
// RUN: mpc-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mpc-assign-precision="level=O2 half=bf16 master-weights=kahan" \
// RUN:   | FileCheck %s
// RUN: not mpc-opt %s --split-input-file \
// RUN:   --mpc-assign-precision="level=O2 half=f16 master-weights=none" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=F16
// RUN: not mpc-opt %s --split-input-file \
// RUN:   --mpc-assign-precision="level=O1 half=bf16 master-weights=kahan" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=O1
// RUN: mpc-opt %s --split-input-file \
// RUN:   --mpc-assign-precision="level=O2 half=bf16 master-weights=nearest" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NEAREST

// Without master weights every parameter is stored in bf16, as at O3, the
// layer norm's included: its kernel reads it as stored (no cast; it
// computes in f32). The activations are O2's. No warning: the update
// rounds stochastically (or compensates).
// CHECK-LABEL: mpc.model @lean
//  CHECK-NEXT:     inputs(%x: tensor<4x8xf32>)
//  CHECK-NEXT:     params(%w: tensor<8x8xbf16> = normal(1),
//  CHECK-NEXT:            %g: tensor<8xbf16> = ones,
//  CHECK-NEXT:            %b: tensor<8xbf16> = zeros) {
//   CHECK-NOT:   mpc.cast %g
//       CHECK:   %[[X:.*]] = mpc.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
//       CHECK:   %[[A:.*]] = mpc.matmul %[[X]], %w : tensor<4x8xbf16>, tensor<8x8xbf16>
//       CHECK:   mpc.layer_norm %[[A]], %g, %b : tensor<4x8xbf16>, tensor<8xbf16>

// f16 without master weights is an error; so is a level other than O2.
// F16: error: master-weights=none needs bf16, not 'f16': f16's 10-bit mantissa and narrow range lose updates without f32 master weights
// O1: error: master-weights=kahan needs O2 with bf16: it stores the parameters in bf16 in place of O2's f32 master weights
// NEAREST: warning: master-weights=nearest rounds every update of the bf16 parameters to nearest: small updates round away (none rounds stochastically)
mpc.model @lean inputs(%x: tensor<4x8xf32>)
    params(%w: tensor<8x8xf32> = normal(1.0), %g: tensor<8xf32> = ones, %b: tensor<8xf32> = zeros) {
  %a = mpc.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %n = mpc.layer_norm %a, %g, %b : tensor<4x8xf32>, tensor<8xf32>
  %s = mpc.reduce_sum %n dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// Batch norm's affine parameters too are read as stored, in bf16; its
// running statistics stay f32 state.
// CHECK-LABEL: mpc.model @lean_batch_norm
//   CHECK-NOT:   mpc.cast %g
//       CHECK:   mpc.batch_norm %{{.*}}, %g, %b, %mean, %var : tensor<4x3x2x2xbf16>, tensor<3xbf16> running tensor<3xf32>
mpc.model @lean_batch_norm inputs(%x: tensor<4x3x2x2xf32>)
    params(%g: tensor<3xf32> = ones, %b: tensor<3xf32> = zeros)
    state(%mean: tensor<3xf32> = zeros, %var: tensor<3xf32> = ones) {
  %y = mpc.batch_norm %x, %g, %b, %mean, %var : tensor<4x3x2x2xf32>, tensor<3xf32>
  %s = mpc.reduce_sum %y dims [0, 1, 2, 3] : tensor<4x3x2x2xf32>
  mpc.output loss(%s : tensor<f32>)
}
