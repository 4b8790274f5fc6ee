// RUN: mpc-opt %s --split-input-file --mpc-fold-casts | FileCheck %s
// Canonicalize applies the same folds (CastOp's patterns), and leaves the
// same casts alone.
// RUN: mpc-opt %s --split-input-file --canonicalize | FileCheck %s --check-prefix=CANON

// f16 -> f32 is exact, so the way back is the value itself.
// CHECK-LABEL: func.func @round_trip_f16
//  CHECK-SAME:   (%[[X:.*]]: tensor<4xf16>)
//   CHECK-NOT:   mpc.cast
//       CHECK:   return %[[X]]
// CANON-LABEL: func.func @round_trip_f16
//   CANON-NOT:   mpc.cast
//       CANON:   return
func.func @round_trip_f16(%x: tensor<4xf16>) -> tensor<4xf16> {
  %0 = mpc.cast %x : tensor<4xf16> to tensor<4xf32>
  %1 = mpc.cast %0 : tensor<4xf32> to tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// CHECK-LABEL: func.func @round_trip_bf16
//  CHECK-SAME:   (%[[X:.*]]: tensor<4xbf16>)
//   CHECK-NOT:   mpc.cast
//       CHECK:   return %[[X]]
func.func @round_trip_bf16(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = mpc.cast %x : tensor<4xbf16> to tensor<4xf32>
  %1 = mpc.cast %0 : tensor<4xf32> to tensor<4xbf16>
  return %1 : tensor<4xbf16>
}

// -----

// The widened value is still used in f32: only the way back folds.
// CHECK-LABEL: func.func @round_trip_f16_wide_value_kept
//  CHECK-SAME:   (%[[X:.*]]: tensor<4xf16>)
//       CHECK:   %[[W:.*]] = mpc.cast %[[X]] : tensor<4xf16> to tensor<4xf32>
//   CHECK-NOT:   mpc.cast
//       CHECK:   return %[[W]], %[[X]]
func.func @round_trip_f16_wide_value_kept(%x: tensor<4xf16>) -> (tensor<4xf32>, tensor<4xf16>) {
  %0 = mpc.cast %x : tensor<4xf16> to tensor<4xf32>
  %1 = mpc.cast %0 : tensor<4xf32> to tensor<4xf16>
  return %0, %1 : tensor<4xf32>, tensor<4xf16>
}

// -----

// CHECK-LABEL: func.func @same_type
//  CHECK-SAME:   (%[[X:.*]]: tensor<4xf32>)
//   CHECK-NOT:   mpc.cast
//       CHECK:   return %[[X]]
func.func @same_type(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mpc.cast %x : tensor<4xf32> to tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// f16 -> f32 -> bf16 rounds once, from the exact f32: one cast f16 -> bf16.
// CHECK-LABEL: func.func @widen_then_other_half
//  CHECK-SAME:   (%[[X:.*]]: tensor<4xf16>)
//       CHECK:   %[[B:.*]] = mpc.cast %[[X]] : tensor<4xf16> to tensor<4xbf16>
//   CHECK-NOT:   mpc.cast
//       CHECK:   return %[[B]]
func.func @widen_then_other_half(%x: tensor<4xf16>) -> tensor<4xbf16> {
  %0 = mpc.cast %x : tensor<4xf16> to tensor<4xf32>
  %1 = mpc.cast %0 : tensor<4xf32> to tensor<4xbf16>
  return %1 : tensor<4xbf16>
}

// -----

// A splat constant is rounded to nearest even at compile time, as the cast
// kernel would round it: 0.1 is 0x2E66 in f16 and 0x3DCD in bf16, 1e-6 is
// the f16 subnormal 17 * 2^-24, 65519 rounds down to 65504, 65520 (the
// halfway point to 2^16) rounds to inf, 1e-8 to 0.
// CHECK-LABEL: func.func @splat_constant_rounds
//   CHECK-NOT:   mpc.cast
//   CHECK-DAG:   mpc.constant dense<9.997550e-02> : tensor<f16>
//   CHECK-DAG:   mpc.constant dense<1.000980e-01> : tensor<bf16>
//   CHECK-DAG:   mpc.constant dense<1.013280e-06> : tensor<f16>
//   CHECK-DAG:   mpc.constant dense<6.550400e+04> : tensor<f16>
//   CHECK-DAG:   mpc.constant dense<0x7C00> : tensor<f16>
//   CHECK-DAG:   mpc.constant dense<0.000000e+00> : tensor<4xf16>
//   CHECK-DAG:   mpc.constant dense<-0.000000e+00> : tensor<f16>
//   CHECK-NOT:   mpc.cast
//   CHECK-NOT:   tensor<f32>
// CANON-LABEL: func.func @splat_constant_rounds
//   CANON-NOT:   mpc.cast
//       CANON:   return
func.func @splat_constant_rounds() -> (tensor<f16>, tensor<bf16>, tensor<f16>, tensor<f16>, tensor<f16>, tensor<4xf16>, tensor<f16>) {
  %tenth = mpc.constant dense<0.1> : tensor<f32>
  %0 = mpc.cast %tenth : tensor<f32> to tensor<f16>
  %1 = mpc.cast %tenth : tensor<f32> to tensor<bf16>
  %micro = mpc.constant dense<1.0e-6> : tensor<f32>
  %2 = mpc.cast %micro : tensor<f32> to tensor<f16>
  %below = mpc.constant dense<65519.0> : tensor<f32>
  %3 = mpc.cast %below : tensor<f32> to tensor<f16>
  %halfway = mpc.constant dense<65520.0> : tensor<f32>
  %4 = mpc.cast %halfway : tensor<f32> to tensor<f16>
  %tiny = mpc.constant dense<1.0e-8> : tensor<4xf32>
  %5 = mpc.cast %tiny : tensor<4xf32> to tensor<4xf16>
  %negtiny = mpc.constant dense<-1.0e-8> : tensor<f32>
  %6 = mpc.cast %negtiny : tensor<f32> to tensor<f16>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<f16>, tensor<bf16>, tensor<f16>, tensor<f16>, tensor<f16>, tensor<4xf16>, tensor<f16>
}

// -----

// Two casts of one value to one type are one.
// CHECK-LABEL: func.func @identical_casts_merged
//  CHECK-SAME:   (%[[W:.*]]: tensor<8x8xf32>
//       CHECK:   %[[W16:.*]] = mpc.cast %[[W]] : tensor<8x8xf32> to tensor<8x8xf16>
//   CHECK-NOT:   mpc.cast
//       CHECK:   mpc.matmul %{{.*}}, %[[W16]]
//       CHECK:   mpc.matmul %{{.*}}, %[[W16]]
func.func @identical_casts_merged(%w: tensor<8x8xf32>, %x: tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x8xf16>) {
  %w0 = mpc.cast %w : tensor<8x8xf32> to tensor<8x8xf16>
  %a = mpc.matmul %x, %w0 : tensor<4x8xf16>, tensor<8x8xf16>
  %w1 = mpc.cast %w : tensor<8x8xf32> to tensor<8x8xf16>
  %b = mpc.matmul %a, %w1 : tensor<4x8xf16>, tensor<8x8xf16>
  return %a, %b : tensor<4x8xf16>, tensor<4x8xf16>
}

// -----

// f32 -> f16 rounds: going back to f32 does not undo it.
// CHECK-LABEL: func.func @negative_narrow_then_widen
//  CHECK-SAME:   (%[[X:.*]]: tensor<4xf32>)
//       CHECK:   %[[H:.*]] = mpc.cast %[[X]] : tensor<4xf32> to tensor<4xf16>
//       CHECK:   %[[W:.*]] = mpc.cast %[[H]] : tensor<4xf16> to tensor<4xf32>
//       CHECK:   return %[[W]]
// CANON-LABEL: func.func @negative_narrow_then_widen
//       CANON:   mpc.cast %{{.*}} : tensor<4xf32> to tensor<4xf16>
//       CANON:   mpc.cast %{{.*}} : tensor<4xf16> to tensor<4xf32>
func.func @negative_narrow_then_widen(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mpc.cast %x : tensor<4xf32> to tensor<4xf16>
  %1 = mpc.cast %0 : tensor<4xf16> to tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// f16 -> bf16 loses mantissa bits, so bf16 -> f16 does not restore them.
// CHECK-LABEL: func.func @negative_f16_through_bf16
//       CHECK:   mpc.cast %{{.*}} : tensor<4xf16> to tensor<4xbf16>
//       CHECK:   mpc.cast %{{.*}} : tensor<4xbf16> to tensor<4xf16>
func.func @negative_f16_through_bf16(%x: tensor<4xf16>) -> tensor<4xf16> {
  %0 = mpc.cast %x : tensor<4xf16> to tensor<4xbf16>
  %1 = mpc.cast %0 : tensor<4xbf16> to tensor<4xf16>
  return %1 : tensor<4xf16>
}

// -----

// bf16 -> f16 loses range (and small values), so f16 -> bf16 does not
// restore them.
// CHECK-LABEL: func.func @negative_bf16_through_f16
//       CHECK:   mpc.cast %{{.*}} : tensor<4xbf16> to tensor<4xf16>
//       CHECK:   mpc.cast %{{.*}} : tensor<4xf16> to tensor<4xbf16>
func.func @negative_bf16_through_f16(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = mpc.cast %x : tensor<4xbf16> to tensor<4xf16>
  %1 = mpc.cast %0 : tensor<4xf16> to tensor<4xbf16>
  return %1 : tensor<4xbf16>
}

// -----

// f32 -> f16 -> bf16 rounds twice; the first rounding stays.
// CHECK-LABEL: func.func @negative_narrow_then_other_half
//       CHECK:   mpc.cast %{{.*}} : tensor<4xf32> to tensor<4xf16>
//       CHECK:   mpc.cast %{{.*}} : tensor<4xf16> to tensor<4xbf16>
func.func @negative_narrow_then_other_half(%x: tensor<4xf32>) -> tensor<4xbf16> {
  %0 = mpc.cast %x : tensor<4xf32> to tensor<4xf16>
  %1 = mpc.cast %0 : tensor<4xf16> to tensor<4xbf16>
  return %1 : tensor<4xbf16>
}

// -----

// A NaN's payload is the kernel's to convert; a dense (not splat) constant
// is not duplicated.
// CHECK-LABEL: func.func @negative_nan_and_dense_constants
//       CHECK:   mpc.cast %{{.*}} : tensor<f32> to tensor<f16>
//       CHECK:   mpc.cast %{{.*}} : tensor<2xf32> to tensor<2xf16>
func.func @negative_nan_and_dense_constants() -> (tensor<f16>, tensor<2xf16>) {
  %nan = mpc.constant dense<0x7FC00001> : tensor<f32>
  %0 = mpc.cast %nan : tensor<f32> to tensor<f16>
  %dense = mpc.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %1 = mpc.cast %dense : tensor<2xf32> to tensor<2xf16>
  return %0, %1 : tensor<f16>, tensor<2xf16>
}
