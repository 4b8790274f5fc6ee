// RUN: mpc-opt %s --split-input-file --verify-diagnostics

// One case per invariant of every op, named after the invariant (`@linear_c2`,
// as the `// linear_c2` tag in MpcOps.cpp and C2 in MpcOps.td). Ops with
// inferred result types check shapes while parsing, so their errors end the
// chunk at the parser.

//===----------------------------------------------------------------------===//
// mpc.model
//===----------------------------------------------------------------------===//

// model_c1: one initialiser per parameter. Only the generic form can break it.
// expected-error@+1 {{'mpc.model' op expects one initialiser per parameter and state tensor, got 0 for 1 parameters and 0 for 0 state tensors}}
"mpc.model"() <{sym_name = "model_c1_param_inits", input_names = [], param_names = ["w"], param_inits = [], state_names = [], state_inits = []}> ({
^bb0(%w: tensor<f32>):
  "mpc.output"(%w) <{output_names = []}> : (tensor<f32>) -> ()
}) : () -> ()

// -----

// model_c1: one initialiser per state tensor.
// expected-error@+1 {{'mpc.model' op expects one initialiser per parameter and state tensor, got 0 for 0 parameters and 1 for 0 state tensors}}
"mpc.model"() <{sym_name = "model_c1_state_inits", input_names = ["x"], param_names = [], param_inits = [], state_names = [], state_inits = [#mpc.init<zeros>]}> ({
^bb0(%x: tensor<f32>):
  "mpc.output"(%x) <{output_names = []}> : (tensor<f32>) -> ()
}) : () -> ()

// -----

// model_c1: one name per block argument.
// expected-error@+1 {{'mpc.model' op expects 2 block arguments (inputs, params, state), got 1}}
"mpc.model"() <{sym_name = "model_c1_names", input_names = ["x", "y"], param_names = [], param_inits = [], state_names = [], state_inits = []}> ({
^bb0(%x: tensor<f32>):
  "mpc.output"(%x) <{output_names = []}> : (tensor<f32>) -> ()
}) : () -> ()

// -----

// model_c2: a name that is not an identifier (an SSA number).
mpc.model @model_c2_number
    // expected-error@+1 {{'mpc.model' op expects names of the form [A-Za-z_][A-Za-z0-9_.-]*, got '0'}}
    inputs(%0: tensor<f32>) params() {
  mpc.output loss(%0 : tensor<f32>)
}

// -----

// model_c2: `$` and `-` are valid in SSA names but not in tensor names.
mpc.model @model_c2_dollar inputs(%x: tensor<f32>)
    // expected-error@+1 {{'mpc.model' op expects names of the form [A-Za-z_][A-Za-z0-9_.-]*, got 'w$1'}}
    params(%w$1: tensor<f32> = zeros) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @model_c2_dash inputs(%x: tensor<f32>) params()
    // expected-error@+1 {{'mpc.model' op expects names of the form [A-Za-z_][A-Za-z0-9_.-]*, got '-s'}}
    state(%-s: tensor<f32> = zeros) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// model_c2: names are unique across inputs, parameters and state. The custom
// form cannot spell a duplicate (it would redefine an SSA value).
"mpc.model"() <{sym_name = "model_c2_duplicate", input_names = ["x"], param_names = ["x"], param_inits = [#mpc.init<zeros>], state_names = [], state_inits = []}> ({
// expected-note@+2 {{first defined here}}
// expected-error@+1 {{'mpc.model' op has two tensors named 'x'}}
^bb0(%a: tensor<f32>, %b: tensor<f32>):
  "mpc.output"(%a) <{output_names = []}> : (tensor<f32>) -> ()
}) : () -> ()

// -----

// model_c3: inputs are tensors of f32, f16, bf16, i32 or i64.
mpc.model @model_c3_input_i8
    // expected-error@+1 {{'mpc.model' op expects input 'x' to be a statically shaped tensor of f32, f16, bf16, i32 or i64, got 'tensor<4xi8>'}}
    inputs(%x: tensor<4xi8>) params() {
  %c = mpc.constant dense<0.0> : tensor<f32>
  mpc.output loss(%c : tensor<f32>)
}

// -----

mpc.model @model_c3_input_dynamic
    // expected-error@+1 {{'mpc.model' op expects input 'x' to be a statically shaped tensor of f32, f16, bf16, i32 or i64, got 'tensor<?x4xf32>'}}
    inputs(%x: tensor<?x4xf32>) params() {
  %c = mpc.constant dense<0.0> : tensor<f32>
  mpc.output loss(%c : tensor<f32>)
}

// -----

mpc.model @model_c3_input_not_tensor
    // expected-error@+1 {{'mpc.model' op expects input 'x' to be a statically shaped tensor of f32, f16, bf16, i32 or i64, got 'f32'}}
    inputs(%x: f32) params() {
  %c = mpc.constant dense<0.0> : tensor<f32>
  mpc.output loss(%c : tensor<f32>)
}

// -----

mpc.model @model_c3_input_unranked
    // expected-error@+1 {{'mpc.model' op expects input 'x' to be a statically shaped tensor of f32, f16, bf16, i32 or i64, got 'tensor<*xf32>'}}
    inputs(%x: tensor<*xf32>) params() {
  %c = mpc.constant dense<0.0> : tensor<f32>
  mpc.output loss(%c : tensor<f32>)
}

// -----

// model_c3: parameters are float tensors.
mpc.model @model_c3_param_int inputs(%x: tensor<f32>)
    // expected-error@+1 {{'mpc.model' op expects parameter or state 'w' to be a statically shaped tensor of f32, f16 or bf16, got 'tensor<4xi32>'}}
    params(%w: tensor<4xi32> = zeros) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @model_c3_param_f64 inputs(%x: tensor<f32>)
    // expected-error@+1 {{'mpc.model' op expects parameter or state 'w' to be a statically shaped tensor of f32, f16 or bf16, got 'tensor<4xf64>'}}
    params(%w: tensor<4xf64> = zeros) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// model_c3: no tensor has an extent of 0 (regression: a zero-size dimension
// passed the verifiers and crashed code generation).
mpc.model @model_c3_input_zero_extent
    // expected-error@+1 {{'mpc.model' op expects 'x' to have elements, got 'tensor<0x8xf32>' (mpc does not support zero-size dimensions)}}
    inputs(%x: tensor<0x8xf32>) params() {
  %c = mpc.constant dense<0.0> : tensor<f32>
  mpc.output loss(%c : tensor<f32>)
}

// -----

mpc.model @model_c3_param_zero_extent inputs(%x: tensor<f32>)
    // expected-error@+1 {{'mpc.model' op expects 'w' to have elements, got 'tensor<0xf16>' (mpc does not support zero-size dimensions)}}
    params(%w: tensor<0xf16> = zeros) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// model_c3: rank at most 8, what the runtime's tensor descriptors hold
// (regression: a rank-11 parameter verified, and the generated descriptor
// did not compile).
mpc.model @model_c3_param_rank11 inputs(%x: tensor<f32>)
    // expected-error@+1 {{'mpc.model' op expects 'w' to have rank at most 8, got 'tensor<1x2x2x2x2x2x2x2x2x2x2xf32>'}}
    params(%w: tensor<1x2x2x2x2x2x2x2x2x2x2xf32> = zeros) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @model_c3_input_rank9
    // expected-error@+1 {{'mpc.model' op expects 'x' to have rank at most 8, got 'tensor<1x1x1x1x1x1x1x1x2xf32>'}}
    inputs(%x: tensor<1x1x1x1x1x1x1x1x2xf32>) params() {
  %c = mpc.constant dense<0.0> : tensor<f32>
  mpc.output loss(%c : tensor<f32>)
}

// -----

