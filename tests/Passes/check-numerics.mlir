// RUN: mpc-opt %s --split-input-file --verify-diagnostics \
// RUN:   --mpc-check-numerics -o /dev/null
// werror-numerics: the same findings are errors, and the pass fails.
// RUN: not mpc-opt %s --split-input-file \
// RUN:   --mpc-check-numerics="werror-numerics=true" -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=WERROR
// WERROR: check-numerics.mlir:[[# @LINE + 8]]:10: error: constant 1e-08 rounds to 0 in f16; smallest normal is 6.1e-05
// WERROR-NOT: warning:

// Each case is IR as mpc-assign-precision leaves it.

// A constant cast to f16 for the op that uses it.
mpc.model @constant_rounds_to_zero inputs(%x: tensor<4xf16>) params(%unused: tensor<1xf32> = zeros) {
  // expected-warning@+1 {{constant 1e-08 rounds to 0 in f16; smallest normal is 6.1e-05}}
  %eps = mpc.constant dense<1.0e-8> : tensor<f32>
  %e16 = mpc.cast %eps : tensor<f32> to tensor<f16>
  // expected-note@+1 {{used in f16 here}}
  %y = mpc.add %x, %e16 : tensor<4xf16>, tensor<f16>
  %s = mpc.reduce_sum %y dims [0] : tensor<4xf16>
  %l = mpc.cast %s : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// Seen through a broadcast; bf16 keeps f32's range, so 1e-8 is fine there
// and only the f16 use is reported.
mpc.model @constant_subnormal_through_broadcast inputs(%x: tensor<4xf16>, %z: tensor<4xbf16>) params(%unused: tensor<1xf32> = zeros) {
  // expected-warning@+1 {{constant 1e-06 is subnormal in f16 and rounds to 1.01328e-06; smallest normal is 6.1e-05}}
  %c = mpc.constant dense<1.0e-6> : tensor<f32>
  %b = mpc.broadcast %c : tensor<f32> to tensor<4xf32>
  %b16 = mpc.cast %b : tensor<4xf32> to tensor<4xf16>
  %bb = mpc.cast %b : tensor<4xf32> to tensor<4xbf16>
  // expected-note@+1 {{used in f16 here}}
  %y = mpc.mul %x, %b16 : tensor<4xf16>, tensor<4xf16>
  %w = mpc.mul %z, %bb : tensor<4xbf16>, tensor<4xbf16>
  %s = mpc.reduce_sum %y dims [0] : tensor<4xf16>
  %l = mpc.cast %s : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>) w(%w : tensor<4xbf16>)
}

// -----

