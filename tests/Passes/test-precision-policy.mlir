// RUN: mpc-opt %s --mpc-test-precision-policy --split-input-file --verify-diagnostics

// Pins the precision category of every mpc op, and the accumulator type it
// asks for with an f16 compute type: f32 for `lower` and `keep_f32`, the
// compute type (f16) for `promote` and `follow`. mpc.model and mpc.output have
// no category and get no remark.

// GEMM-like ops run on half inputs and accumulate in f32.
func.func @lower(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>,
                 %q: tensor<2x4x8xf32>, %img: tensor<1x3x8x8xf32>,
                 %k: tensor<4x3x3x3xf32>) {
  // expected-remark@+1 {{precision: lower, accumulate: 'f32'}}
  %0 = mpc.linear %x, %w, %b : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>
  // expected-remark@+1 {{precision: lower, accumulate: 'f32'}}
  %1 = mpc.matmul %x, %w transpose_rhs : tensor<4x8xf32>, tensor<16x8xf32>
  // expected-remark@+1 {{precision: lower, accumulate: 'f32'}}
  %2 = mpc.batch_matmul %q, %q transpose_rhs : tensor<2x4x8xf32>, tensor<2x4x8xf32>
  // expected-remark@+1 {{precision: lower, accumulate: 'f32'}}
  %3 = mpc.conv2d %img, %k padding [1, 1] : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

// Numerically sensitive ops always compute in f32.
func.func @keep_f32(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %y: tensor<4xi32>,
                    %img: tensor<2x8x4x4xf32>, %c: tensor<8xf32>) {
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %0 = mpc.exp %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %1 = mpc.log %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %2 = mpc.rsqrt %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %3 = mpc.reduce_sum %x dims [1] : tensor<4x8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %4 = mpc.reduce_mean %x dims [0] keepdim : tensor<4x8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %5 = mpc.softmax %x dim 1 : tensor<4x8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %6 = mpc.log_softmax %x dim 1 : tensor<4x8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %7 = mpc.layer_norm %x, %g, %g : tensor<4x8xf32>, tensor<8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %8 = mpc.batch_norm %img, %c, %c, %c, %c : tensor<2x8x4x4xf32>, tensor<8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %9 = mpc.cross_entropy %x, %y : tensor<4x8xf32>, tensor<4xi32>
  return
}

// -----

// Binary elementwise ops, where and concat compute in their widest input type.
func.func @promote(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %m: tensor<4x8xi1>) {
  // expected-remark@+1 {{precision: promote, accumulate: 'f16'}}
  %0 = mpc.add %a, %b : tensor<4x8xf32>, tensor<8xf32>
  // expected-remark@+1 {{precision: promote, accumulate: 'f16'}}
  %1 = mpc.sub %a, %b : tensor<4x8xf32>, tensor<8xf32>
  // expected-remark@+1 {{precision: promote, accumulate: 'f16'}}
  %2 = mpc.mul %a, %b : tensor<4x8xf32>, tensor<8xf32>
  // expected-remark@+1 {{precision: promote, accumulate: 'f16'}}
  %3 = mpc.div %a, %b : tensor<4x8xf32>, tensor<8xf32>
  // expected-remark@+1 {{precision: promote, accumulate: 'f16'}}
  %4 = mpc.where %m, %a, %b : tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>
  // expected-remark@+1 {{precision: promote, accumulate: 'f16'}}
  %5 = mpc.concat %a, %a dim 0 : tensor<4x8xf32>, tensor<4x8xf32>
  return
}

// -----

// Unary elementwise ops and data movement follow their input's type.
func.func @follow(%x: tensor<4x8xf32>, %t: tensor<16x8xf32>, %i: tensor<4xi64>,
                  %img: tensor<1x2x4x4xf32>) {
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %0 = mpc.neg %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %1 = mpc.relu %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %2 = mpc.tanh %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %3 = mpc.sigmoid %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %4 = mpc.sqrt %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %5 = mpc.gelu %x approximate tanh : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %6 = mpc.scale %x by 0.5 : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %7 = mpc.dropout %x rate 0.1 seed 3 : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %8 = mpc.cast %x : tensor<4x8xf32> to tensor<4x8xbf16>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %9 = mpc.constant dense<0.0> : tensor<f32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %10 = mpc.causal_mask : tensor<8x8xi1>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %11 = mpc.reduce_max %x dims [1] : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %12 = mpc.embedding %t, %i : tensor<16x8xf32>, tensor<4xi64>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %13 = mpc.reshape %x : tensor<4x8xf32> to tensor<32xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %14 = mpc.transpose %x perm [1, 0] : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %15 = mpc.broadcast %x : tensor<4x8xf32> to tensor<2x4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %16 = mpc.slice %x starts [0, 0] limits [4, 8] strides [2, 2] : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %17 = mpc.max_pool2d %img kernel [2, 2] : tensor<1x2x4x4xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %18 = mpc.avg_pool2d %img kernel [2, 2] stride [1, 1] : tensor<1x2x4x4xf32>
  return
}

// -----

// The pass walks into models; the model and its output get no remark.
mpc.model @mlp
    inputs(%x: tensor<64x784xf32>, %y: tensor<64xi32>)
    params(%w: tensor<10x784xf32> = kaiming_uniform,
           %b: tensor<10xf32> = zeros) {
  // expected-remark@+1 {{precision: lower, accumulate: 'f32'}}
  %logits = mpc.linear %x, %w, %b
      : tensor<64x784xf32>, tensor<10x784xf32>, tensor<10xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %a = mpc.relu %logits : tensor<64x10xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %loss = mpc.cross_entropy %a, %y : tensor<64x10xf32>, tensor<64xi32>
  mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<64x10xf32>)
}