// Every mpc op (Mpc_HasElements): a reduction over nothing, a GEMM with
// k = 0, and a slice whose range is empty.
func.func @has_elements_reduction(%x: tensor<0x8xf32>) -> tensor<8xf32> {
  // expected-error@+1 {{'mpc.reduce_sum' op expects tensors with elements, got 'tensor<0x8xf32>' for operand #0 (mpc does not support zero-size dimensions)}}
  %0 = mpc.reduce_sum %x dims [0] : tensor<0x8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @has_elements_gemm(%a: tensor<4x0xbf16>, %b: tensor<0x2xbf16>) -> tensor<4x2xbf16> {
  // expected-error@+1 {{'mpc.matmul' op expects tensors with elements, got 'tensor<4x0xbf16>' for operand #0 (mpc does not support zero-size dimensions)}}
  %0 = mpc.matmul %a, %b : tensor<4x0xbf16>, tensor<0x2xbf16>
  return %0 : tensor<4x2xbf16>
}

// -----

func.func @has_elements_slice(%x: tensor<10x4xf16>) -> tensor<0x2xf16> {
  // expected-error@+1 {{'mpc.slice' op expects tensors with elements, got 'tensor<0x2xf16>' for result #0 (mpc does not support zero-size dimensions)}}
  %0 = mpc.slice %x starts [2, 0] limits [2, 4] strides [2, 2] : tensor<10x4xf16>
  return %0 : tensor<0x2xf16>
}

// -----

// model_c6: the name is a C identifier (regression: mpc-fuzz found that
// `@mod.el` and `@"a b"` verified and gave C++ that did not compile).
// expected-error@+1 {{'mpc.model' op expects a name that is a C identifier ([A-Za-z_][A-Za-z0-9_]*): it names the library, its header and C functions; got 'mod.el'}}
mpc.model @mod.el inputs(%x: tensor<f32>) params() {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// expected-error@+1 {{'mpc.model' op expects a name that is a C identifier ([A-Za-z_][A-Za-z0-9_]*): it names the library, its header and C functions; got 'a b'}}
mpc.model @"a b" inputs(%x: tensor<f32>) params() {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// model_c3: state is a statically shaped float tensor.
mpc.model @model_c3_state_dynamic inputs(%x: tensor<f32>) params()
    // expected-error@+1 {{'mpc.model' op expects parameter or state 's' to be a statically shaped tensor of f32, f16 or bf16, got 'tensor<?xf32>'}}
    state(%s: tensor<?xf32> = zeros) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// model_c4: kaiming initialisers need fans, so rank >= 2.
mpc.model @model_c4_kaiming_rank1 inputs(%x: tensor<f32>)
    // expected-error@+1 {{'mpc.model' op initialiser 'kaiming_uniform' of 'b' needs a tensor of rank >= 2 to compute fans, got 'tensor<16xf32>'}}
    params(%b: tensor<16xf32> = kaiming_uniform) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @model_c4_kaiming_normal_rank1 inputs(%x: tensor<f32>)
    params(%w: tensor<4x4xf32> = kaiming_normal,
           // expected-error@+1 {{'mpc.model' op initialiser 'kaiming_normal' of 'b' needs a tensor of rank >= 2 to compute fans, got 'tensor<4xf32>'}}
           %b: tensor<4xf32> = kaiming_normal(0.01)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @model_c4_xavier_uniform_scalar inputs(%x: tensor<f32>)
    // expected-error@+1 {{'mpc.model' op initialiser 'xavier_uniform' of 'w' needs a tensor of rank >= 2 to compute fans, got 'tensor<f32>'}}
    params(%w: tensor<f32> = xavier_uniform) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// model_c4 applies to state too.
mpc.model @model_c4_xavier_normal_state inputs(%x: tensor<f32>) params()
    // expected-error@+1 {{'mpc.model' op initialiser 'xavier_normal' of 's' needs a tensor of rank >= 2 to compute fans, got 'tensor<3xf32>'}}
    state(%s: tensor<3xf32> = xavier_normal(1.0)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// model_c5: state may only be the running statistics of mpc.batch_norm.
mpc.model @model_c5_other_op inputs(%x: tensor<8x4xf32>) params()
    // expected-note@+1 {{state defined here}}
    state(%bn.running_mean: tensor<4xf32> = zeros) {
  // expected-error@+1 {{'mpc.relu' op uses state 'bn.running_mean', which only mpc.batch_norm may use, as running statistics, and mpc.quantize, as its delayed-scaling table}}
  %r = mpc.relu %bn.running_mean : tensor<4xf32>
  %l = mpc.reduce_sum %r dims [0] : tensor<4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// model_c5: returning state as an output is a use too.
mpc.model @model_c5_output inputs(%x: tensor<f32>) params()
    // expected-note@+1 {{state defined here}}
    state(%s: tensor<4xf32> = zeros) {
  // expected-error@+1 {{'mpc.output' op uses state 's', which only mpc.batch_norm may use, as running statistics, and mpc.quantize, as its delayed-scaling table}}
  mpc.output loss(%x : tensor<f32>) stats(%s : tensor<4xf32>)
}

// -----

// model_c5: a batch_norm's gamma is not a running statistic, even when the
// same state is also passed as one.
mpc.model @model_c5_state_as_gamma inputs(%x: tensor<8x4xf32>)
    params(%b: tensor<4xf32> = zeros)
    // expected-note@+1 {{state defined here}}
    state(%mean: tensor<4xf32> = zeros, %var: tensor<4xf32> = ones) {
  // expected-error@+1 {{'mpc.batch_norm' op uses state 'mean', which only mpc.batch_norm may use, as running statistics, and mpc.quantize, as its delayed-scaling table}}
  %n = mpc.batch_norm %x, %mean, %b, %mean, %var : tensor<8x4xf32>, tensor<4xf32>
  %l = mpc.reduce_sum %n dims [0, 1] : tensor<8x4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// model_c5: each state tensor is updated by one op only; the error is on the
// second update and the note on the first.
mpc.model @model_c5_two_batch_norms inputs(%x: tensor<8x4xf32>)
    params(%g: tensor<4xf32> = ones, %b: tensor<4xf32> = zeros)
    state(%mean: tensor<4xf32> = zeros, %var: tensor<4xf32> = ones) {
  // expected-note@+1 {{first updated here}}
  %n0 = mpc.batch_norm %x, %g, %b, %mean, %var : tensor<8x4xf32>, tensor<4xf32>
  // expected-error@+1 {{'mpc.batch_norm' op uses state 'mean', which another op already updates}}
  %n1 = mpc.batch_norm %n0, %g, %b, %mean, %var : tensor<8x4xf32>, tensor<4xf32>
  %l = mpc.reduce_sum %n1 dims [0, 1] : tensor<8x4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// model_c5: and by one operand of that op.
mpc.model @model_c5_mean_is_var inputs(%x: tensor<8x4xf32>)
    params(%g: tensor<4xf32> = ones, %b: tensor<4xf32> = zeros)
    // expected-note@+1 {{state defined here}}
    state(%stat: tensor<4xf32> = zeros) {
  // expected-error@+1 {{'mpc.batch_norm' op uses state 'stat' as both running mean and running variance}}
  %n = mpc.batch_norm %x, %g, %b, %stat, %stat : tensor<8x4xf32>, tensor<4xf32>
  %l = mpc.reduce_sum %n dims [0, 1] : tensor<8x4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// The model's body must end in mpc.output.
mpc.model @model_no_output inputs(%x: tensor<f32>) params() {
  // expected-error@+1 {{block with no terminator, has %0 = "mpc.relu"(%arg0) : (tensor<f32>) -> tensor<f32>}}
  %r = mpc.relu %x : tensor<f32>
}

// -----

//===----------------------------------------------------------------------===//
// mpc.output
//===----------------------------------------------------------------------===//

// fusion_c1: the yielded values have the results' types.
mpc.model @fusion_c1_types inputs(%x: tensor<4xf32>) params() {
  // expected-error@+1 {{'mpc.fusion' op yields 1 values whose types differ from its 1 results}}
  %0 = mpc.fusion loop {
    %a = mpc.neg %x : tensor<4xf32>
    %b = mpc.exp %a : tensor<4xf32>
    mpc.yield %b : tensor<4xf32>
  } : tensor<4xf16>
  %l = mpc.reduce_sum %0 dims [0] : tensor<4xf16>
  %l32 = mpc.cast %l : tensor<f16> to tensor<f32>
  mpc.output loss(%l32 : tensor<f32>)
}

// -----

// fusion_c1: a group yields only what it computes.
mpc.model @fusion_c1_outside inputs(%x: tensor<4xf32>) params() {
  // expected-error@+1 {{'mpc.fusion' op yields a value not computed in its body}}
  %0 = mpc.fusion loop {
    %a = mpc.neg %x : tensor<4xf32>
    mpc.yield %x : tensor<4xf32>
  } : tensor<4xf32>
  %l = mpc.reduce_sum %0 dims [0] : tensor<4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c2: a group holds at least one op.
mpc.model @fusion_c2_empty inputs(%x: tensor<4xf32>) params() {
  // expected-error@+1 {{'mpc.fusion' op expects at least one op in its body}}
  "mpc.fusion"() <{kind = 0 : i32}> ({
    "mpc.yield"() : () -> ()
  }) : () -> ()
  %l = mpc.reduce_sum %x dims [0] : tensor<4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c3: a loop group holds elementwise ops and views only.
mpc.model @fusion_c3_op inputs(%x: tensor<4x8xf32>) params() {
  %0 = mpc.fusion loop {
    %a = mpc.neg %x : tensor<4x8xf32>
    // expected-error@+1 {{'mpc.softmax' op is neither elementwise nor a view: it cannot be in a 'loop' kernel group}}
    %b = mpc.softmax %a dim 1 : tensor<4x8xf32>
    mpc.yield %b : tensor<4x8xf32>
  } : tensor<4x8xf32>
  %l = mpc.reduce_sum %0 dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c3: a loop group's results have one shape.
mpc.model @fusion_c3_shapes inputs(%x: tensor<4x8xf32>) params() {
  // expected-error@+1 {{'mpc.fusion' op of kind 'loop' expects results of one shape}}
  %0:2 = mpc.fusion loop {
    %a = mpc.neg %x : tensor<4x8xf32>
    %b = mpc.transpose %a perm [1, 0] : tensor<4x8xf32>
    mpc.yield %a, %b : tensor<4x8xf32>, tensor<8x4xf32>
  } : tensor<4x8xf32>, tensor<8x4xf32>
  %l = mpc.reduce_sum %0#1 dims [0, 1] : tensor<8x4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c4: a gemm group starts with its GEMM.
mpc.model @fusion_c4_first inputs(%x: tensor<4x8xf32>) params() {
  // expected-error@+1 {{'mpc.fusion' op of kind 'gemm' expects linear, matmul or batch_matmul first}}
  %0 = mpc.fusion gemm {
    %a = mpc.neg %x : tensor<4x8xf32>
    %b = mpc.exp %a : tensor<4x8xf32>
    mpc.yield %b : tensor<4x8xf32>
  } : tensor<4x8xf32>
  %l = mpc.reduce_sum %0 dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c4: every other op of a gemm group reads the product.
mpc.model @fusion_c4_product inputs(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) params() {
  %0:2 = mpc.fusion gemm {
    %p = mpc.matmul %x, %y : tensor<4x8xf32>, tensor<8x4xf32>
    // expected-error@+1 {{'mpc.exp' op does not read the product: it cannot be in a GEMM's epilogue}}
    %e = mpc.exp %x : tensor<4x8xf32>
    mpc.yield %p, %e : tensor<4x4xf32>, tensor<4x8xf32>
  } : tensor<4x4xf32>, tensor<4x8xf32>
  %l = mpc.reduce_sum %0#0 dims [0, 1] : tensor<4x4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c5: a reduce group is a reduce_sum (or embedding_grad) and its
// widening cast.
mpc.model @fusion_c5 inputs(%x: tensor<4x8xf16>) params() {
  // expected-error@+1 {{'mpc.fusion' op of kind 'reduce' expects a reduce_sum or an embedding_grad and a cast of its result to f32}}
  %0 = mpc.fusion reduce {
    %s = mpc.reduce_sum %x dims [0, 1] : tensor<4x8xf16>
    %n = mpc.neg %s : tensor<f16>
    mpc.yield %n : tensor<f16>
  } : tensor<f16>
  %l = mpc.cast %0 : tensor<f16> to tensor<f32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c6: a row group holds one softmax (or its gradient).
mpc.model @fusion_c6 inputs(%x: tensor<4x8xf32>) params() {
  // expected-error@+1 {{'mpc.fusion' op of kind 'row' expects one softmax, log_softmax, layer_norm, batch_norm or their gradient, or a quantize (transposing where it sums a bias), and loop ops (a batch_norm's then possibly a max_pool2d_with_indices)}}
  %0 = mpc.fusion row {
    %a = mpc.softmax %x dim 1 : tensor<4x8xf32>
    %b = mpc.softmax %a dim 1 : tensor<4x8xf32>
    %c = mpc.softmax %b dim 1 : tensor<4x8xf32>
    mpc.yield %c : tensor<4x8xf32>
  } : tensor<4x8xf32>
  %l = mpc.reduce_sum %0 dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c6: two row ops only where a layer norm's kernel finds the amax of
// the quantization after it.
mpc.model @fusion_c6_two inputs(%x: tensor<4x8xf32>) params() {
  // expected-error@+1 {{'mpc.fusion' op of kind 'row' has a second row op only where a layer_norm or layer_norm_grad is followed by a current-scaling quantize of what its kernel stores}}
  %0 = mpc.fusion row {
    %a = mpc.softmax %x dim 1 : tensor<4x8xf32>
    %b = mpc.softmax %a dim 1 : tensor<4x8xf32>
    mpc.yield %b : tensor<4x8xf32>
  } : tensor<4x8xf32>
  %l = mpc.reduce_sum %0 dims [0, 1] : tensor<4x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c6: under delayed scaling the cast pass raises the amax itself.
mpc.model @fusion_c6_two_delayed inputs(%x: tensor<4x8xbf16>) params(%g: tensor<8xbf16> = ones, %b: tensor<8xbf16> = zeros) state(%t: tensor<5x1xf32> = zeros) {
  // expected-error@+1 {{'mpc.fusion' op of kind 'row' has a second row op only where a layer_norm or layer_norm_grad is followed by a current-scaling quantize of what its kernel stores}}
  %0:2 = mpc.fusion row {
    %y = mpc.layer_norm %x, %g, %b : tensor<4x8xbf16>, tensor<8xbf16>
    %q, %s = mpc.quantize %y delayed(%t[0] margin 0 : tensor<5x1xf32>) : tensor<4x8xbf16> to tensor<4x8xf8E4M3FN>
    mpc.yield %q, %s : tensor<4x8xf8E4M3FN>, tensor<f32>
  } : tensor<4x8xf8E4M3FN>, tensor<f32>
  mpc.output loss(%0#1 : tensor<f32>)
}

// -----

// fusion_c6: the norm's kernel finds the amax of what it stores, not of its
// input.
mpc.model @fusion_c6_two_input inputs(%x: tensor<4x8xbf16>) params(%g: tensor<8xbf16> = ones, %b: tensor<8xbf16> = zeros) {
  // expected-error@+1 {{'mpc.fusion' op of kind 'row' has a second row op only where a layer_norm or layer_norm_grad is followed by a current-scaling quantize of what its kernel stores}}
  %0:3 = mpc.fusion row {
    %y = mpc.layer_norm %x, %g, %b : tensor<4x8xbf16>, tensor<8xbf16>
    %q, %s = mpc.quantize %x : tensor<4x8xbf16> to tensor<4x8xf8E4M3FN>
    mpc.yield %y, %q, %s : tensor<4x8xbf16>, tensor<4x8xf8E4M3FN>, tensor<f32>
  } : tensor<4x8xbf16>, tensor<4x8xf8E4M3FN>, tensor<f32>
  mpc.output loss(%0#2 : tensor<f32>)
}

// -----

// fusion_c6: only a transposing quantize sums its input (the bias gradient
// of the FP8 weight gradient that reads its transposed copy).
mpc.model @fusion_c6_sum inputs(%x: tensor<4x8xbf16>) params() state(%t: tensor<5x1xf32> = zeros) {
  // expected-error@+1 {{'mpc.fusion' op of kind 'row' expects one softmax, log_softmax, layer_norm, batch_norm or their gradient, or a quantize (transposing where it sums a bias), and loop ops (a batch_norm's then possibly a max_pool2d_with_indices)}}
  %0:3 = mpc.fusion row {
    %q, %s = mpc.quantize %x delayed(%t[0] margin 0 : tensor<5x1xf32>) : tensor<4x8xbf16> to tensor<4x8xf8E5M2>
    %b = mpc.reduce_sum %x dims [0] : tensor<4x8xbf16>
    mpc.yield %q, %s, %b : tensor<4x8xf8E5M2>, tensor<f32>, tensor<8xbf16>
  } : tensor<4x8xf8E5M2>, tensor<f32>, tensor<8xbf16>
  %l = mpc.reduce_sum %0#2 dims [0] : tensor<8xbf16>
  mpc.output loss(%l : tensor<bf16>)
}

// -----

// fusion_c6: a bias sum follows the quantization whose cast pass sums it.
mpc.model @fusion_c6_sum_first inputs(%x: tensor<4x8xbf16>) params() {
  // expected-error@+1 {{'mpc.fusion' op of kind 'row' expects one softmax, log_softmax, layer_norm, batch_norm or their gradient, or a quantize (transposing where it sums a bias), and loop ops (a batch_norm's then possibly a max_pool2d_with_indices)}}
  %0:4 = mpc.fusion row {
    %g = mpc.gelu %x approximate tanh : tensor<4x8xbf16>
    %b = mpc.reduce_sum %g dims [0] : tensor<4x8xbf16>
    %q, %s, %t = mpc.quantize %g : tensor<4x8xbf16> to tensor<4x8xf8E5M2> transposed tensor<8x4xf8E5M2>
    mpc.yield %q, %s, %t, %b : tensor<4x8xf8E5M2>, tensor<f32>, tensor<8x4xf8E5M2>, tensor<8xbf16>
  } : tensor<4x8xf8E5M2>, tensor<f32>, tensor<8x4xf8E5M2>, tensor<8xbf16>
  %l = mpc.reduce_sum %0#3 dims [0] : tensor<8xbf16>
  mpc.output loss(%l : tensor<bf16>)
}

// -----

// fusion_c7: an attention group is views, then the attention.
mpc.model @fusion_c7 inputs(%x: tensor<2x16x2x8xf32>) params() {
  // expected-error@+1 {{'mpc.fusion' op of kind 'attention' expects views (reshape, transpose, slice), one attention or its gradient, and after a gradient only the reshapes, slice_grads and adds that scatter its results}}
  %0 = mpc.fusion attention {
    %y, %lse = mpc.attention %x, %x, %x scale 0.25 layout bthd : tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>
    %n = mpc.neg %y : tensor<2x16x2x8xf32>
    mpc.yield %n : tensor<2x16x2x8xf32>
  } : tensor<2x16x2x8xf32>
  %l = mpc.reduce_sum %0 dims [0, 1, 2, 3] : tensor<2x16x2x8xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c7: a quantization in an attention group is of what the kernels
// store, with current scaling (the kernels find its amax).
mpc.model @fusion_c7_delayed inputs(%x: tensor<2x16x2x16xbf16>) params() state(%t: tensor<5x1xf32> = zeros) {
  // expected-error@+1 {{'mpc.fusion' op of kind 'attention' quantizes only what its kernels store, with current scaling, and then sums only that quantization's bias}}
  %0:2 = mpc.fusion attention {
    %y, %lse = mpc.attention %x, %x, %x scale 0.25 layout bthd : tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>
    %q, %s = mpc.quantize %y delayed(%t[0] margin 0 : tensor<5x1xf32>) : tensor<2x16x2x16xbf16> to tensor<2x16x2x16xf8E4M3FN>
    mpc.yield %q, %s : tensor<2x16x2x16xf8E4M3FN>, tensor<f32>
  } : tensor<2x16x2x16xf8E4M3FN>, tensor<f32>
  mpc.output loss(%0#1 : tensor<f32>)
}

// -----

mpc.model @fusion_c7_input inputs(%x: tensor<2x16x2x16xbf16>) params() {
  // expected-error@+1 {{'mpc.fusion' op of kind 'attention' quantizes only what its kernels store, with current scaling, and then sums only that quantization's bias}}
  %0:3 = mpc.fusion attention {
    %y, %lse = mpc.attention %x, %x, %x scale 0.25 layout bthd : tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>, tensor<2x16x2x16xbf16>
    %q, %s = mpc.quantize %x : tensor<2x16x2x16xbf16> to tensor<2x16x2x16xf8E4M3FN>
    mpc.yield %y, %q, %s : tensor<2x16x2x16xbf16>, tensor<2x16x2x16xf8E4M3FN>, tensor<f32>
  } : tensor<2x16x2x16xbf16>, tensor<2x16x2x16xf8E4M3FN>, tensor<f32>
  mpc.output loss(%0#2 : tensor<f32>)
}

// -----

// fusion_c8: a classifier group is a cross-entropy and its gradient, of the
// same targets.
mpc.model @fusion_c8 inputs(%x: tensor<4x10xf32>, %y: tensor<4xi32>, %z: tensor<4xi32>) params() {
  %one = mpc.constant dense<1.0> : tensor<f32>
  // expected-error@+1 {{'mpc.fusion' op of kind 'classifier' expects a cross_entropy and a cross_entropy_grad of the same logits, targets and ignore_index}}
  %0:2 = mpc.fusion classifier {
    %l = mpc.cross_entropy %x, %y : tensor<4x10xf32>, tensor<4xi32>
    %d = mpc.cross_entropy_grad %one, %x, %z : tensor<f32>, tensor<4x10xf32>, tensor<4xi32>
    mpc.yield %l, %d : tensor<f32>, tensor<4x10xf32>
  } : tensor<f32>, tensor<4x10xf32>
  mpc.output loss(%0#0 : tensor<f32>)
}

// -----

// fusion_c9: a linear_classifier group starts with its bias-free linear.
mpc.model @fusion_c9 inputs(%x: tensor<4x8xf32>, %w: tensor<10x8xf32>, %y: tensor<4xi32>) params() {
  %one = mpc.constant dense<1.0> : tensor<f32>
  // expected-error@+1 {{'mpc.fusion' op of kind 'linear_classifier' expects a bias-free linear first, a cross_entropy and a cross_entropy_grad of the same logits, two matmuls of the gradient, at most one cast and reshapes}}
  %0:2 = mpc.fusion linear_classifier {
    %z = mpc.linear %x, %w : tensor<4x8xf32>, tensor<10x8xf32>
    %l = mpc.cross_entropy %z, %y : tensor<4x10xf32>, tensor<4xi32>
    %d = mpc.cross_entropy_grad %one, %z, %y : tensor<f32>, tensor<4x10xf32>, tensor<4xi32>
    %dx = mpc.matmul %d, %w : tensor<4x10xf32>, tensor<10x8xf32>
    mpc.yield %l, %dx : tensor<f32>, tensor<4x8xf32>
  } : tensor<f32>, tensor<4x8xf32>
  mpc.output loss(%0#0 : tensor<f32>)
}

// -----

// output_c1: extra output names are unique.
mpc.model @output_c1_duplicate inputs(%x: tensor<f32>) params() {
  // expected-error@+1 {{'mpc.output' op expects output names that are unique identifiers other than 'loss', got 'y'}}
  mpc.output loss(%x : tensor<f32>) y(%x : tensor<f32>) y(%x : tensor<f32>)
}

// -----

// output_c1: no extra output is called `loss`.
mpc.model @output_c1_loss inputs(%x: tensor<f32>) params() {
  // expected-error@+1 {{'mpc.output' op expects output names that are unique identifiers other than 'loss', got 'loss'}}
  mpc.output loss(%x : tensor<f32>) loss(%x : tensor<f32>)
}

// -----

// output_c1: names are identifiers.
mpc.model @output_c1_identifier inputs(%x: tensor<f32>) params() {
  // expected-error@+1 {{'mpc.output' op expects output names that are unique identifiers other than 'loss', got 'a$b'}}
  mpc.output loss(%x : tensor<f32>) a$b(%x : tensor<f32>)
}

// -----

// output_c1: one name per extra output.
"mpc.model"() <{sym_name = "output_c1_count", input_names = ["x"], param_names = [], param_inits = [], state_names = [], state_inits = []}> ({
^bb0(%x: tensor<f32>):
  // expected-error@+1 {{'mpc.output' op expects one name per extra output, got 0 names for 1 outputs}}
  "mpc.output"(%x, %x) <{operandSegmentSizes = array<i32: 1, 1, 0>, output_names = []}> : (tensor<f32>, tensor<f32>) -> ()
}) : () -> ()

// -----

// output_c1: `gradients` names the parameter gradients, not an output.
"mpc.model"() <{sym_name = "output_c1_gradients", input_names = ["x"], param_names = [], param_inits = [], state_names = [], state_inits = []}> ({
^bb0(%x: tensor<f32>):
  // expected-error@+1 {{'mpc.output' op expects output names other than 'gradients', which holds the parameter gradients}}
  "mpc.output"(%x, %x) <{operandSegmentSizes = array<i32: 1, 1, 0>, output_names = ["gradients"]}> : (tensor<f32>, tensor<f32>) -> ()
}) : () -> ()

// -----

// output_c1: `loc` would read back as the op's location.
"mpc.model"() <{sym_name = "output_c1_loc", input_names = ["x"], param_names = [], param_inits = [], state_names = [], state_inits = []}> ({
^bb0(%x: tensor<f32>):
  // expected-error@+1 {{'mpc.output' op expects output names other than 'loc', which reads as the op's location}}
  "mpc.output"(%x, %x) <{operandSegmentSizes = array<i32: 1, 1, 0>, output_names = ["loc"]}> : (tensor<f32>, tensor<f32>) -> ()
}) : () -> ()

// -----

// output_c3: extra outputs have rank at most 8.
mpc.model @output_c3_rank9 inputs(%x: tensor<2xf32>) params() {
  %r = mpc.reshape %x : tensor<2xf32> to tensor<1x1x1x1x1x1x1x1x2xf32>
  %c = mpc.constant dense<0.0> : tensor<f32>
  // expected-error@+1 {{'mpc.output' op expects output 'deep' to have rank at most 8, got 'tensor<1x1x1x1x1x1x1x1x2xf32>'}}
  mpc.output loss(%c : tensor<f32>) deep(%r : tensor<1x1x1x1x1x1x1x1x2xf32>)
}

// -----

// output_c2: one gradient per parameter.
mpc.model @output_c2_count inputs(%x: tensor<f32>) params(%w: tensor<f32> = zeros, %v: tensor<f32> = zeros) {
  // expected-error@+1 {{'mpc.output' op expects one gradient per parameter, got 1 for 2 parameters}}
  mpc.output loss(%x : tensor<f32>) gradients(%w : tensor<f32>)
}

// -----

// output_c2: a gradient has its parameter's type.
mpc.model @output_c2_type inputs(%x: tensor<4xf32>, %l: tensor<f32>) params(%w: tensor<2x2xf32> = zeros) {
  // expected-error@+1 {{'mpc.output' op expects the gradient of 'w' to have its type 'tensor<2x2xf32>', got 'tensor<4xf32>'}}
  mpc.output loss(%l : tensor<f32>) gradients(%x : tensor<4xf32>)
}

// -----

// The loss is a 0-d float tensor.
mpc.model @output_loss_not_scalar inputs(%x: tensor<4xf32>) params() {
  // expected-error@+1 {{'mpc.output' op operand #0 must be 0D tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xf32>'}}
  mpc.output loss(%x : tensor<4xf32>)
}

// -----

// mpc.output ends a model, nothing else.
func.func @output_outside_model(%x: tensor<f32>) {
  // expected-error@+1 {{'mpc.output' op expects parent op 'mpc.model'}}
  mpc.output loss(%x : tensor<f32>)
}

// -----

//===----------------------------------------------------------------------===//
// #mpc.init
//===----------------------------------------------------------------------===//

mpc.model @init_unknown inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' unknown initialiser 'glorot'; expected zeros, ones, constant, normal, uniform, kaiming_uniform, kaiming_normal, xavier_uniform or xavier_normal}}
    params(%w: tensor<4x4xf32> = glorot) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_zeros_args inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'zeros' takes no arguments, got 1 argument(s)}}
    params(%w: tensor<4xf32> = zeros(0)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_ones_args inputs(%x: tensor<f32>) params()
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'ones' takes no arguments, got 2 argument(s)}}
    state(%s: tensor<4xf32> = ones(1, 2)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_constant_no_args inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'constant' takes one argument (the value), got 0 argument(s)}}
    params(%w: tensor<4xf32> = constant) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_normal_no_args inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'normal' takes (std) or (mean, std), got 0 argument(s)}}
    params(%w: tensor<4xf32> = normal) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_normal_three_args inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'normal' takes (std) or (mean, std), got 3 argument(s)}}
    params(%w: tensor<4xf32> = normal(0, 1, 2)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_normal_std_zero inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'normal' needs std > 0, got 0}}
    params(%w: tensor<4xf32> = normal(0.0)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_normal_std_negative inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'normal' needs std > 0, got -0.02}}
    params(%w: tensor<4xf32> = normal(1.0, -0.02)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_uniform_one_arg inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'uniform' takes two arguments (low, high), got 1 argument(s)}}
    params(%w: tensor<4xf32> = uniform(1)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_uniform_low_high inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'uniform' needs low < high, got (0.5, -0.5)}}
    params(%w: tensor<4xf32> = uniform(0.5, -0.5)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_uniform_empty_range inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'uniform' needs low < high, got (1, 1)}}
    params(%w: tensor<4xf32> = uniform(1, 1)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_kaiming_two_args inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'kaiming_uniform' takes an optional negative slope, got 2 argument(s)}}
    params(%w: tensor<4x4xf32> = kaiming_uniform(1, 2)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_kaiming_negative_slope inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'kaiming_normal' needs a negative slope >= 0, got -1}}
    params(%w: tensor<4x4xf32> = kaiming_normal(-1)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_xavier_two_args inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'xavier_normal' takes an optional gain, got 2 argument(s)}}
    params(%w: tensor<4x4xf32> = xavier_normal(1, 2)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_xavier_gain_zero inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'xavier_uniform' needs a gain > 0, got 0}}
    params(%w: tensor<4x4xf32> = xavier_uniform(0)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_not_a_number inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' expected a number as initialiser argument, got "a"}}
    params(%w: tensor<4xf32> = constant("a")) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// A boolean is not a number (it used to read as -1).
mpc.model @init_bool inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' expected a number as initialiser argument, got true}}
    params(%w: tensor<4xf32> = constant(true)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// Infinite arguments would print as `inf`, which does not parse.
mpc.model @init_infinite inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'constant' needs finite arguments, got inf}}
    params(%w: tensor<4xf32> = constant(0x7FF0000000000000 : f64)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

mpc.model @init_nan inputs(%x: tensor<f32>)
    // expected-error@+1 {{custom op 'mpc.model' initialiser 'uniform' needs finite arguments, got nan}}
    params(%w: tensor<4xf32> = uniform(0, 0x7FF8000000000000 : f64)) {
  mpc.output loss(%x : tensor<f32>)
}

// -----

// The initialiser attribute outside a model checks the same invariants.
// expected-error@+1 {{initialiser 'normal' needs std > 0, got -1}}
func.func @init_attr_invalid() attributes {init = #mpc.init<normal(0, -1)>} {
  return
}

// -----

// expected-error@+1 {{unknown initialiser 'he'; expected zeros, ones, constant, normal, uniform, kaiming_uniform, kaiming_normal, xavier_uniform or xavier_normal}}
func.func @init_attr_unknown() attributes {init = #mpc.init<he>} {
  return
}

// -----

//===----------------------------------------------------------------------===//
// GEMM-like ops
//===----------------------------------------------------------------------===//

func.func @linear_c1_input_rank0(%x: tensor<f32>, %w: tensor<4x4xf32>) {
  // expected-error@+1 {{'mpc.linear' op expects an input of rank >= 1 and a weight of rank 2, got 'tensor<f32>' and 'tensor<4x4xf32>'}}
  %0 = mpc.linear %x, %w : tensor<f32>, tensor<4x4xf32>
  return
}

// -----

func.func @linear_c1_weight_rank3(%x: tensor<2x4xf32>, %w: tensor<2x8x4xf32>) {
  // expected-error@+1 {{'mpc.linear' op expects an input of rank >= 1 and a weight of rank 2, got 'tensor<2x4xf32>' and 'tensor<2x8x4xf32>'}}
  %0 = mpc.linear %x, %w : tensor<2x4xf32>, tensor<2x8x4xf32>
  return
}

// -----

func.func @linear_c2(%x: tensor<2x8xf32>, %w: tensor<16x4xf32>) {
  // expected-error@+1 {{'mpc.linear' op expects the input's last dim (8) to equal the weight's dim 1 (4)}}
  %0 = mpc.linear %x, %w : tensor<2x8xf32>, tensor<16x4xf32>
  return
}

// -----

// linear_c2: the weight is [N, K], not [K, N].
func.func @linear_c2_transposed_weight(%x: tensor<2x8xf32>, %w: tensor<8x16xf32>) {
  // expected-error@+1 {{'mpc.linear' op expects the input's last dim (8) to equal the weight's dim 1 (16)}}
  %0 = mpc.linear %x, %w : tensor<2x8xf32>, tensor<8x16xf32>
  return
}

// -----

func.func @linear_c3(%x: tensor<2x8xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) {
  // expected-error@+1 {{'mpc.linear' op expects a bias of shape [16], got 'tensor<8xf32>'}}
  %0 = mpc.linear %x, %w, %b : tensor<2x8xf32>, tensor<16x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @linear_c3_bias_rank2(%x: tensor<2x8xf32>, %w: tensor<16x8xf32>, %b: tensor<1x16xf32>) {
  // expected-error@+1 {{'mpc.linear' op expects a bias of shape [16], got 'tensor<1x16xf32>'}}
  %0 = mpc.linear %x, %w, %b : tensor<2x8xf32>, tensor<16x8xf32>, tensor<1x16xf32>
  return
}

// -----

func.func @linear_c4(%x: tensor<2x8xf32>, %w: tensor<16x8xf16>) {
  // expected-error@+1 {{'mpc.linear' op expects operands of one element type, got 'tensor<2x8xf32>' and 'tensor<16x8xf16>'}}
  %0 = mpc.linear %x, %w : tensor<2x8xf32>, tensor<16x8xf16>
  return
}

// -----

func.func @linear_c4_bias(%x: tensor<2x8xbf16>, %w: tensor<16x8xbf16>, %b: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.linear' op expects operands of one element type, got 'tensor<2x8xbf16>' and bias 'tensor<16xf32>'}}
  %0 = mpc.linear %x, %w, %b : tensor<2x8xbf16>, tensor<16x8xbf16>, tensor<16xf32>
  return
}

// -----

func.func @linear_dynamic(%x: tensor<?x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error@+1 {{'mpc.linear' op expects the input to be a statically shaped tensor, got 'tensor<?x8xf32>'}}
  %0 = mpc.linear %x, %w : tensor<?x8xf32>, tensor<16x8xf32>
  return
}

// -----

func.func @linear_integer(%x: tensor<2x8xi32>, %w: tensor<16x8xi32>) {
  // expected-error@+1 {{'mpc.linear' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<2x8xi32>'}}
  %0 = mpc.linear %x, %w : tensor<2x8xi32>, tensor<16x8xi32>
  return
}

// -----

// In the generic form the result type is written out and must be the inferred one.
func.func @linear_wrong_result(%x: tensor<2x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error@+2 {{'mpc.linear' op inferred type(s) 'tensor<2x16xf32>' are incompatible with return type(s) of operation 'tensor<2x8xf32>'}}
  // expected-error@+1 {{'mpc.linear' op failed to infer returned types}}
  %0 = "mpc.linear"(%x, %w) : (tensor<2x8xf32>, tensor<16x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @matmul_c1(%a: tensor<2x4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error@+1 {{'mpc.matmul' op expects operands of rank 2, got 'tensor<2x4x8xf32>' and 'tensor<8x2xf32>'}}
  %0 = mpc.matmul %a, %b : tensor<2x4x8xf32>, tensor<8x2xf32>
  return
}

// -----

func.func @matmul_c1_rhs(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  // expected-error@+1 {{'mpc.matmul' op expects operands of rank 2, got 'tensor<4x8xf32>' and 'tensor<8xf32>'}}
  %0 = mpc.matmul %a, %b : tensor<4x8xf32>, tensor<8xf32>
  return
}

// -----

func.func @quantize_c1(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{'mpc.quantize' op expects a result of the input's shape 'tensor<4x8xbf16>', got 'tensor<8x4xf8E4M3FN>'}}
  %q, %s = mpc.quantize %x : tensor<4x8xbf16> to tensor<8x4xf8E4M3FN>
  return
}

// -----

func.func @quantize_c1_transposed(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{'mpc.quantize' op expects a transposed copy of type 'tensor<8x4xf8E4M3FN>', got 'tensor<4x8xf8E4M3FN>'}}
  %q, %s, %t = mpc.quantize %x : tensor<4x8xbf16> to tensor<4x8xf8E4M3FN> transposed tensor<4x8xf8E4M3FN>
  return
}

// -----

func.func @quantize_c2_table(%x: tensor<4x8xbf16>, %t: tensor<2x3xf32>) {
  // expected-error@+1 {{'mpc.quantize' op expects a delayed-scaling table of f32 [4 + history, tensors] with a history of at least 1, got 'tensor<2x3xf32>'}}
  %q, %s = mpc.quantize %x delayed(%t[0] margin 0 : tensor<2x3xf32>) : tensor<4x8xbf16> to tensor<4x8xf8E4M3FN>
  return
}

// -----

func.func @quantize_c2_index(%x: tensor<4x8xbf16>, %t: tensor<5x3xf32>) {
  // expected-error@+1 {{'mpc.quantize' op expects an index in [0, 3), got 3}}
  %q, %s = mpc.quantize %x delayed(%t[3] margin 0 : tensor<5x3xf32>) : tensor<4x8xbf16> to tensor<4x8xf8E4M3FN>
  return
}

// -----

func.func @quantize_c2_margin(%x: tensor<4x8xbf16>, %t: tensor<5x3xf32>) {
  // expected-error@+1 {{'mpc.quantize' op expects a margin in [0, 32], got 33}}
  %q, %s = mpc.quantize %x delayed(%t[0] margin 33 : tensor<5x3xf32>) : tensor<4x8xbf16> to tensor<4x8xf8E4M3FN>
  return
}

// -----

func.func @quantize_c2_unscaled(%x: tensor<4x8xbf16>, %t: tensor<5x3xf32>) {
  // expected-error@+1 {{'mpc.quantize' op expects 'delayed' or 'unscaled', not both}}
  %q, %s = mpc.quantize %x unscaled delayed(%t[0] margin 0 : tensor<5x3xf32>) : tensor<4x8xbf16> to tensor<4x8xf8E4M3FN>
  return
}

// -----

func.func @quantize_c2_missing_index(%x: tensor<4x8xbf16>, %t: tensor<5x3xf32>) {
  // expected-error@+1 {{'mpc.quantize' op expects an index and a margin with 'delayed'}}
  %q, %s = "mpc.quantize"(%x, %t) : (tensor<4x8xbf16>, tensor<5x3xf32>) -> (tensor<4x8xf8E4M3FN>, tensor<f32>)
  return
}

// -----

// model_c5: two quantizations of one column of the table.
// expected-note@+1 {{state defined here}}
mpc.model @shared_column inputs(%x: tensor<4x16xbf16>) params(%w: tensor<16x16xbf16> = zeros) state(%t: tensor<5x2xf32> = zeros) {
  %q, %s = mpc.quantize %x delayed(%t[0] margin 0 : tensor<5x2xf32>) : tensor<4x16xbf16> to tensor<4x16xf8E4M3FN>
  // expected-error@+1 {{'mpc.quantize' op uses column 0 of state 't', which another quantize uses}}
  %r, %u = mpc.quantize %w delayed(%t[0] margin 0 : tensor<5x2xf32>) : tensor<16x16xbf16> to tensor<16x16xf8E4M3FN>
  %y = mpc.scaled_matmul %q[%s], %r[%u] : tensor<4x16xf8E4M3FN>, tensor<16x16xf8E4M3FN> -> tensor<4x16xbf16>
  %l = mpc.reduce_sum %y dims [0, 1] : tensor<4x16xbf16>
  mpc.output loss(%l : tensor<bf16>)
}

// -----

func.func @scaled_matmul_c1(%a: tensor<2x4x8xf8E4M3FN>, %b: tensor<2x8xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error@+1 {{'mpc.scaled_matmul' op expects rank-2 operands, got 'tensor<2x4x8xf8E4M3FN>' and 'tensor<2x8xf8E4M3FN>'}}
  %0 = mpc.scaled_matmul %a[%s], %b[%s] : tensor<2x4x8xf8E4M3FN>, tensor<2x8xf8E4M3FN> -> tensor<4x2xbf16>
  return
}

// -----

func.func @scaled_matmul_c2(%a: tensor<4x8xf8E4M3FN>, %b: tensor<8x2xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error@+1 {{'mpc.scaled_matmul' op expects contracted dims to agree, got 8 and 2}}
  %0 = mpc.scaled_matmul %a[%s], %b[%s] : tensor<4x8xf8E4M3FN>, tensor<8x2xf8E4M3FN> -> tensor<4x8xbf16>
  return
}

// -----

func.func @scaled_matmul_c3(%a: tensor<4x8xf8E4M3FN>, %b: tensor<2x8xf8E4M3FN>, %s: tensor<f32>) {
  // expected-error@+1 {{'mpc.scaled_matmul' op expects a result of shape [4, 2], got 'tensor<2x4xbf16>'}}
  %0 = mpc.scaled_matmul %a[%s], %b[%s] : tensor<4x8xf8E4M3FN>, tensor<2x8xf8E4M3FN> -> tensor<2x4xbf16>
  return
}

// -----

func.func @scaled_matmul_c4(%a: tensor<4x8xf8E5M2>, %b: tensor<2x8xf8E5M2>, %s: tensor<f32>) {
  // expected-error@+1 {{'mpc.scaled_matmul' op expects at most one e5m2 operand: FP8 tensor cores do not multiply two}}
  %0 = mpc.scaled_matmul %a[%s], %b[%s] : tensor<4x8xf8E5M2>, tensor<2x8xf8E5M2> -> tensor<4x2xbf16>
  return
}

// -----

func.func @scaled_matmul_c5(%a: tensor<4x8xf8E4M3FN>, %b: tensor<2x8xf8E4M3FN>, %s: tensor<f32>, %bias: tensor<2xf32>) {
  // expected-error@+1 {{'mpc.scaled_matmul' op expects a bias of shape [2] and 'bf16', got 'tensor<2xf32>'}}
  %0 = mpc.scaled_matmul %a[%s], %b[%s] bias %bias : tensor<4x8xf8E4M3FN>, tensor<2x8xf8E4M3FN>, tensor<2xf32> -> tensor<4x2xbf16>
  return
}

// -----

func.func @matmul_c2(%a: tensor<4x8xf32>, %b: tensor<4x2xf32>) {
  // expected-error@+1 {{'mpc.matmul' op expects contracted dims to agree, got 8 and 4 ('tensor<4x8xf32>' and 'tensor<4x2xf32>')}}
  %0 = mpc.matmul %a, %b : tensor<4x8xf32>, tensor<4x2xf32>
  return
}

// -----

// matmul_c2: transpose_rhs contracts the rhs's dim 1.
func.func @matmul_c2_transpose_rhs(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error@+1 {{'mpc.matmul' op expects contracted dims to agree, got 8 and 2 ('tensor<4x8xf32>' and 'tensor<8x2xf32>')}}
  %0 = mpc.matmul %a, %b transpose_rhs : tensor<4x8xf32>, tensor<8x2xf32>
  return
}

// -----

// matmul_c2: transpose_lhs contracts the lhs's dim 0.
func.func @matmul_c2_transpose_lhs(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error@+1 {{'mpc.matmul' op expects contracted dims to agree, got 4 and 8 ('tensor<4x8xf32>' and 'tensor<8x2xf32>')}}
  %0 = mpc.matmul %a, %b transpose_lhs : tensor<4x8xf32>, tensor<8x2xf32>
  return
}

// -----

func.func @matmul_c3(%a: tensor<4x8xf16>, %b: tensor<8x2xbf16>) {
  // expected-error@+1 {{'mpc.matmul' op expects operands of one element type, got 'tensor<4x8xf16>' and 'tensor<8x2xbf16>'}}
  %0 = mpc.matmul %a, %b : tensor<4x8xf16>, tensor<8x2xbf16>
  return
}

// -----

func.func @batch_matmul_c1(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) {
  // expected-error@+1 {{'mpc.batch_matmul' op expects operands of the same rank, at least 3, got 'tensor<4x8xf32>' and 'tensor<8x2xf32>'}}
  %0 = mpc.batch_matmul %a, %b : tensor<4x8xf32>, tensor<8x2xf32>
  return
}

// -----

func.func @batch_matmul_c1_rank_mismatch(%a: tensor<3x4x8xf32>, %b: tensor<2x3x8x2xf32>) {
  // expected-error@+1 {{'mpc.batch_matmul' op expects operands of the same rank, at least 3, got 'tensor<3x4x8xf32>' and 'tensor<2x3x8x2xf32>'}}
  %0 = mpc.batch_matmul %a, %b : tensor<3x4x8xf32>, tensor<2x3x8x2xf32>
  return
}

// -----

func.func @batch_matmul_c2(%a: tensor<4x2x16x8xf32>, %b: tensor<4x3x8x16xf32>) {
  // expected-error@+1 {{'mpc.batch_matmul' op expects equal batch dims, got [4, 2] and [4, 3]}}
  %0 = mpc.batch_matmul %a, %b : tensor<4x2x16x8xf32>, tensor<4x3x8x16xf32>
  return
}

// -----

// batch_matmul_c2: batch dims do not broadcast.
func.func @batch_matmul_c2_no_broadcast(%a: tensor<1x16x8xf32>, %b: tensor<3x8x16xf32>) {
  // expected-error@+1 {{'mpc.batch_matmul' op expects equal batch dims, got [1] and [3]}}
  %0 = mpc.batch_matmul %a, %b : tensor<1x16x8xf32>, tensor<3x8x16xf32>
  return
}

// -----

func.func @batch_matmul_c3(%q: tensor<4x16x32xf32>, %k: tensor<4x16x32xf32>) {
  // expected-error@+1 {{'mpc.batch_matmul' op expects contracted dims to agree, got 32 and 16 ('tensor<4x16x32xf32>' and 'tensor<4x16x32xf32>')}}
  %0 = mpc.batch_matmul %q, %k : tensor<4x16x32xf32>, tensor<4x16x32xf32>
  return
}

// -----

func.func @batch_matmul_c4(%a: tensor<2x4x8xf32>, %b: tensor<2x8x2xf16>) {
  // expected-error@+1 {{'mpc.batch_matmul' op expects operands of one element type, got 'tensor<2x4x8xf32>' and 'tensor<2x8x2xf16>'}}
  %0 = mpc.batch_matmul %a, %b : tensor<2x4x8xf32>, tensor<2x8x2xf16>
  return
}

// -----

func.func @conv2d_c1(%x: tensor<3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects an NCHW input and an OIHW weight of rank 4, got 'tensor<3x32x32xf32>' and 'tensor<16x3x3x3xf32>'}}
  %0 = mpc.conv2d %x, %w : tensor<3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv2d_c1_weight(%x: tensor<1x3x32x32xf32>, %w: tensor<16x27xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects an NCHW input and an OIHW weight of rank 4, got 'tensor<1x3x32x32xf32>' and 'tensor<16x27xf32>'}}
  %0 = mpc.conv2d %x, %w : tensor<1x3x32x32xf32>, tensor<16x27xf32>
  return
}

// -----

func.func @conv2d_c2_stride_entries(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects stride to have 2 entries (height, width), got 3}}
  %0 = mpc.conv2d %x, %w stride [1, 1, 1] : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv2d_c2_stride_zero(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects stride entries >= 1, got [1, 0]}}
  %0 = mpc.conv2d %x, %w stride [1, 0] : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv2d_c2_padding_entries(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects padding to have 2 entries (height, width), got 1}}
  %0 = mpc.conv2d %x, %w padding [1] : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv2d_c2_padding_negative(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects padding entries >= 0, got [-1, 0]}}
  %0 = mpc.conv2d %x, %w padding [-1, 0] : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv2d_c2_dilation_entries(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects dilation to have 2 entries (height, width), got 0}}
  %0 = mpc.conv2d %x, %w dilation [] : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv2d_c2_dilation_zero(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects dilation entries >= 1, got [0, 1]}}
  %0 = mpc.conv2d %x, %w dilation [0, 1] : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv2d_c2_groups(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects groups >= 1, got 0}}
  %0 = mpc.conv2d %x, %w groups 0 : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

func.func @conv2d_c3_groups_divide_input(%x: tensor<1x3x32x32xf32>, %w: tensor<4x1x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects groups (2) to divide the input channels (3) and the output channels (4)}}
  %0 = mpc.conv2d %x, %w groups 2 : tensor<1x3x32x32xf32>, tensor<4x1x3x3xf32>
  return
}

