// mpc-check-numerics runs in `mpc compile`: a constant that vanishes in half
// is a warning, and --Werror-numerics makes it an error that stops the
// compile, reported at the constant with file:line:col.

// RUN: not mpc compile %s --amp=O3 --Werror-numerics --emit=training-step \
// RUN:   2>&1 | FileCheck %s -DFILE=%s --check-prefix=ERROR
// RUN: mpc compile %s --amp=O3 --emit=training-step 2>&1 >/dev/null \
// RUN:   | FileCheck %s -DFILE=%s --check-prefix=WARN
// At O0 nothing is half, and --Werror-numerics has nothing to report.
// RUN: mpc compile %s --Werror-numerics --emit=training-step >/dev/null

// ERROR-NOT: mpc.output
// WARN: [[FILE]]:[[# @LINE + 11]]:10: warning: constant 1e-08 rounds to 0 in f16; smallest normal is 6.1e-05
// WARN: [[FILE]]:[[# @LINE + 11]]:8: note: used in f16 here

mpc.model @tiny_eps
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<8x8xf32> = normal(0.02)) {
  %h = mpc.linear %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %sq = mpc.mul %h, %h : tensor<4x8xf32>, tensor<4x8xf32>
  // The constant is cast to f16 for the add at O3.
  // ERROR: [[FILE]]:[[@LINE+2]]:10: error: constant 1e-08 rounds to 0 in f16; smallest normal is 6.1e-05
  // ERROR: [[FILE]]:[[@LINE+2]]:8: note: used in f16 here
  %eps = mpc.constant dense<1.0e-8> : tensor<f32>
  %d = mpc.add %sq, %eps : tensor<4x8xf32>, tensor<f32>
  %r = mpc.rsqrt %d : tensor<4x8xf32>
  %loss = mpc.cross_entropy %r, %y : tensor<4x8xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}