// -----

// Backward ops take their forward op's category: GEMM gradients are `lower`,
// the gradients of sensitive ops `keep_f32`, the rest `follow`.
func.func @backward(%dy: tensor<4x8xf32>, %x: tensor<4x8xf32>, %dl: tensor<f32>,
                    %t: tensor<4xi32>, %g: tensor<8xf32>, %ids: tensor<4xi32>,
                    %dm: tensor<4xf32>, %m: tensor<4xf32>,
                    %dp: tensor<1x2x2x2xf32>, %img: tensor<1x2x4x4xf32>,
                    %dc: tensor<2x4x8x8xf32>, %k: tensor<4x3x3x3xf32>,
                    %in: tensor<2x3x8x8xf32>) {
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %0 = mpc.relu_grad %dy, %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %1 = mpc.gelu_grad %dy, %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %2 = mpc.tanh_grad %dy, %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %3 = mpc.sigmoid_grad %dy, %x : tensor<4x8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %4 = mpc.softmax_grad %dy, %x dim 1 : tensor<4x8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %5 = mpc.log_softmax_grad %dy, %x dim 1 : tensor<4x8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %6 = mpc.cross_entropy_grad %dl, %x, %t : tensor<f32>, tensor<4x8xf32>, tensor<4xi32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %7:3 = mpc.layer_norm_grad %dy, %x, %g : tensor<4x8xf32>, tensor<8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %8:3 = mpc.batch_norm_grad %dy, %x, %g : tensor<4x8xf32>, tensor<8xf32>
  // expected-remark@+1 {{precision: keep_f32, accumulate: 'f32'}}
  %9 = mpc.embedding_grad %dy, %ids : tensor<4x8xf32>, tensor<4xi32> -> tensor<10x8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %10 = mpc.reduce_max_grad %dm, %x, %m dims [1] : tensor<4xf32>, tensor<4x8xf32>, tensor<4xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %11 = mpc.slice_grad %dm starts [0] strides [2] : tensor<4xf32> -> tensor<8xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %12 = mpc.max_pool2d_grad %dp, %img kernel [2, 2] stride [2, 2] padding [0, 0] : tensor<1x2x2x2xf32>, tensor<1x2x4x4xf32>
  // expected-remark@+1 {{precision: follow, accumulate: 'f16'}}
  %13 = mpc.avg_pool2d_grad %dp kernel [2, 2] stride [2, 2] padding [0, 0] : tensor<1x2x2x2xf32> -> tensor<1x2x4x4xf32>
  // expected-remark@+1 {{precision: lower, accumulate: 'f32'}}
  %14 = mpc.conv2d_grad_input %dc, %k stride [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
  // expected-remark@+1 {{precision: lower, accumulate: 'f32'}}
  %15 = mpc.conv2d_grad_weight %dc, %in stride [1, 1] padding [1, 1] dilation [1, 1] groups 1 : tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32> -> tensor<4x3x3x3xf32>
  return
}