// -----

func.func @conv2d_c3_groups_divide_output(%x: tensor<1x4x32x32xf32>, %w: tensor<3x2x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects groups (2) to divide the input channels (4) and the output channels (3)}}
  %0 = mpc.conv2d %x, %w groups 2 : tensor<1x4x32x32xf32>, tensor<3x2x3x3xf32>
  return
}

// -----

func.func @conv2d_c3(%x: tensor<1x4x32x32xf32>, %w: tensor<8x4x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects weight dim 1 to be input channels / groups = 2, got 4}}
  %0 = mpc.conv2d %x, %w groups 2 : tensor<1x4x32x32xf32>, tensor<8x4x3x3xf32>
  return
}

// -----

func.func @conv2d_c4(%x: tensor<1x3x32x32xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects a bias of shape [16], got 'tensor<3xf32>'}}
  %0 = mpc.conv2d %x, %w, %b : tensor<1x3x32x32xf32>, tensor<16x3x3x3xf32>, tensor<3xf32>
  return
}

// -----

func.func @conv2d_c5(%x: tensor<1x3x4x4xf32>, %w: tensor<16x3x5x5xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects a kernel that fits the padded input, got input 'tensor<1x3x4x4xf32>' and weight 'tensor<16x3x5x5xf32>'}}
  %0 = mpc.conv2d %x, %w : tensor<1x3x4x4xf32>, tensor<16x3x5x5xf32>
  return
}

