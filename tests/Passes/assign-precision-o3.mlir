// RUN: mpc-opt %s --verify-diagnostics --mpc-assign-precision="level=O3 half=f16" \
// RUN:   | FileCheck %s
// RUN: mpc-opt %s --mpc-assign-precision="level=O3 half=bf16" 2>&1 >/dev/null \
// RUN:   | FileCheck %s --check-prefix=BF16

// O3 is pure half: parameters are stored in half (no f32 master weights, so
// the pass warns), and every op runs in half, keep_f32 ops included.
// CHECK-LABEL: mpc.model @pure_half
//  CHECK-NEXT:     inputs(%x: tensor<4x8xf32>)
//  CHECK-NEXT:     params(%w: tensor<8x8xf16> = normal(1))
//       CHECK:   %[[X:.*]] = mpc.cast %x : tensor<4x8xf32> to tensor<4x8xf16>
//       CHECK:   %[[A:.*]] = mpc.matmul %[[X]], %w : tensor<4x8xf16>, tensor<8x8xf16>
//       CHECK:   %[[E:.*]] = mpc.exp %[[A]] : tensor<4x8xf16>
//       CHECK:   %[[S:.*]] = mpc.reduce_sum %[[E]] dims [0, 1] : tensor<4x8xf16>
//       CHECK:   %[[S32:.*]] = mpc.cast %[[S]] : tensor<f16> to tensor<f32>
//       CHECK:   mpc.output loss(%[[S32]] : tensor<f32>)
// With bf16 the warning names the way to keep small updates.
// BF16: warning: --amp=O3 stores parameters in 'bf16' and updates them there: there are no f32 master weights, so small updates can round away (--amp=O2 --master-weights=none stores them in bf16 and rounds each update stochastically)
// expected-warning@+1 {{--amp=O3 stores parameters in 'f16' and updates them there: there are no f32 master weights, so small updates can round away}}
mpc.model @pure_half inputs(%x: tensor<4x8xf32>) params(%w: tensor<8x8xf32> = normal(1.0)) {
  %a = mpc.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %e = mpc.exp %a : tensor<4x8xf32>
  %s = mpc.reduce_sum %e dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%s : tensor<f32>)
}