mpc.model @constant_overflows inputs(%x: tensor<4xf16>) params(%unused: tensor<1xf32> = zeros) {
  // expected-warning@+1 {{constant -1e+09 overflows to inf in f16; largest finite value is 65504}}
  %big = mpc.constant dense<-1.0e9> : tensor<f32>
  %b16 = mpc.cast %big : tensor<f32> to tensor<f16>
  // expected-note@+1 {{used in f16 here}}
  %y = mpc.add %x, %b16 : tensor<4xf16>, tensor<f16>
  %s = mpc.reduce_sum %y dims [0] : tensor<4xf16>
  %l = mpc.cast %s : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A value that is subnormal in its own type.
mpc.model @constant_subnormal_in_own_type inputs(%x: tensor<4xf32>) params(%unused: tensor<1xf32> = zeros) {
  // expected-warning@+1 {{constant 1.4013e-45 is subnormal in f32, with fewer significant bits; smallest normal is 1.2e-38}}
  %c = mpc.constant dense<[1.0, 1.4013e-45]> : tensor<2xf32>
  %s = mpc.reduce_sum %c dims [0] : tensor<2xf32>
  mpc.output loss(%s : tensor<f32>)
}

// -----

// -inf (a mask), 0 and ordinary values in f16 are fine.
mpc.model @negative_constants_that_survive inputs(%x: tensor<4xf16>) params(%unused: tensor<1xf32> = zeros) {
  %inf = mpc.constant dense<0xFF800000> : tensor<f32>
  %zero = mpc.constant dense<0.0> : tensor<f32>
  %half = mpc.constant dense<0.5> : tensor<f32>
  %0 = mpc.cast %inf : tensor<f32> to tensor<f16>
  %1 = mpc.cast %zero : tensor<f32> to tensor<f16>
  %2 = mpc.cast %half : tensor<f32> to tensor<f16>
  %a = mpc.add %x, %0 : tensor<4xf16>, tensor<f16>
  %b = mpc.add %a, %1 : tensor<4xf16>, tensor<f16>
  %c = mpc.add %b, %2 : tensor<4xf16>, tensor<f16>
  %s = mpc.reduce_sum %c dims [0] : tensor<4xf16>
  %l = mpc.cast %s : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A scale factor in the type the op runs in.
mpc.model @scale_factor_rounds_to_zero inputs(%x: tensor<4xf16>) params(%unused: tensor<1xf32> = zeros) {
  // expected-warning@+2 {{scale factor 1e-09 rounds to 0 in f16; smallest normal is 6.1e-05}}
  // expected-note@+1 {{'mpc.scale' runs on f16 values here}}
  %y = mpc.scale %x by 1.0e-9 : tensor<4xf16>
  %s = mpc.reduce_sum %y dims [0] : tensor<4xf16>
  %l = mpc.cast %s : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

mpc.model @scale_factor_overflows inputs(%x: tensor<4xbf16>) params(%unused: tensor<1xf32> = zeros) {
  // Finite in f32 (the verifier rejects what is not), but not in bf16.
  // expected-warning@+2 {{scale factor 3.4e+38 overflows to inf in bf16; largest finite value is 3.38953e+38}}
  // expected-note@+1 {{'mpc.scale' runs on bf16 values here}}
  %y = mpc.scale %x by 3.4e38 : tensor<4xbf16>
  %s = mpc.reduce_sum %y dims [0] : tensor<4xbf16>
  %l = mpc.cast %s : tensor<bf16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// The same factor in f32 (O0, or an op kept in f32) is fine; so is
// attention's 1/sqrt(d) in half.
mpc.model @negative_scale_factor_in_f32 inputs(%x: tensor<4xf32>, %h: tensor<4xf16>) params(%unused: tensor<1xf32> = zeros) {
  %y = mpc.scale %x by 1.0e-9 : tensor<4xf32>
  %z = mpc.scale %h by 0.25 : tensor<4xf16>
  %s = mpc.reduce_sum %y dims [0] : tensor<4xf32>
  mpc.output loss(%s : tensor<f32>) z(%z : tensor<4xf16>)
}

// -----

// A clamp bound in the type the op runs in: 70000 overflows f16, so the
// values clamped to it would become inf; ReLU6's 6 is exact.
mpc.model @clamp_bounds_in_half inputs(%x: tensor<4xf16>) params(%unused: tensor<1xf32> = zeros) {
  // expected-warning@+2 {{clamp max 70000 overflows to inf in f16; largest finite value is 65504}}
  // expected-note@+1 {{'mpc.clamp' runs on f16 values here}}
  %y = mpc.clamp %x min 0.0 max 70000.0 : tensor<4xf16>
  %z = mpc.clamp %x min 0.0 max 6.0 : tensor<4xf16>
  %s = mpc.add %y, %z : tensor<4xf16>, tensor<4xf16>
  %r = mpc.reduce_sum %s dims [0] : tensor<4xf16>
  %l = mpc.cast %r : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// A layer norm whose input and parameters are half (keep-norm-fp32=false,
// or an override) runs in half.
mpc.model @layer_norm_eps_in_half inputs(%x: tensor<4x8xf16>) params(%g: tensor<8xf16> = ones, %b: tensor<8xf16> = zeros) {
  // expected-warning@+2 {{eps 1e-08 rounds to 0 in f16; smallest normal is 6.1e-05}}
  // expected-note@+1 {{'mpc.layer_norm' runs in f16: its input and parameters are f16}}
  %n = mpc.layer_norm %x, %g, %b eps 1.0e-8 : tensor<4x8xf16>, tensor<8xf16>
  %s = mpc.reduce_sum %n dims [0, 1] : tensor<4x8xf16>
  %l = mpc.cast %s : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// O3: the model stores its parameters in half. Batch norm's parameters are
// cast to f32, but the model runs in half.
mpc.model @batch_norm_eps_at_o3 inputs(%x: tensor<2x3xf16>) params(%w: tensor<3x3xf16> = ones, %g: tensor<3xf16> = ones, %b: tensor<3xf16> = zeros) state(%mean: tensor<3xf32> = zeros, %var: tensor<3xf32> = ones) {
  %g32 = mpc.cast %g : tensor<3xf16> to tensor<3xf32>
  %b32 = mpc.cast %b : tensor<3xf16> to tensor<3xf32>
  %h = mpc.matmul %x, %w : tensor<2x3xf16>, tensor<3x3xf16>
  // expected-warning@+2 {{eps 1e-07 is subnormal in f16 and rounds to 1.19209e-07; smallest normal is 6.1e-05}}
  // expected-note@+1 {{the model stores its parameters in f16 (--amp=O3)}}
  %n = mpc.batch_norm %h, %g32, %b32, %mean, %var eps 1.0e-7 : tensor<2x3xf16>, tensor<3xf32>
  %s = mpc.reduce_sum %n dims [0, 1] : tensor<2x3xf16>
  %l = mpc.cast %s : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// O2 with f32 norm parameters: the kernel adds eps in f32.
mpc.model @negative_layer_norm_eps_f32_parameters inputs(%x: tensor<4x8xf16>) params(%g: tensor<8xf32> = ones, %b: tensor<8xf32> = zeros) {
  %n = mpc.layer_norm %x, %g, %b eps 1.0e-8 : tensor<4x8xf16>, tensor<8xf32>
  %s = mpc.reduce_sum %n dims [0, 1] : tensor<4x8xf16>
  %l = mpc.cast %s : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// bf16 has f32's range: 1e-8 is a normal number there.
mpc.model @negative_layer_norm_eps_bf16 inputs(%x: tensor<4x8xbf16>) params(%g: tensor<8xbf16> = ones, %b: tensor<8xbf16> = zeros) {
  %n = mpc.layer_norm %x, %g, %b eps 1.0e-8 : tensor<4x8xbf16>, tensor<8xbf16>
  %s = mpc.reduce_sum %n dims [0, 1] : tensor<4x8xbf16>
  %l = mpc.cast %s : tensor<bf16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

mpc.model @keep_f32_forced_into_half inputs(%x: tensor<4x8xf16>) params(%unused: tensor<1xf32> = zeros) {
  // expected-warning@+2 {{'mpc.softmax' is keep_f32 but mpc.precision forces it into f16}}
  // expected-note@+1 {{mpc.precision = "f32" keeps it in f32}}
  %p = mpc.softmax %x dim 1 {mpc.precision = "f16"} : tensor<4x8xf16>
  %s = mpc.reduce_sum %p dims [0, 1] : tensor<4x8xf16>
  %l = mpc.cast %s : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// At O0 the override is ignored (the op is f32), and an f32 override is
// what keep_f32 asks for.
mpc.model @negative_override_not_in_effect inputs(%x: tensor<4x8xf32>) params(%unused: tensor<1xf32> = zeros) {
  %p = mpc.softmax %x dim 1 {mpc.precision = "f16"} : tensor<4x8xf32>
  %q = mpc.log_softmax %p dim 1 {mpc.precision = "f32"} : tensor<4x8xf32>
  %s = mpc.reduce_sum %q dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%s : tensor<f32>)
}