// -----

// conv2d_c5: an empty kernel has no window.
func.func @conv2d_c5_empty_kernel(%x: tensor<1x3x4x4xf32>, %w: tensor<16x3x0x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects a kernel of at least 1x1, got weight 'tensor<16x3x0x3xf32>'}}
  %0 = mpc.conv2d %x, %w : tensor<1x3x4x4xf32>, tensor<16x3x0x3xf32>
  return
}

// -----

// conv2d_c5: dilation widens the kernel: 2 * (3 - 1) + 1 = 5 > 4.
func.func @conv2d_c5_dilation(%x: tensor<1x3x4x8xf32>, %w: tensor<16x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects a kernel that fits the padded input, got input 'tensor<1x3x4x8xf32>' and weight 'tensor<16x3x3x3xf32>'}}
  %0 = mpc.conv2d %x, %w dilation [2, 2] : tensor<1x3x4x8xf32>, tensor<16x3x3x3xf32>
  return
}

// -----

// conv2d_c5: window arithmetic that would overflow int64 is an error, not a
// wrapped-around extent.
func.func @conv2d_c5_overflow(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects padding [4611686018427387904, 0] and dilation [1, 1] to give output extents that fit in 64 bits}}
  %0 = mpc.conv2d %x, %w padding [4611686018427387904, 0] : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @conv2d_c5_dilation_overflow(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects padding [0, 0] and dilation [1, 4611686018427387904] to give output extents that fit in 64 bits}}
  %0 = mpc.conv2d %x, %w dilation [1, 4611686018427387904] : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @conv2d_c6(%x: tensor<1x3x8x8xf32>, %w: tensor<16x3x3x3xbf16>) {
  // expected-error@+1 {{'mpc.conv2d' op expects operands of one element type, got 'tensor<1x3x8x8xf32>' and 'tensor<16x3x3x3xbf16>'}}
  %0 = mpc.conv2d %x, %w : tensor<1x3x8x8xf32>, tensor<16x3x3x3xbf16>
  return
}

