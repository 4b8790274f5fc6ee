// RUN: mpc-opt %s --verify-diagnostics --mpc-assign-precision="level=O1 half=f16"

// An override names one of the three float types.
mpc.model @bad_override inputs(%x: tensor<4x8xf32>) params(%w: tensor<8x8xf32> = zeros) {
  // expected-error@+1 {{mpc.precision must be "f32", "f16" or "bf16", got "fp8"}}
  %a = mpc.matmul %x, %w {mpc.precision = "fp8"} : tensor<4x8xf32>, tensor<8x8xf32>
  %s = mpc.reduce_sum %a dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%s : tensor<f32>)
}