// -----

func.func @conv2d_c6_bias(%x: tensor<1x3x8x8xf16>, %w: tensor<16x3x3x3xf16>, %b: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.conv2d' op expects operands of one element type, got 'tensor<1x3x8x8xf16>' and bias 'tensor<16xf32>'}}
  %0 = mpc.conv2d %x, %w, %b : tensor<1x3x8x8xf16>, tensor<16x3x3x3xf16>, tensor<16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

func.func @add_c1(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error@+1 {{'mpc.add' op expects operands of one element type, got 'tensor<4xf32>' and 'tensor<4xf16>'}}
  %0 = mpc.add %a, %b : tensor<4xf32>, tensor<4xf16>
  return
}

// -----

func.func @add_c2(%a: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.add' op expects broadcastable shapes, got 'tensor<4x8xf32>' and 'tensor<4xf32>'}}
  %0 = mpc.add %a, %b : tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @sub_c1(%a: tensor<4xbf16>, %b: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.sub' op expects operands of one element type, got 'tensor<4xbf16>' and 'tensor<4xf32>'}}
  %0 = mpc.sub %a, %b : tensor<4xbf16>, tensor<4xf32>
  return
}

// -----

func.func @sub_c2(%a: tensor<2x3xf32>, %b: tensor<5x2xf32>) {
  // expected-error@+1 {{'mpc.sub' op expects broadcastable shapes, got 'tensor<2x3xf32>' and 'tensor<5x2xf32>'}}
  %0 = mpc.sub %a, %b : tensor<2x3xf32>, tensor<5x2xf32>
  return
}

// -----

func.func @mul_c1(%a: tensor<f16>, %b: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.mul' op expects operands of one element type, got 'tensor<f16>' and 'tensor<4xf32>'}}
  %0 = mpc.mul %a, %b : tensor<f16>, tensor<4xf32>
  return
}

// -----

func.func @mul_c2(%a: tensor<2x4xf32>, %b: tensor<3x1xf32>) {
  // expected-error@+1 {{'mpc.mul' op expects broadcastable shapes, got 'tensor<2x4xf32>' and 'tensor<3x1xf32>'}}
  %0 = mpc.mul %a, %b : tensor<2x4xf32>, tensor<3x1xf32>
  return
}

// -----

func.func @div_c1(%a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error@+1 {{'mpc.div' op expects operands of one element type, got 'tensor<4xf32>' and 'tensor<4xbf16>'}}
  %0 = mpc.div %a, %b : tensor<4xf32>, tensor<4xbf16>
  return
}

// -----

func.func @div_c2(%a: tensor<5xf16>, %b: tensor<4xf16>) {
  // expected-error@+1 {{'mpc.div' op expects broadcastable shapes, got 'tensor<5xf16>' and 'tensor<4xf16>'}}
  %0 = mpc.div %a, %b : tensor<5xf16>, tensor<4xf16>
  return
}

// -----

func.func @add_integer(%a: tensor<4xi32>, %b: tensor<4xi32>) {
  // expected-error@+1 {{'mpc.add' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = mpc.add %a, %b : tensor<4xi32>, tensor<4xi32>
  return
}

// -----

func.func @sub_dynamic(%a: tensor<4xf32>, %b: tensor<?xf32>) {
  // expected-error@+1 {{'mpc.sub' op expects the rhs to be a statically shaped tensor, got 'tensor<?xf32>'}}
  %0 = mpc.sub %a, %b : tensor<4xf32>, tensor<?xf32>
  return
}

// -----

func.func @relu_integer(%x: tensor<4xi32>) {
  // expected-error@+1 {{'mpc.relu' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = mpc.relu %x : tensor<4xi32>
  return
}

// -----

func.func @exp_f64(%x: tensor<4xf64>) {
  // expected-error@+1 {{'mpc.exp' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xf64>'}}
  %0 = mpc.exp %x : tensor<4xf64>
  return
}

// -----

func.func @tanh_dynamic(%x: tensor<?x4xf32>) {
  // expected-error@+1 {{'mpc.tanh' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<?x4xf32>'}}
  %0 = mpc.tanh %x : tensor<?x4xf32>
  return
}

// -----

// The custom form's parser takes ranked tensors only.
func.func @sigmoid_unranked(%x: tensor<*xf32>) {
  // expected-error@+1 {{custom op 'mpc.sigmoid' invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
  %0 = mpc.sigmoid %x : tensor<*xf32>
  return
}

// -----

func.func @sigmoid_unranked_generic(%x: tensor<*xf32>) {
  // expected-error@+1 {{'mpc.sigmoid' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<*xf32>'}}
  %0 = "mpc.sigmoid"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @neg_not_tensor(%x: f32) {
  // expected-error@+1 {{custom op 'mpc.neg' invalid kind of type specified: expected builtin.tensor, but found 'f32'}}
  %0 = mpc.neg %x : f32
  return
}

// -----

func.func @neg_not_tensor_generic(%x: f32) {
  // expected-error@+1 {{'mpc.neg' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'f32'}}
  %0 = "mpc.neg"(%x) : (f32) -> f32
  return
}

// -----

// Unary ops keep their type; the generic form can try to change it.
func.func @log_result_type(%x: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.log' op requires the same type for all operands and results}}
  %0 = "mpc.log"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @sqrt_integer(%x: tensor<i64>) {
  // expected-error@+1 {{'mpc.sqrt' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<i64>'}}
  %0 = mpc.sqrt %x : tensor<i64>
  return
}

// -----

func.func @rsqrt_memref(%x: memref<4xf32>) {
  // expected-error@+1 {{custom op 'mpc.rsqrt' invalid kind of type specified: expected builtin.tensor, but found 'memref<4xf32>'}}
  %0 = mpc.rsqrt %x : memref<4xf32>
  return
}

// -----

func.func @gelu_unknown_approximation(%x: tensor<4xf32>) {
  // expected-error@+1 {{custom op 'mpc.gelu' expected string or keyword containing one of the following enum values for attribute 'approximate' [erf, tanh]}}
  %0 = mpc.gelu %x approximate sigmoid : tensor<4xf32>
  return
}

// -----

func.func @gelu_integer(%x: tensor<4xi32>) {
  // expected-error@+1 {{'mpc.gelu' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = mpc.gelu %x : tensor<4xi32>
  return
}

// -----

// clamp_c1
func.func @clamp_c1(%x: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.clamp' op expects a min, a max or both}}
  %0 = mpc.clamp %x : tensor<4xf32>
  return
}

// -----

// clamp_c2
func.func @clamp_c2_inf(%x: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.clamp' op expects a max that is finite in f32, got inf}}
  %0 = mpc.clamp %x min 0.0 max 0x7FF0000000000000 : tensor<4xf32>
  return
}

// -----

func.func @clamp_c2_f32_overflow(%x: tensor<4xbf16>) {
  // expected-error@+1 {{'mpc.clamp' op expects a min that is finite in f32, got -1.0e+39}}
  %0 = mpc.clamp %x min -1.0e39 : tensor<4xbf16>
  return
}

// -----

func.func @clamp_c2_order(%x: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.clamp' op expects min <= max, got min 6 and max 0}}
  %0 = mpc.clamp %x min 6.0 max 0.0 : tensor<4xf32>
  return
}

// -----

// scale_c1
func.func @scale_c1_inf(%x: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.scale' op expects a factor that is finite in f32, got inf}}
  %0 = mpc.scale %x by 0x7FF0000000000000 : tensor<4xf32>
  return
}

// -----

func.func @scale_c1_nan(%x: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.scale' op expects a factor that is finite in f32, got nan}}
  %0 = mpc.scale %x by 0x7FF8000000000000 : tensor<4xf32>
  return
}

// -----

// Finite as a double, inf in f32, where kernels multiply (regression: the
// generated C++ printed it as `INFf` and did not compile).
func.func @scale_c1_f32_overflow(%x: tensor<4xbf16>) {
  // expected-error@+1 {{'mpc.scale' op expects a factor that is finite in f32, got 1.0e+39}}
  %0 = mpc.scale %x by 1.0e39 : tensor<4xbf16>
  return
}

// -----

func.func @scale_integer(%x: tensor<4xi32>) {
  // expected-error@+1 {{'mpc.scale' op operand #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = mpc.scale %x by 2.0 : tensor<4xi32>
  return
}

// -----

func.func @where_c1(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error@+1 {{'mpc.where' op expects on_true and on_false of one element type, got 'tensor<4xf32>' and 'tensor<4xf16>'}}
  %0 = mpc.where %c, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xf16>
  return
}

// -----

// where_c2: the condition takes part in the broadcast.
func.func @where_c2(%c: tensor<3xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.where' op expects broadcastable shapes, got 'tensor<3xi1>', 'tensor<4xf32>' and 'tensor<4xf32>'}}
  %0 = mpc.where %c, %a, %b : tensor<3xi1>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @where_c2_branches(%c: tensor<i1>, %a: tensor<2x4xf32>, %b: tensor<3x1xf32>) {
  // expected-error@+1 {{'mpc.where' op expects broadcastable shapes, got 'tensor<i1>', 'tensor<2x4xf32>' and 'tensor<3x1xf32>'}}
  %0 = mpc.where %c, %a, %b : tensor<i1>, tensor<2x4xf32>, tensor<3x1xf32>
  return
}

// -----

func.func @where_float_condition(%c: tensor<4xf32>, %a: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.where' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = mpc.where %c, %a, %a : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @dropout_c1(%x: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.dropout' op expects 0 <= rate < 1 in f32, got 1}}
  %0 = mpc.dropout %x rate 1.0 : tensor<4xf32>
  return
}

// -----

func.func @dropout_c1_negative(%x: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.dropout' op expects 0 <= rate < 1 in f32, got -0.1}}
  %0 = mpc.dropout %x rate -0.1 seed 3 : tensor<4xf32>
  return
}

// -----

func.func @cast_c1(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.cast' op expects input and result of one shape, got 'tensor<4x8xf32>' and 'tensor<8x4xf16>'}}
  %0 = mpc.cast %x : tensor<4x8xf32> to tensor<8x4xf16>
  return
}

// -----

func.func @cast_integer(%x: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.cast' op result #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<4xi32>'}}
  %0 = mpc.cast %x : tensor<4xf32> to tensor<4xi32>
  return
}

// -----

func.func @constant_integer() {
  // expected-error@+1 {{'mpc.constant' op result #0 must be statically shaped tensor of 32-bit float or 16-bit float or bfloat16 type values, but got 'tensor<i32>'}}
  %0 = mpc.constant dense<1> : tensor<i32>
  return
}

// -----

// The value's type is the result type.
func.func @constant_type_mismatch() {
  // expected-error@+1 {{'mpc.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "mpc.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<2xf16>
  return
}

// -----

func.func @causal_mask_c1() {
  // expected-error@+1 {{'mpc.causal_mask' op expects a result of rank >= 2 whose last two dims are equal, got 'tensor<16x8xi1>'}}
  %0 = mpc.causal_mask : tensor<16x8xi1>
  return
}

// -----

func.func @causal_mask_c1_rank1() {
  // expected-error@+1 {{'mpc.causal_mask' op expects a result of rank >= 2 whose last two dims are equal, got 'tensor<16xi1>'}}
  %0 = mpc.causal_mask : tensor<16xi1>
  return
}

// -----

func.func @causal_mask_not_bool() {
  // expected-error@+1 {{'mpc.causal_mask' op result #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<16x16xf32>'}}
  %0 = mpc.causal_mask : tensor<16x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

func.func @reduce_sum_c1(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.reduce_sum' op expects at least one dim to reduce}}
  %0 = mpc.reduce_sum %x dims [] : tensor<4x8xf32>
  return
}

// -----

func.func @reduce_sum_c1_range(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.reduce_sum' op expects dims in [0, 2), got 2}}
  %0 = mpc.reduce_sum %x dims [2] : tensor<4x8xf32>
  return
}

// -----

func.func @reduce_sum_c1_negative(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.reduce_sum' op expects dims in [0, 2), got -1}}
  %0 = mpc.reduce_sum %x dims [-1] : tensor<4x8xf32>
  return
}

// -----

func.func @reduce_sum_c1_twice(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.reduce_sum' op expects each dim once, got 1 twice}}
  %0 = mpc.reduce_sum %x dims [1, 0, 1] : tensor<4x8xf32>
  return
}

// -----

func.func @reduce_mean_c1(%x: tensor<4x8xf16>) {
  // expected-error@+1 {{'mpc.reduce_mean' op expects at least one dim to reduce}}
  %0 = mpc.reduce_mean %x dims [] keepdim : tensor<4x8xf16>
  return
}

// -----

func.func @reduce_mean_c1_range(%x: tensor<f32>) {
  // expected-error@+1 {{'mpc.reduce_mean' op expects dims in [0, 0), got 0}}
  %0 = mpc.reduce_mean %x dims [0] : tensor<f32>
  return
}

// -----

func.func @reduce_mean_c1_twice(%x: tensor<4x8xf16>) {
  // expected-error@+1 {{'mpc.reduce_mean' op expects each dim once, got 0 twice}}
  %0 = mpc.reduce_mean %x dims [0, 0] : tensor<4x8xf16>
  return
}

// -----

func.func @reduce_max_c1(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{'mpc.reduce_max' op expects at least one dim to reduce}}
  %0 = mpc.reduce_max %x dims [] : tensor<4x8xbf16>
  return
}

// -----

func.func @reduce_max_c1_range(%x: tensor<4x8xbf16>) {
  // expected-error@+1 {{'mpc.reduce_max' op expects dims in [0, 2), got 5}}
  %0 = mpc.reduce_max %x dims [0, 5] keepdim : tensor<4x8xbf16>
  return
}

// -----

func.func @reduce_max_c1_twice(%x: tensor<4x8x2xbf16>) {
  // expected-error@+1 {{'mpc.reduce_max' op expects each dim once, got 2 twice}}
  %0 = mpc.reduce_max %x dims [2, 1, 2] : tensor<4x8x2xbf16>
  return
}

// -----

func.func @softmax_c1(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.softmax' op expects dim in [0, 2), got 2}}
  %0 = mpc.softmax %x dim 2 : tensor<4x8xf32>
  return
}

// -----

func.func @softmax_c1_negative(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.softmax' op expects dim in [0, 2), got -1}}
  %0 = mpc.softmax %x dim -1 : tensor<4x8xf32>
  return
}

// -----

func.func @softmax_c1_scalar(%x: tensor<f32>) {
  // expected-error@+1 {{'mpc.softmax' op expects dim in [0, 0), got 0}}
  %0 = mpc.softmax %x dim 0 : tensor<f32>
  return
}

// -----

func.func @log_softmax_c1(%x: tensor<64x10xf32>) {
  // expected-error@+1 {{'mpc.log_softmax' op expects dim in [0, 2), got 3}}
  %0 = mpc.log_softmax %x dim 3 : tensor<64x10xf32>
  return
}

// -----

func.func @log_softmax_c1_negative(%x: tensor<64x10xf32>) {
  // expected-error@+1 {{'mpc.log_softmax' op expects dim in [0, 2), got -2}}
  %0 = mpc.log_softmax %x dim -2 : tensor<64x10xf32>
  return
}

// -----

func.func @rms_norm_c1(%x: tensor<4x16x64xf32>, %g: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.rms_norm' op expects gamma's shape to equal the trailing dims of the input, got 'tensor<16xf32>' for 'tensor<4x16x64xf32>'}}
  %0 = mpc.rms_norm %x, %g : tensor<4x16x64xf32>, tensor<16xf32>
  return
}

// -----

func.func @rms_norm_c2(%x: tensor<4x64xf16>, %g: tensor<64xbf16>) {
  // expected-error@+1 {{'mpc.rms_norm' op expects gamma of the input's element type or f32, got 'tensor<64xbf16>' for 'tensor<4x64xf16>'}}
  %0 = mpc.rms_norm %x, %g : tensor<4x64xf16>, tensor<64xbf16>
  return
}

// -----

func.func @rms_norm_c3(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error@+1 {{'mpc.rms_norm' op expects eps > 0 and finite in f32, got 0}}
  %0 = mpc.rms_norm %x, %g eps 0.0 : tensor<4x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @layer_norm_c1(%x: tensor<4x16x64xf32>, %g: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.layer_norm' op expects gamma's shape to equal the trailing dims of the input, got 'tensor<16xf32>' for 'tensor<4x16x64xf32>'}}
  %0 = mpc.layer_norm %x, %g, %g : tensor<4x16x64xf32>, tensor<16xf32>
  return
}

// -----

func.func @layer_norm_c1_rank(%x: tensor<64xf32>, %g: tensor<2x64xf32>) {
  // expected-error@+1 {{'mpc.layer_norm' op expects gamma's shape to equal the trailing dims of the input, got 'tensor<2x64xf32>' for 'tensor<64xf32>'}}
  %0 = mpc.layer_norm %x, %g, %g : tensor<64xf32>, tensor<2x64xf32>
  return
}

// -----

func.func @layer_norm_c1_scalar_gamma(%x: tensor<4x64xf32>, %g: tensor<f32>) {
  // expected-error@+1 {{'mpc.layer_norm' op expects gamma's shape to equal the trailing dims of the input, got 'tensor<f32>' for 'tensor<4x64xf32>'}}
  %0 = mpc.layer_norm %x, %g, %g : tensor<4x64xf32>, tensor<f32>
  return
}

// -----

func.func @layer_norm_c2(%x: tensor<4x64xf16>, %g: tensor<64xbf16>) {
  // expected-error@+1 {{'mpc.layer_norm' op expects gamma of the input's element type or f32, got 'tensor<64xbf16>' for 'tensor<4x64xf16>'}}
  %0 = mpc.layer_norm %x, %g, %g : tensor<4x64xf16>, tensor<64xbf16>
  return
}

// -----

func.func @layer_norm_c3(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error@+1 {{'mpc.layer_norm' op expects eps > 0 and finite in f32, got 0}}
  %0 = mpc.layer_norm %x, %g, %g eps 0.0 : tensor<4x64xf32>, tensor<64xf32>
  return
}

// -----

func.func @layer_norm_c3_negative(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error@+1 {{'mpc.layer_norm' op expects eps > 0 and finite in f32, got -1}}
  %0 = mpc.layer_norm %x, %g, %g eps -1.0 : tensor<4x64xf32>, tensor<64xf32>
  return
}

// -----

// 1e-50 is 0 in f32, where kernels add it to the variance.
func.func @layer_norm_c3_f32_underflow(%x: tensor<4x64xf32>, %g: tensor<64xf32>) {
  // expected-error@+1 {{'mpc.layer_norm' op expects eps > 0 and finite in f32, got 1.0e-50}}
  %0 = mpc.layer_norm %x, %g, %g eps 1.0e-50 : tensor<4x64xf32>, tensor<64xf32>
  return
}

// -----

// gamma and beta have one type.
func.func @layer_norm_beta_type(%x: tensor<4x64xf32>, %g: tensor<64xf32>, %b: tensor<32xf32>) {
  // expected-error@+1 {{'mpc.layer_norm' op failed to verify that all of {gamma, beta} have same type}}
  %0 = "mpc.layer_norm"(%x, %g, %b) <{eps = 1.0e-5 : f64}> : (tensor<4x64xf32>, tensor<64xf32>, tensor<32xf32>) -> tensor<4x64xf32>
  return
}

// -----

func.func @batch_norm_c1(%x: tensor<8x16x32xf32>, %g: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.batch_norm' op expects an input of rank 2 (NC) or 4 (NCHW), got 'tensor<8x16x32xf32>'}}
  %0 = mpc.batch_norm %x, %g, %g, %g, %g : tensor<8x16x32xf32>, tensor<16xf32>
  return
}

// -----

func.func @batch_norm_c1_rank1(%x: tensor<16xf32>, %g: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.batch_norm' op expects an input of rank 2 (NC) or 4 (NCHW), got 'tensor<16xf32>'}}
  %0 = mpc.batch_norm %x, %g, %g, %g, %g : tensor<16xf32>, tensor<16xf32>
  return
}

// -----

func.func @batch_norm_c2(%x: tensor<8x16x4x4xf32>, %g: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.batch_norm' op expects gamma of shape [16] (the channels), got 'tensor<4xf32>'}}
  %0 = mpc.batch_norm %x, %g, %g, %g, %g : tensor<8x16x4x4xf32>, tensor<4xf32>
  return
}

// -----

func.func @batch_norm_c3(%x: tensor<8x16xbf16>, %g: tensor<16xf16>) {
  // expected-error@+1 {{'mpc.batch_norm' op expects gamma of the input's element type or f32, got 'tensor<16xf16>' for 'tensor<8x16xbf16>'}}
  %0 = mpc.batch_norm %x, %g, %g, %g, %g : tensor<8x16xbf16>, tensor<16xf16>
  return
}

// -----

func.func @batch_norm_c5(%x: tensor<8x16xbf16>, %g: tensor<16xbf16>, %m: tensor<16xf16>) {
  // expected-error@+1 {{'mpc.batch_norm' op expects running statistics of gamma's shape and gamma's element type or f32, got 'tensor<16xf16>' for 'tensor<16xbf16>'}}
  %0 = mpc.batch_norm %x, %g, %g, %m, %m : tensor<8x16xbf16>, tensor<16xbf16> running tensor<16xf16>
  return
}

// -----

func.func @batch_norm_c5_shape(%x: tensor<8x16xbf16>, %g: tensor<16xbf16>, %m: tensor<8xf32>) {
  // expected-error@+1 {{'mpc.batch_norm' op expects running statistics of gamma's shape and gamma's element type or f32, got 'tensor<8xf32>' for 'tensor<16xbf16>'}}
  %0 = mpc.batch_norm %x, %g, %g, %m, %m : tensor<8x16xbf16>, tensor<16xbf16> running tensor<8xf32>
  return
}

// -----

func.func @batch_norm_c6(%x: tensor<8x16xf32>, %g: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.batch_norm' op expects stats of shape [2, 16] (the mean and inverse deviation of each channel), got 'tensor<16x2xf32>'}}
  %0, %1 = mpc.batch_norm %x, %g, %g, %g, %g : tensor<8x16xf32>, tensor<16xf32> stats tensor<16x2xf32>
  return
}

// -----

func.func @batch_norm_c6_type(%x: tensor<8x16xbf16>, %g: tensor<16xbf16>, %m: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.batch_norm' op result #1 must be tensor of 32-bit float values, but got 'tensor<2x16xbf16>'}}
  %0, %1 = mpc.batch_norm %x, %g, %g, %m, %m : tensor<8x16xbf16>, tensor<16xbf16> running tensor<16xf32> stats tensor<2x16xbf16>
  return
}

// -----

func.func @batch_norm_grad_c1(%dy: tensor<8x16xf32>, %x: tensor<8x16xf32>, %g: tensor<16xf32>, %s: tensor<2x8xf32>) {
  // expected-error@+1 {{'mpc.batch_norm_grad' op expects stats of shape [2, 16] (the mean and inverse deviation of each channel), got 'tensor<2x8xf32>'}}
  %0:3 = mpc.batch_norm_grad %dy, %x, %g stats %s : tensor<2x8xf32> : tensor<8x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @batch_norm_grad_c2_stats(%dy: tensor<8x16xf32>, %x: tensor<8x16xf32>, %g: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.batch_norm_grad' op expects stats with relu (the ReLU's mask is the forward's output, normalised with them)}}
  %0:3 = mpc.batch_norm_grad %dy, %x, %g relu %g : tensor<16xf32> : tensor<8x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @batch_norm_grad_c2_type(%dy: tensor<8x16xf32>, %x: tensor<8x16xf32>, %g: tensor<16xf32>, %s: tensor<2x16xf32>, %b: tensor<16xbf16>) {
  // expected-error@+1 {{'mpc.batch_norm_grad' op expects relu's beta of gamma's type 'tensor<16xf32>', got 'tensor<16xbf16>'}}
  %0:3 = mpc.batch_norm_grad %dy, %x, %g stats %s : tensor<2x16xf32> relu %b : tensor<16xbf16> : tensor<8x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @batch_norm_c4_momentum(%x: tensor<8x16xf32>, %g: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.batch_norm' op expects 0 <= momentum <= 1 and eps > 0 and finite in f32, got momentum 1.5 and eps 1.0e-05}}
  %0 = mpc.batch_norm %x, %g, %g, %g, %g momentum 1.5 : tensor<8x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @batch_norm_c4_momentum_negative(%x: tensor<8x16xf32>, %g: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.batch_norm' op expects 0 <= momentum <= 1 and eps > 0 and finite in f32, got momentum -0.1 and eps 1.0e-05}}
  %0 = mpc.batch_norm %x, %g, %g, %g, %g momentum -0.1 : tensor<8x16xf32>, tensor<16xf32>
  return
}

// -----

func.func @batch_norm_c4_eps(%x: tensor<8x16xf32>, %g: tensor<16xf32>) {
  // expected-error@+1 {{'mpc.batch_norm' op expects 0 <= momentum <= 1 and eps > 0 and finite in f32, got momentum 0.1 and eps 0}}
  %0 = mpc.batch_norm %x, %g, %g, %g, %g eps 0.0 : tensor<8x16xf32>, tensor<16xf32>
  return
}

// -----

// The running statistics share a type (gamma's, or f32).
func.func @batch_norm_running_var_type(%x: tensor<8x16xf32>, %g: tensor<16xf32>, %v: tensor<8xf32>) {
  // expected-error@+1 {{'mpc.batch_norm' op failed to verify that all of {running_mean, running_var} have same type}}
  %0 = "mpc.batch_norm"(%x, %g, %g, %g, %v) <{eps = 1.0e-5 : f64, momentum = 0.1 : f64}> : (tensor<8x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Embedding and loss
//===----------------------------------------------------------------------===//

func.func @embedding_c1(%t: tensor<64x4x32xf32>, %i: tensor<4x16xi32>) {
  // expected-error@+1 {{'mpc.embedding' op expects a table of rank 2, got 'tensor<64x4x32xf32>'}}
  %0 = mpc.embedding %t, %i : tensor<64x4x32xf32>, tensor<4x16xi32>
  return
}

// -----

func.func @embedding_float_indices(%t: tensor<64x32xf32>, %i: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.embedding' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = mpc.embedding %t, %i : tensor<64x32xf32>, tensor<4xf32>
  return
}

// -----

func.func @cross_entropy_c1(%l: tensor<10xf32>, %y: tensor<i32>) {
  // expected-error@+1 {{'mpc.cross_entropy' op expects logits of rank >= 2 ([..., C]), got 'tensor<10xf32>'}}
  %0 = mpc.cross_entropy %l, %y : tensor<10xf32>, tensor<i32>
  return
}

// -----

// mse_loss_c1: the target has the input's shape and type.
func.func @mse_loss_c1_shape(%x: tensor<64x3xf32>, %t: tensor<64xf32>) {
  // expected-error@+1 {{'mpc.mse_loss' op expects the target to have the input's type 'tensor<64x3xf32>', got 'tensor<64xf32>'}}
  %0 = mpc.mse_loss %x, %t : tensor<64x3xf32>, tensor<64xf32>
  return
}

// -----

// mse_loss_c1: no implicit cast between types.
func.func @mse_loss_c1_type(%x: tensor<64x3xf16>, %t: tensor<64x3xf32>) {
  // expected-error@+1 {{'mpc.mse_loss' op expects the target to have the input's type 'tensor<64x3xf16>', got 'tensor<64x3xf32>'}}
  %0 = mpc.mse_loss %x, %t : tensor<64x3xf16>, tensor<64x3xf32>
  return
}

// -----

func.func @cross_entropy_c2(%l: tensor<64x10xf32>, %y: tensor<32xi32>) {
  // expected-error@+1 {{'mpc.cross_entropy' op expects targets of shape [64] (the logits without the class dim), got 'tensor<32xi32>'}}
  %0 = mpc.cross_entropy %l, %y : tensor<64x10xf32>, tensor<32xi32>
  return
}

// -----

// cross_entropy_c2: targets are class indices, not one-hot rows.
func.func @cross_entropy_c2_one_hot(%l: tensor<4x16x50xf32>, %y: tensor<4x16x50xi64>) {
  // expected-error@+1 {{'mpc.cross_entropy' op expects targets of shape [4, 16] (the logits without the class dim), got 'tensor<4x16x50xi64>'}}
  %0 = mpc.cross_entropy %l, %y ignore_index -100 : tensor<4x16x50xf32>, tensor<4x16x50xi64>
  return
}

// -----

func.func @cross_entropy_float_targets(%l: tensor<64x10xf32>, %y: tensor<64xf32>) {
  // expected-error@+1 {{'mpc.cross_entropy' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<64xf32>'}}
  %0 = mpc.cross_entropy %l, %y : tensor<64x10xf32>, tensor<64xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

func.func @reshape_c1(%x: tensor<4x16xf32>) {
  // expected-error@+1 {{'mpc.reshape' op expects the same number of elements, got 64 in 'tensor<4x16xf32>' and 60 in 'tensor<6x10xf32>'}}
  %0 = mpc.reshape %x : tensor<4x16xf32> to tensor<6x10xf32>
  return
}

// -----

// reshape_c1: an element count that overflows int64 used to wrap to 0 and
// match tensor<0xf32>; Mpc_HasElements rejects it first, as it does every
// tensor whose byte count does not fit in 64 bits.
func.func @reshape_c1_overflow(%x: tensor<4611686018427387904x4xf32>) {
  // expected-error@+1 {{'mpc.reshape' op expects tensors whose byte count fits in 64 bits, got 'tensor<4611686018427387904x4xf32>' for operand #0}}
  %0 = mpc.reshape %x : tensor<4611686018427387904x4xf32> to tensor<1xf32>
  return
}

// -----

func.func @reshape_c2(%x: tensor<4x16xf32>) {
  // expected-error@+1 {{'mpc.reshape' op expects one element type, got 'tensor<4x16xf32>' and 'tensor<64xf16>'}}
  %0 = mpc.reshape %x : tensor<4x16xf32> to tensor<64xf16>
  return
}

// -----

func.func @transpose_c1(%x: tensor<4x8x2xf32>) {
  // expected-error@+1 {{'mpc.transpose' op expects a permutation of [0, 3), got [0, 1, 1]}}
  %0 = mpc.transpose %x perm [0, 1, 1] : tensor<4x8x2xf32>
  return
}

// -----

func.func @transpose_c1_length(%x: tensor<4x8x2xf32>) {
  // expected-error@+1 {{'mpc.transpose' op expects a permutation of [0, 3), got [1, 0]}}
  %0 = mpc.transpose %x perm [1, 0] : tensor<4x8x2xf32>
  return
}

// -----

func.func @transpose_c1_range(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.transpose' op expects a permutation of [0, 2), got [2, 0]}}
  %0 = mpc.transpose %x perm [2, 0] : tensor<4x8xf32>
  return
}

// -----

func.func @transpose_c1_negative(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.transpose' op expects a permutation of [0, 2), got [-1, 0]}}
  %0 = mpc.transpose %x perm [-1, 0] : tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_c1(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.broadcast' op expects an input that broadcasts to the result, got 'tensor<4x8xf32>' to 'tensor<8xf32>'}}
  %0 = mpc.broadcast %x : tensor<4x8xf32> to tensor<8xf32>
  return
}

// -----

func.func @broadcast_c1_extent(%x: tensor<4x2xf32>) {
  // expected-error@+1 {{'mpc.broadcast' op expects an input that broadcasts to the result, got 'tensor<4x2xf32>' to 'tensor<3x4x8xf32>'}}
  %0 = mpc.broadcast %x : tensor<4x2xf32> to tensor<3x4x8xf32>
  return
}

// -----

// broadcast_c1: dims align at the right, not the left.
func.func @broadcast_c1_alignment(%x: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.broadcast' op expects an input that broadcasts to the result, got 'tensor<4xf32>' to 'tensor<4x8xf32>'}}
  %0 = mpc.broadcast %x : tensor<4xf32> to tensor<4x8xf32>
  return
}

// -----

func.func @broadcast_c2(%x: tensor<8xf32>) {
  // expected-error@+1 {{'mpc.broadcast' op expects one element type, got 'tensor<8xf32>' and 'tensor<4x8xbf16>'}}
  %0 = mpc.broadcast %x : tensor<8xf32> to tensor<4x8xbf16>
  return
}

// -----

func.func @slice_c1(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.slice' op expects starts, limits and strides with one entry per dim (2), got 1, 2 and 2}}
  %0 = mpc.slice %x starts [0] limits [4, 8] : tensor<4x8xf32>
  return
}

// -----

func.func @slice_c1_limits(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.slice' op expects starts, limits and strides with one entry per dim (2), got 2, 3 and 2}}
  %0 = mpc.slice %x starts [0, 0] limits [4, 8, 1] : tensor<4x8xf32>
  return
}

// -----

func.func @slice_c1_strides(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.slice' op expects starts, limits and strides with one entry per dim (2), got 2, 2 and 1}}
  %0 = mpc.slice %x starts [0, 0] limits [4, 8] strides [2] : tensor<4x8xf32>
  return
}

// -----

func.func @slice_c2_start_after_limit(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.slice' op expects 0 <= start <= limit <= dim and stride >= 1 in dim 1, got start 6, limit 2, stride 1 for extent 8}}
  %0 = mpc.slice %x starts [0, 6] limits [4, 2] : tensor<4x8xf32>
  return
}

// -----

func.func @slice_c2_limit_past_dim(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.slice' op expects 0 <= start <= limit <= dim and stride >= 1 in dim 0, got start 0, limit 5, stride 1 for extent 4}}
  %0 = mpc.slice %x starts [0, 0] limits [5, 8] : tensor<4x8xf32>
  return
}

// -----

func.func @slice_c2_negative_start(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.slice' op expects 0 <= start <= limit <= dim and stride >= 1 in dim 0, got start -1, limit 4, stride 1 for extent 4}}
  %0 = mpc.slice %x starts [-1, 0] limits [4, 8] : tensor<4x8xf32>
  return
}

// -----

func.func @slice_c2_stride(%x: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.slice' op expects 0 <= start <= limit <= dim and stride >= 1 in dim 1, got start 0, limit 8, stride 0 for extent 8}}
  %0 = mpc.slice %x starts [0, 0] limits [4, 8] strides [1, 0] : tensor<4x8xf32>
  return
}

// -----

// concat_c1: at least one input. Only the generic form can write none.
func.func @concat_c1_empty() {
  // expected-error@+2 {{'mpc.concat' op expects at least one input}}
  // expected-error@+1 {{'mpc.concat' op failed to infer returned types}}
  %0 = "mpc.concat"() <{dim = 0 : i64}> : () -> tensor<1xf32>
  return
}

// -----

func.func @concat_c1(%a: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error@+1 {{'mpc.concat' op expects inputs of one rank and element type, got 'tensor<4x8xf32>' and 'tensor<4xf32>'}}
  %0 = mpc.concat %a, %b dim 0 : tensor<4x8xf32>, tensor<4xf32>
  return
}

// -----

func.func @concat_c1_element_type(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error@+1 {{'mpc.concat' op expects inputs of one rank and element type, got 'tensor<4xf32>' and 'tensor<4xf16>'}}
  %0 = mpc.concat %a, %b dim 0 : tensor<4xf32>, tensor<4xf16>
  return
}

// -----

func.func @concat_c2(%a: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.concat' op expects dim in [0, 2), got 2}}
  %0 = mpc.concat %a, %a dim 2 : tensor<4x8xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @concat_c2_negative(%a: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.concat' op expects dim in [0, 2), got -1}}
  %0 = mpc.concat %a dim -1 : tensor<4x8xf32>
  return
}

// -----

func.func @concat_c2_scalar(%a: tensor<f32>) {
  // expected-error@+1 {{'mpc.concat' op expects dim in [0, 0), got 0}}
  %0 = mpc.concat %a, %a dim 0 : tensor<f32>, tensor<f32>
  return
}

// -----

func.func @concat_c3(%a: tensor<4x8xf32>, %b: tensor<5x2xf32>) {
  // expected-error@+1 {{'mpc.concat' op expects inputs that agree in every dim but 1, got 'tensor<4x8xf32>' and 'tensor<5x2xf32>'}}
  %0 = mpc.concat %a, %b dim 1 : tensor<4x8xf32>, tensor<5x2xf32>
  return
}

// -----

// concat_c3: the joined extent must be representable.
func.func @concat_c3_overflow(%a: tensor<4611686018427387904x2xf32>) {
  // expected-error@+1 {{'mpc.concat' op expects the inputs' extents in dim 0 to add up to at most 2^63 - 1}}
  %0 = mpc.concat %a, %a dim 0 : tensor<4611686018427387904x2xf32>, tensor<4611686018427387904x2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

func.func @max_pool2d_c1(%x: tensor<16x32x32xf32>) {
  // expected-error@+1 {{'mpc.max_pool2d' op expects an NCHW input of rank 4, got 'tensor<16x32x32xf32>'}}
  %0 = mpc.max_pool2d %x kernel [2, 2] : tensor<16x32x32xf32>
  return
}

// -----

func.func @max_pool2d_c2_kernel_entries(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.max_pool2d' op expects kernel to have 2 entries (height, width), got 1}}
  %0 = mpc.max_pool2d %x kernel [2] : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @max_pool2d_c2_kernel_zero(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.max_pool2d' op expects kernel entries >= 1, got [0, 2]}}
  %0 = mpc.max_pool2d %x kernel [0, 2] : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @max_pool2d_c2_stride_entries(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.max_pool2d' op expects stride to have 2 entries (height, width), got 3}}
  %0 = mpc.max_pool2d %x kernel [2, 2] stride [1, 1, 1] : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @max_pool2d_c2_stride_zero(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.max_pool2d' op expects stride entries >= 1, got [2, 0]}}
  %0 = mpc.max_pool2d %x kernel [2, 2] stride [2, 0] : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @max_pool2d_c2_padding_negative(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.max_pool2d' op expects padding entries >= 0, got [0, -1]}}
  %0 = mpc.max_pool2d %x kernel [2, 2] padding [0, -1] : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @max_pool2d_c2_padding_half_kernel(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.max_pool2d' op expects padding at most half the kernel, got padding [2, 1] for kernel [3, 3]}}
  %0 = mpc.max_pool2d %x kernel [3, 3] padding [2, 1] : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @max_pool2d_c3(%x: tensor<1x3x8x2xf32>) {
  // expected-error@+1 {{'mpc.max_pool2d' op expects a kernel that fits the padded input, got kernel [3, 3] for 'tensor<1x3x8x2xf32>'}}
  %0 = mpc.max_pool2d %x kernel [3, 3] : tensor<1x3x8x2xf32>
  return
}

// -----

func.func @max_pool2d_with_indices_c1(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.max_pool2d_with_indices' op expects padding at most half the kernel, got padding [2, 0] for kernel [3, 3]}}
  %0:2 = mpc.max_pool2d_with_indices %x kernel [3, 3] padding [2, 0] : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @max_pool2d_with_indices_c2(%x: tensor<1x3x16x16xf32>) {
  // expected-error@+1 {{'mpc.max_pool2d_with_indices' op expects a kernel of at most 127 elements (a window position is a byte), got [8, 16]}}
  %0:2 = mpc.max_pool2d_with_indices %x kernel [8, 16] : tensor<1x3x16x16xf32>
  return
}

// -----

func.func @max_pool2d_indices_grad_c1_shape(%dy: tensor<1x3x4x4xf32>, %i: tensor<1x3x4x2xi8>) {
  // expected-error@+1 {{'mpc.max_pool2d_indices_grad' op expects indices of the gradient's shape 'tensor<1x3x4x4xf32>', got 'tensor<1x3x4x2xi8>'}}
  %0 = mpc.max_pool2d_indices_grad %dy, %i kernel [2, 2] stride [2, 2] padding [0, 0] : tensor<1x3x4x4xf32>, tensor<1x3x4x2xi8> -> tensor<1x3x8x8xf32>
  return
}

// -----

func.func @max_pool2d_indices_grad_c1_entries(%dy: tensor<1x3x4x4xf32>, %i: tensor<1x3x4x4xi8>) {
  // expected-error@+1 {{'mpc.max_pool2d_indices_grad' op expects two entries in kernel, stride and padding}}
  %0 = mpc.max_pool2d_indices_grad %dy, %i kernel [2, 2] stride [2] padding [0, 0] : tensor<1x3x4x4xf32>, tensor<1x3x4x4xi8> -> tensor<1x3x8x8xf32>
  return
}

// -----

func.func @max_pool2d_indices_grad_c2_extent(%dy: tensor<1x3x4x4xf32>, %i: tensor<1x3x4x4xi8>) {
  // expected-error@+1 {{'mpc.max_pool2d_indices_grad' op expects a result that pools to the gradient 'tensor<1x3x4x4xf32>' with kernel [2, 2], stride [2, 2] and padding [0, 0], got 'tensor<1x3x8x12xf32>'}}
  %0 = mpc.max_pool2d_indices_grad %dy, %i kernel [2, 2] stride [2, 2] padding [0, 0] : tensor<1x3x4x4xf32>, tensor<1x3x4x4xi8> -> tensor<1x3x8x12xf32>
  return
}

// -----

func.func @max_pool2d_indices_grad_c2_type(%dy: tensor<1x3x4x4xf32>, %i: tensor<1x3x4x4xi8>) {
  // expected-error@+1 {{'mpc.max_pool2d_indices_grad' op expects a result that pools to the gradient 'tensor<1x3x4x4xf32>' with kernel [2, 2], stride [2, 2] and padding [0, 0], got 'tensor<1x3x8x8xbf16>'}}
  %0 = mpc.max_pool2d_indices_grad %dy, %i kernel [2, 2] stride [2, 2] padding [0, 0] : tensor<1x3x4x4xf32>, tensor<1x3x4x4xi8> -> tensor<1x3x8x8xbf16>
  return
}

// -----

func.func @avg_pool2d_c1(%x: tensor<2x8x8x1x1xf32>) {
  // expected-error@+1 {{'mpc.avg_pool2d' op expects an NCHW input of rank 4, got 'tensor<2x8x8x1x1xf32>'}}
  %0 = mpc.avg_pool2d %x kernel [2, 2] : tensor<2x8x8x1x1xf32>
  return
}

// -----

func.func @avg_pool2d_c2(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.avg_pool2d' op expects kernel entries >= 1, got [2, -2]}}
  %0 = mpc.avg_pool2d %x kernel [2, -2] : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @avg_pool2d_c2_padding_entries(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.avg_pool2d' op expects padding to have 2 entries (height, width), got 4}}
  %0 = mpc.avg_pool2d %x kernel [2, 2] padding [1, 1, 1, 1] : tensor<1x3x8x8xf32>
  return
}

// -----

func.func @avg_pool2d_c2_padding_half_kernel(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.avg_pool2d' op expects padding at most half the kernel, got padding [1, 2] for kernel [2, 2]}}
  %0 = mpc.avg_pool2d %x kernel [2, 2] padding [1, 2] : tensor<1x3x8x8xf32>
  return
}

// -----

// pool_c2 with values whose double would overflow int64.
func.func @avg_pool2d_c2_padding_huge(%x: tensor<1x3x8x8xf32>) {
  // expected-error@+1 {{'mpc.avg_pool2d' op expects padding at most half the kernel, got padding [4611686018427387904, 0] for kernel [2, 2]}}
  %0 = mpc.avg_pool2d %x kernel [2, 2] padding [4611686018427387904, 0] : tensor<1x3x8x8xf32>
  return
}

// -----

// avg_pool2d_c3: padding helps, but not enough: 1 + 2 * 1 < 4.
func.func @avg_pool2d_c3(%x: tensor<1x3x1x8xbf16>) {
  // expected-error@+1 {{'mpc.avg_pool2d' op expects a kernel that fits the padded input, got kernel [4, 2] for 'tensor<1x3x1x8xbf16>'}}
  %0 = mpc.avg_pool2d %x kernel [4, 2] padding [1, 1] : tensor<1x3x1x8xbf16>
  return
}

// -----

func.func @softmax_grad_c1(%dy: tensor<4x8xf32>, %y: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.softmax_grad' op expects dim in [0, 2), got 2}}
  %0 = mpc.softmax_grad %dy, %y dim 2 : tensor<4x8xf32>
  return
}

// -----

func.func @log_softmax_grad_c1(%dy: tensor<4x8xf32>, %y: tensor<4x8xf32>) {
  // expected-error@+1 {{'mpc.log_softmax_grad' op expects dim in [0, 2), got -1}}
  %0 = mpc.log_softmax_grad %dy, %y dim -1 : tensor<4x8xf32>
  return
}

// -----

func.func @embedding_grad_c1(%dy: tensor<2x3x5xf32>, %ids: tensor<2x3xi32>) {
  // expected-error@+1 {{'mpc.embedding_grad' op expects a [V, D] result and a gradient shaped as the indices followed by D, got 'tensor<2x3x5xf32>' for 'tensor<10x4xf32>'}}
  %0 = mpc.embedding_grad %dy, %ids : tensor<2x3x5xf32>, tensor<2x3xi32> -> tensor<10x4xf32>
  return
}

// -----

func.func @cross_entropy_grad_c1(%dl: tensor<4xf32>, %y: tensor<4x8xf32>, %t: tensor<4xi32>) {
  // expected-error@+1 {{'mpc.cross_entropy_grad' op operand #0 must be 0D tensor of 32-bit float values, but got 'tensor<4xf32>'}}
  %0 = mpc.cross_entropy_grad %dl, %y, %t : tensor<4xf32>, tensor<4x8xf32>, tensor<4xi32>
  return
}

// -----

func.func @attention_rank(%q: tensor<2x16x8xf16>) {
  // expected-error @+1 {{'mpc.attention' op expects query, key and value of rank 4, got 'tensor<2x16x8xf16>'}}
  %0:2 = mpc.attention %q, %q, %q scale 0.125 : tensor<2x16x8xf16>, tensor<2x16x8xf16>, tensor<2x16x8xf16>
  return
}

// -----

func.func @attention_types(%q: tensor<2x3x16x8xf16>, %k: tensor<2x3x16x8xbf16>) {
  // expected-error @+1 {{'mpc.attention' op expects query, key and value of one element type}}
  %0:2 = mpc.attention %q, %k, %k scale 0.125 : tensor<2x3x16x8xf16>, tensor<2x3x16x8xbf16>, tensor<2x3x16x8xbf16>
  return
}

// -----

// In bthd layout dim 2 is the heads: 3 against 4.
func.func @attention_heads(%q: tensor<2x16x3x8xf16>, %k: tensor<2x16x4x8xf16>) {
  // expected-error @+1 {{'mpc.attention' op expects query, key and value of equal batch and head extents in layout bthd}}
  %0:2 = mpc.attention %q, %k, %k scale 0.125 layout bthd : tensor<2x16x3x8xf16>, tensor<2x16x4x8xf16>, tensor<2x16x4x8xf16>
  return
}

// -----

func.func @attention_key_length(%q: tensor<2x3x16x8xf16>, %k: tensor<2x3x12x8xf16>, %v: tensor<2x3x10x8xf16>) {
  // expected-error @+1 {{'mpc.attention' op expects key and value of one sequence length}}
  %0:2 = mpc.attention %q, %k, %v scale 0.125 : tensor<2x3x16x8xf16>, tensor<2x3x12x8xf16>, tensor<2x3x10x8xf16>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<2x3x16x8xf16>, %k: tensor<2x3x16x4xf16>) {
  // expected-error @+1 {{'mpc.attention' op expects query and key of one head dim}}
  %0:2 = mpc.attention %q, %k, %k scale 0.125 : tensor<2x3x16x8xf16>, tensor<2x3x16x4xf16>, tensor<2x3x16x4xf16>
  return
}

// -----

func.func @attention_mask_shape(%q: tensor<2x3x16x8xf16>, %m: tensor<16x15xi1>) {
  // expected-error @+1 {{'mpc.attention' op expects a mask of shape [16, 16] (queries x keys), got 'tensor<16x15xi1>'}}
  %0:2 = mpc.attention %q, %q, %q mask %m : tensor<16x15xi1> scale 0.125 : tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>
  return
}

// -----

func.func @attention_causal_lengths(%q: tensor<2x3x8x8xf16>, %k: tensor<2x3x16x8xf16>) {
  // expected-error @+1 {{'mpc.attention' op expects as many queries as keys when causal, got 8 and 16}}
  %0:2 = mpc.attention %q, %k, %k scale 0.125 causal : tensor<2x3x8x8xf16>, tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>
  return
}

// -----

func.func @attention_causal_and_mask(%q: tensor<2x3x16x8xf16>, %m: tensor<16x16xi1>) {
  // expected-error @+1 {{'mpc.attention' op expects either causal or a mask, not both}}
  %0:2 = mpc.attention %q, %q, %q mask %m : tensor<16x16xi1> scale 0.125 causal : tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>
  return
}

// -----

func.func @attention_scale(%q: tensor<2x3x16x8xf16>) {
  // expected-error @+1 {{'mpc.attention' op expects a scale that is positive and finite in f32, got 0}}
  %0:2 = mpc.attention %q, %q, %q scale 0.0 : tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>, tensor<2x3x16x8xf16>
  return
}

// -----

// The byte count, not only the element count, must fit in 64 bits: 2^62
// f32 elements are 2^64 bytes.
func.func @has_elements_byte_count(%x: tensor<4611686018427387904xf32>) {
  // expected-error@+1 {{'mpc.relu' op expects tensors whose byte count fits in 64 bits, got 'tensor<4611686018427387904xf32>' for operand #0}}
  %0 = mpc.relu %x : tensor<4611686018427387904xf32>
  return
}

// -----

// model_c3: the same for the model's own tensors.
// expected-error@+2 {{'mpc.model' op expects 'w' to have a byte count that fits in 64 bits, got 'tensor<9223372036854775807xf32>'}}
mpc.model @model_c3_byte_count inputs(%x: tensor<4xf32>)
    params(%w: tensor<9223372036854775807xf32> = zeros) {
  %l = mpc.reduce_sum %x dims [0] : tensor<4xf32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// fusion_c6: a max pooling's loads apply a batch norm only.
mpc.model @fusion_c6_pool inputs(%x: tensor<1x2x4x4xf32>) params() {
  // expected-error@+1 {{'mpc.fusion' op of kind 'row' expects one softmax, log_softmax, layer_norm, batch_norm or their gradient, or a quantize (transposing where it sums a bias), and loop ops (a batch_norm's then possibly a max_pool2d_with_indices)}}
  %0:2 = mpc.fusion row {
    %a = mpc.softmax %x dim 3 : tensor<1x2x4x4xf32>
    %p, %i = mpc.max_pool2d_with_indices %a kernel [3, 3] stride [2, 2] padding [1, 1] : tensor<1x2x4x4xf32>
    mpc.yield %p, %i : tensor<1x2x2x2xf32>, tensor<1x2x2x2xi8>
  } : tensor<1x2x2x2xf32>, tensor<1x2x2x2xi8>
  %l = mpc.reduce_sum %0#0 dims [0, 1, 2, 3] : tensor<1x2x2x2xf32>
  mpc.output loss(%l : tensor<f32>)
}
