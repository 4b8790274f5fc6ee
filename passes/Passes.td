//===- Passes.td - mpc passes ------------------------------*- tablegen -*-===//
//
// Every pass of the project, with its options. Flags are mpc-<verb>-<noun>;
// analysis-only passes that exist for tests are mpc-test-<noun>.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_PASSES_PASSES_TD
#define MPC_PASSES_PASSES_TD

include "mlir/Pass/PassBase.td"

def MpcRecognizeAttentionPass
    : Pass<"mpc-recognize-attention", "mlir::ModuleOp"> {
  let summary = "Rewrite written-out attention into mpc.attention";
  let description = [{
    Finds scaled dot-product attention written op by op and replaces it with
    one mpc.attention, whose kernels never store the `T x T` scores,
    probabilities or their gradients. The pattern, every intermediate read
    only by the next op:
    ```mlir
    %s = mpc.batch_matmul %q, %k transpose_rhs   // [B, H, T, D] x [B, H, S, D]
    %c = mpc.scale %s by 0.125                   // optional
    %m = mpc.where %mask, %c, %neg_inf           // optional
    %p = mpc.softmax %m dim 3
    %y = mpc.batch_matmul %p, %v
    ```
    `%neg_inf` is a splat -inf constant; `%mask` is `mpc.causal_mask`
    (becoming `causal`) or another `[T, S]` i1 value (becoming `mask`).

    Also the form nn.MultiheadAttention exports (torch 1.13): `[B*H, T, D]`
    operands (run as `[1, B*H, T, D]`); the query scaled before the scores
    (`mpc.div` or `mpc.mul` by a scalar constant, or `mpc.scale`); kᵀ
    written out as a transpose (the key is that transpose with its last two
    dims swapped back); any chain of `mpc.scale` on the scores; and in
    place of the `where`, `mpc.add` of a constant of zeros (no mask) or of
    -inf exactly above the diagonal (`causal`).
    When `%q`, `%k` and `%v` are each a transpose `[0, 2, 1, 3]` of a
    `[B, T, H, D]` value and `%y` is read only by that transpose back, the
    attention reads and writes the `[B, T, H, D]` values directly (layout
    `bthd`) and the transposes go.

    Not rewritten: a score, scaled score, masked score or probability read
    elsewhere (it would have to be stored anyway); a softmax over another
    dim; a mask of another shape; a fill other than -inf; an added constant
    with other values (a bias) or another pattern of -inf; operands of
    different element types.
  }];
  let statistics = [Statistic<"numRecognized", "num-recognized",
                              "Attentions rewritten into mpc.attention">];
}

def MpcAssignPrecisionPass : Pass<"mpc-assign-precision", "mlir::ModuleOp"> {
  let summary = "Assign a storage precision to every value of the forward "
                "pass, inserting mpc.cast where types meet";
  let description = [{
    The compile-time form of Apex's opt levels and torch.autocast. Runs on
    the forward pass, before mpc-autodiff, so that each backward op takes
    the precision of its forward op through the op's VJP rule (gradients of
    half activations are half; a weight cast to half gets its gradient cast
    back to f32). Kernels always compute in f32 and round to the storage
    type of their results, as GPU kernels do.

    Each op's category comes from PrecisionPolicyOpInterface:
    - O0: f32 throughout; the pass changes nothing.
    - O1 (autocast): parameters and inputs as declared; `lower` ops (linear,
      matmul, batch_matmul, conv2d) run on half operands; `keep_f32` ops on
      f32 operands; `promote` ops on their widest operand type; `follow` ops
      on their first float operand's type.
    - O2: the model is half: every float input and every parameter is cast
      to half once, at the top of the body, and every activation is half,
      `keep_f32` ops included (their kernels compute in f32). Norm
      parameters stay f32 while `keep-norm-fp32` is set. Parameters stay
      f32 in storage: they are the master weights the optimizer updates.
    - O3: pure half. Parameters are stored in half (no master weights; the
      pass warns) and every op runs in half.
    - O2 with `master-weights` = `none`, `kahan` or `nearest` (bf16 only):
      O2's activations, but every parameter is stored in bf16, as at O3;
      there are no f32 master weights, and mpc-fuse-optimizer's option of
      the same name says how the update rounds. f16 is an error: its 10
      bits of mantissa lose too much of each update, and its range too
      little of the small ones.
    Batch norm's affine parameters and running statistics are always f32:
    the statistics are state it updates in place. Cross-entropy always
    yields an f32 loss. The
    loss and the extra outputs are cast back to their declared types, so an
    application sees the same outputs at every level.

    An op attribute `mpc.precision = "f32" | "f16" | "bf16"` overrides the
    policy for that op (the compile-time form of
    `autocast(enabled=False)`).

    Before (O1, f16):
    ```mlir
    %h = mpc.linear %x, %w, %b : tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>
    %p = mpc.softmax %h dim 1 : tensor<4x16xf32>
    ```
    After:
    ```mlir
    %x16 = mpc.cast %x : tensor<4x8xf32> to tensor<4x8xf16>
    %w16 = mpc.cast %w : tensor<16x8xf32> to tensor<16x8xf16>
    %b16 = mpc.cast %b : tensor<16xf32> to tensor<16xf16>
    %h = mpc.linear %x16, %w16, %b16 : tensor<4x8xf16>, tensor<16x8xf16>, tensor<16xf16>
    %h32 = mpc.cast %h : tensor<4x16xf16> to tensor<4x16xf32>
    %p = mpc.softmax %h32 dim 1 : tensor<4x16xf32>
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let options = [
    Option<"level", "level", "mlir::mpc::AmpLevel",
           /*default=*/"mlir::mpc::AmpLevel::O1", "Mixed-precision level",
           [{::llvm::cl::values(
               clEnumValN(mlir::mpc::AmpLevel::O0, "O0", "f32 throughout"),
               clEnumValN(mlir::mpc::AmpLevel::O1, "O1", "autocast"),
               clEnumValN(mlir::mpc::AmpLevel::O2, "O2",
                          "half model, f32 master weights"),
               clEnumValN(mlir::mpc::AmpLevel::O3, "O3", "pure half"))}]>,
    Option<"half", "half", "mlir::mpc::HalfType",
           /*default=*/"mlir::mpc::HalfType::F16", "Reduced-precision type",
           [{::llvm::cl::values(
               clEnumValN(mlir::mpc::HalfType::F16, "f16", "IEEE binary16"),
               clEnumValN(mlir::mpc::HalfType::BF16, "bf16", "bfloat16"))}]>,
    Option<"keepNormFp32", "keep-norm-fp32", "bool", /*default=*/"true",
           "Keep layer norm parameters in f32 (batch norm's always are)">,
    Option<"masterWeights", "master-weights", "mlir::mpc::MasterWeights",
           /*default=*/"mlir::mpc::MasterWeights::F32",
           "At O2 with bf16: none, kahan or nearest store every parameter "
           "in bf16 (no f32 master weights)",
           [{::llvm::cl::values(
               clEnumValN(mlir::mpc::MasterWeights::F32, "f32",
                          "f32 master weights"),
               clEnumValN(mlir::mpc::MasterWeights::None, "none",
                          "bf16 parameters, updated with stochastic rounding"),
               clEnumValN(mlir::mpc::MasterWeights::Kahan, "kahan",
                          "bf16 parameters and a bf16 Kahan compensation"),
               clEnumValN(mlir::mpc::MasterWeights::Nearest, "nearest",
                          "bf16 parameters rounded to nearest (O3's update; "
                          "for comparison)"))}]>];
  let statistics = [Statistic<"numCasts", "num-casts", "Casts inserted">];
}

def MpcAutodiffPass : Pass<"mpc-autodiff", "mlir::ModuleOp"> {
  let summary = "Derive the training step: append the reverse-mode backward "
                "pass and return every parameter's gradient";
  let description = [{
    Rewrites each `mpc.model` so that its body computes the loss and, after
    it, the gradient of the loss with respect to every parameter, returned
    in `mpc.output`'s `gradients(...)` group in parameter order. The
    model's extra outputs are dropped: they are what evaluation returns,
    and the training step computes only what the loss and the gradients
    need (canonicalize removes the ops only they read).

    Each op supplies its own vector-Jacobian product through
    DifferentiableOpInterface. Only ops on a path from a parameter to the
    loss get backward work; a parameter the loss does not depend on gets a
    zero gradient. Batch-norm running statistics are updated, not
    differentiated; integer inputs have no gradient.

    Before:
    ```mlir
    %h = mpc.relu %x : tensor<4x8xf32>
    %s = mpc.reduce_sum %h dims [0, 1] : tensor<4x8xf32>
    mpc.output loss(%s : tensor<f32>)
    ```
    After (for a parameter %x):
    ```mlir
    %one = mpc.constant dense<1.0> : tensor<f32>
    %0 = mpc.reshape %one : tensor<f32> to tensor<1x1xf32>
    %1 = mpc.broadcast %0 : tensor<1x1xf32> to tensor<4x8xf32>
    %2 = mpc.relu_grad %1, %x : tensor<4x8xf32>
    mpc.output loss(%s : tensor<f32>) gradients(%2 : tensor<4x8xf32>)
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let statistics = [
    Statistic<"numBackwardOps", "num-backward-ops",
              "Ops created for the backward pass">];
}

def MpcAssignFp8Pass : Pass<"mpc-assign-fp8", "mlir::ModuleOp"> {
  let summary = "Run the training step's GEMMs on FP8 operands";
  let description = [{
    FP8 training as Transformer Engine's HYBRID recipe does it, decided at
    compile time. Runs on the training step, after mpc-autodiff, so that the
    forward GEMM of a layer and the two GEMMs of its gradient are chosen
    together. With `gemms=all` every eligible `mpc.linear` and rank-2
    `mpc.matmul` becomes an `mpc.scaled_matmul` of `mpc.quantize`d
    operands:
    - activations and weights (operands the forward pass computes) are
      e4m3, gradients (operands of the backward pass) e5m2;
    - each operand is quantized once a step with the scale of its own amax
      (current scaling; `unscaled` casts with scale 1, for comparison), and
      the forward pass's copy is the one its gradient's GEMMs read: a weight
      and a layer's input are quantized once for three GEMMs;
    - with `history=L` (delayed scaling, Transformer Engine's default
      recipe), each scale comes from the largest amax of the last L applied
      steps instead, less `margin` powers of two: the quantization is one
      pass, and the model gains the state `fp8.scaling`, the table of
      scales and histories the quantizations share (see `mpc.quantize`),
      e4m3 columns first;
    - the product keeps its type (bf16 at O2), or is f32 where its only
      reader was a widening cast (a weight's gradient for the master
      weights); a linear's bias is added before the rounding.
    With `gemms=auto` the eligible GEMMs are decided a layer at a time: a
    linear and the two GEMMs of its gradient (which share its quantized
    input, weight and output gradient), or a matmul alone, run in FP8
    where the roofline time the faster products save (each GEMM's
    max(FLOPs / peak, bytes / bandwidth) at the half and the FP8 peak, from
    the `*-tflops` and `bandwidth-gbs` options) exceeds what FP8 adds:
    quantizing the operands no earlier choice quantized (reading each
    twice, amax then cast, and writing it in FP8; once where a layer
    norm's kernel or its input gradient's finds the amax as it stores,
    or under delayed scaling), their transposed
    copies, and the GEMM epilogues FP8 does not fuse yet (a linear's GELU,
    the GELU's gradient, the bias gradient), each a kernel of its own over
    the product. A GEMM left in half says why in its `mpc.fp8` attribute, which
    `--report` prints.
    Eligible: contracted and output dims multiples of 16 (what cuBLASLt's
    FP8 kernels need), and not the classifier: a GEMM whose result the loss
    reads, or whose operand is the loss's gradient, stays as it is, as do
    batched matmuls and attention. So do embeddings, norms, softmax, the
    loss and the optimizer. Evaluation (the forward pipeline) is not
    changed: its GEMMs stay in the half type.

    Before (a bf16 linear, after autodiff):
    ```mlir
    %y = mpc.linear %x, %w, %b : tensor<64x32xbf16>, tensor<96x32xbf16>, tensor<96xbf16>
    ```
    After:
    ```mlir
    %qx, %sx = mpc.quantize %x : tensor<64x32xbf16> to tensor<64x32xf8E4M3FN>
    %qw, %sw = mpc.quantize %w : tensor<96x32xbf16> to tensor<96x32xf8E4M3FN>
    %y = mpc.scaled_matmul %qx[%sx], %qw[%sw] bias %b transpose_rhs
        : tensor<64x32xf8E4M3FN>, tensor<96x32xf8E4M3FN>, tensor<96xbf16> -> tensor<64x96xbf16>
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let options = [
    Option<"gemms", "gemms", "mlir::mpc::Fp8Gemms",
           /*default=*/"mlir::mpc::Fp8Gemms::None", "Which GEMMs run in FP8",
           [{::llvm::cl::values(
               clEnumValN(mlir::mpc::Fp8Gemms::None, "none", "none"),
               clEnumValN(mlir::mpc::Fp8Gemms::All, "all",
                          "every eligible GEMM"),
               clEnumValN(mlir::mpc::Fp8Gemms::Auto, "auto",
                          "the eligible GEMMs where FP8 pays, by the cost "
                          "model"))}]>,
    Option<"unscaled", "unscaled", "bool", /*default=*/"false",
           "Quantize with scale 1 (a plain cast), for comparison">,
    Option<"history", "history", "int64_t", /*default=*/"0",
           "Delayed scaling with this many steps of amax history (0: "
           "current scaling)">,
    Option<"margin", "margin", "int64_t", /*default=*/"0",
           "Delayed scaling: scales this many powers of two below what the "
           "history's amax allows">,
    Option<"halfTflops", "half-tflops", "double", /*default=*/"989.5",
           "auto: the GPU's f16/bf16 tensor-core peak, TFLOP/s">,
    Option<"fp8Tflops", "fp8-tflops", "double", /*default=*/"1979.0",
           "auto: the GPU's FP8 tensor-core peak, TFLOP/s">,
    Option<"bandwidthGbs", "bandwidth-gbs", "double", /*default=*/"3350.0",
           "auto: the GPU's memory bandwidth, GB/s">,
  ];
  let statistics = [
    Statistic<"numGemms", "gemms", "GEMMs that run in FP8">,
    Statistic<"numQuantized", "quantized", "Tensors quantized to FP8">,
  ];
}

def MpcRecomputePass : Pass<"mpc-recompute", "mlir::ModuleOp"> {
  let summary = "Compute chosen activations again in the backward pass "
                "instead of keeping them";
  let description = [{
    Selective activation recomputation (Megatron-LM's selective recompute;
    llm.c recomputes GELU the same way): in a training step, each
    elementwise forward op named in `ops` whose result the backward pass
    reads is cloned just before its first backward reader, which reads the
    clone. The forward result then dies once the forward pass is done with
    it, and the activation peak (which is reached at the start of the
    backward pass) falls by its size; the clone costs one more read of its
    operands and one more write. Only where every operand is read at or
    after the clone anyway, so that no other value lives longer: a GELU's
    input, which its gradient reads.

    Runs last in the training pipeline (CSE would merge the clone back).

    Before (`ops=gelu`):
    ```mlir
    %g = mpc.gelu %h approximate tanh : tensor<64x128xf16>
    ...
    %dw = mpc.matmul %dy, %g transpose_lhs : ...
    %dh = mpc.gelu_grad %dg, %h approximate tanh : ...
    ```
    After:
    ```mlir
    %g = mpc.gelu %h approximate tanh : tensor<64x128xf16>
    ...
    %g2 = mpc.gelu %h approximate tanh : tensor<64x128xf16>
    %dw = mpc.matmul %dy, %g2 transpose_lhs : ...
    %dh = mpc.gelu_grad %dg, %h approximate tanh : ...
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let options = [
    ListOption<"ops", "ops", "std::string",
               "Elementwise ops to recompute, by name without the dialect "
               "(gelu)">];
  let statistics = [
    Statistic<"numRecomputed", "num-recomputed", "Ops recomputed">];
}

def MpcSaveBatchNormStatisticsPass
    : Pass<"mpc-save-batch-norm-statistics", "mlir::ModuleOp"> {
  let summary = "Hand each batch norm's statistics from the forward pass to "
                "its gradient";
  let description = [{
    The forward `mpc.batch_norm` already computes each channel's batch mean
    and inverse standard deviation; its gradient, as mpc-autodiff derives
    it, computes them again from the input (two more passes over every
    element of the channel, and two more block reductions). This pass gives
    the forward op its `stats` result (`[2, C]` f32: the mean, then
    `rsqrt(var + eps)`) and passes it to each `mpc.batch_norm_grad` of the
    same input, gamma and eps that it dominates, as PyTorch and cuDNN keep
    `save_mean` and `save_invstd`. A gradient of another op's statistics,
    or of none, is left to compute its own.

    Where the batch norm's output goes through a ReLU whose gradient only
    this batch norm gradient reads, the ReLU's gradient is folded into it
    (`relu %beta`): the gradient computes the mask from the input and the
    statistics it reads anyway, so the ReLU's output is not read again
    (ResNet-50: 0.42 GB a step less).

    Before:
    ```mlir
    %y = mpc.batch_norm %x, %g, %b, %mean, %var
        : tensor<8x16x4x4xf32>, tensor<16xf32>
    ...
    %dx, %dg, %db = mpc.batch_norm_grad %dy, %x, %g
        : tensor<8x16x4x4xf32>, tensor<16xf32>
    ```
    After:
    ```mlir
    %y, %stats = mpc.batch_norm %x, %g, %b, %mean, %var
        : tensor<8x16x4x4xf32>, tensor<16xf32> stats tensor<2x16xf32>
    ...
    %dx, %dg, %db = mpc.batch_norm_grad %dy, %x, %g
        stats %stats : tensor<2x16xf32> : tensor<8x16x4x4xf32>, tensor<16xf32>
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let statistics = [
    Statistic<"numSaved", "num-saved",
              "Batch norm gradients given the forward's statistics">,
    Statistic<"numReluMasks", "num-relu-masks",
              "ReLU gradients folded into batch norm gradients">];
}

def MpcSaveMaxPoolIndicesPass
    : Pass<"mpc-save-max-pool-indices", "mlir::ModuleOp"> {
  let summary = "Hand each max pooling's argmax from the forward pass to its "
                "gradient";
  let description = [{
    mpc-autodiff's `mpc.max_pool2d_grad` finds each window's maximum again
    from the pooled input (a kernel that reads the input and writes each
    window's argmax, 4 bytes, to scratch, which a second kernel routes the
    gradient through), so the input stays alive until then. This
    pass turns each `mpc.max_pool2d` that such a gradient differentiates
    (same input, kernel, stride and padding; the forward op dominates it)
    into `mpc.max_pool2d_with_indices`, which also writes each window's
    argmax as a byte (its position in the window), and the gradient into
    `mpc.max_pool2d_indices_grad`, which reads those bytes instead of the
    input, as PyTorch's `max_pool2d_with_indices` keeps its indices
    (ResNet-50 at batch 32: 0.09 GB a step less, one launch less, and the
    stem's 51 MB pooled input is free after the forward pass).

    Left alone: a window of more than 127 elements (its position does not
    fit the byte), and a window that is the whole plane (a global pooling,
    which a warp reduces, reads each input once either way).

    Before:
    ```mlir
    %y = mpc.max_pool2d %x kernel [3, 3] stride [2, 2] padding [1, 1]
        : tensor<8x16x32x32xf32>
    ...
    %dx = mpc.max_pool2d_grad %dy, %x kernel [3, 3] stride [2, 2]
        padding [1, 1] : tensor<8x16x16x16xf32>, tensor<8x16x32x32xf32>
    ```
    After:
    ```mlir
    %y, %i = mpc.max_pool2d_with_indices %x kernel [3, 3] stride [2, 2]
        padding [1, 1] : tensor<8x16x32x32xf32>
    ...
    %dx = mpc.max_pool2d_indices_grad %dy, %i kernel [3, 3] stride [2, 2]
        padding [1, 1] : tensor<8x16x16x16xf32>, tensor<8x16x16x16xi8>
        -> tensor<8x16x32x32xf32>
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let statistics = [
    Statistic<"numSaved", "num-saved",
              "Max pooling gradients given the forward's argmax">];
}

def MpcFoldCastsPass : Pass<"mpc-fold-casts", "mlir::ModuleOp"> {
  let summary = "Remove cast round trips that change nothing and cast each "
                "value to a type once";
  let description = [{
    Applies mpc.cast's value-preserving folds (the same ones canonicalize
    applies, as CastOp's canonicalization patterns) to every cast, then
    merges identical casts:
    - a cast to the same type is its input;
    - cast(cast(%x : A to B) : B to C) where A to B is exact (a widening:
      f16 or bf16 to f32) is cast(%x : A to C), and %x itself when C is A
      (f16 to f32 to f16, bf16 to f32 to bf16);
    - a cast of a splat mpc.constant is a constant of the new type, rounded
      to nearest even as the cast kernel rounds (overflow to inf, subnormals
      kept; NaN constants are left to the kernel);
    - two casts of one value to one type are one (the one that dominates),
      so a weight that several ops use is cast to half once per step.
    A rounding is never removed: f32 to f16 to f32, f16 to bf16 and bf16 to
    f16 are not exact, and chains that start with one are left alone.

    Before:
    ```mlir
    %h = mpc.linear %x16, %w16 : tensor<4x8xf16>, tensor<16x8xf16>
    %h32 = mpc.cast %h : tensor<4x16xf16> to tensor<4x16xf32>
    %h16 = mpc.cast %h32 : tensor<4x16xf32> to tensor<4x16xf16>
    %y = mpc.linear %h16, %v16 : tensor<4x16xf16>, tensor<16x16xf16>
    %r = mpc.cast %y : tensor<4x16xf16> to tensor<4x16xf32>
    %t = mpc.cast %r : tensor<4x16xf32> to tensor<4x16xf16>
    ```
    After (%t is %r rounded again, and stays):
    ```mlir
    %h = mpc.linear %x16, %w16 : tensor<4x8xf16>, tensor<16x8xf16>
    %y = mpc.linear %h, %v16 : tensor<4x16xf16>, tensor<16x16xf16>
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let statistics = [
    Statistic<"numFolded", "num-folded", "Casts removed by folding">,
    Statistic<"numMerged", "num-merged", "Identical casts merged">];
}

def MpcCheckNumericsPass : Pass<"mpc-check-numerics", "mlir::ModuleOp"> {
  let summary = "Warn about constants that vanish or overflow in the "
                "precision they are used in";
  let description = [{
    A lint over the forward pass after mpc-assign-precision. It runs before
    mpc-fold-casts and canonicalize, which would fold a cast of a constant
    into the rounded constant and lose the value the user wrote. Warnings
    (with `werror-numerics`, errors that fail the pass):
    - an mpc.constant value that is subnormal in its own element type, or
      that rounds to 0, to a subnormal or to infinity in a type it is cast
      to (through reshape, broadcast, transpose and slice):
      `constant 1e-08 rounds to 0 in f16; smallest normal is 6.1e-05`, with
      a note at the op that uses it in f16. Zeros, infinities and NaNs are
      taken as meant (masks use -inf).
    - an mpc.scale factor, in the type the op stores (`scale factor ...`).
    - the eps of mpc.layer_norm and mpc.batch_norm, where the op runs in
      half: its input and parameters are half, or the model stores its
      parameters in half (O3). With f32 parameters (O1, O2 with
      keep-norm-fp32) the kernel adds eps in f32 and the lint is quiet.
    - a keep_f32 op that an `mpc.precision` override runs in half:
      `'mpc.softmax' is keep_f32 but mpc.precision forces it into f16`.
    - with `static-loss-scale`, a scale beyond f16's range;
    - with `optimizer-eps`, Adam's eps where the model stores its
      parameters, and so Adam's moments, in half (O3): eps 1e-8 is 0 in
      f16. At O0-O2 the update runs on f32 master weights and moments.

    ```mlir
    %eps = mpc.constant dense<1.0e-08> : tensor<f32>
    // warning: constant 1e-08 rounds to 0 in f16; smallest normal is 6.1e-05
    %e16 = mpc.cast %eps : tensor<f32> to tensor<f16>
    // note: used in f16 here
    %y = mpc.add %x16, %e16 : tensor<4xf16>, tensor<f16>
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let options = [
    Option<"werror", "werror-numerics", "bool", /*default=*/"false",
           "Report the findings as errors and fail">,
    Option<"staticLossScale", "static-loss-scale", "double",
           /*default=*/"0.0",
           "A static loss scale to check against the model's half type (0: "
           "none); a scale beyond f16's largest finite value makes the "
           "scaled loss inf in f16, so every step would overflow">,
    Option<"optimizerEps", "optimizer-eps", "double", /*default=*/"0.0",
           "Adam's eps (0: no Adam): where the model stores its parameters "
           "(and so the optimizer's moments) in half, an eps that rounds "
           "to 0 or a subnormal there is reported">];
  let statistics = [Statistic<"numFindings", "num-findings",
                              "Numerics warnings (or errors) reported">];
}

def MpcTestPrecisionPolicyPass
    : Pass<"mpc-test-precision-policy", "mlir::ModuleOp"> {
  let summary = "Emit a remark with each op's precision category";
  let description = [{
    Test-only analysis. For every op that implements
    PrecisionPolicyOpInterface, emits a remark at the op's location naming its
    category and the accumulator type it would use with a half compute type,
    so lit tests can pin the policy of every op with `expected-remark`:

    ```mlir
    // expected-remark@+1 {{precision: lower, accumulate: f32}}
    %0 = mpc.matmul %a, %b : tensor<4x8xf32>, tensor<8x2xf32>
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
}

def MpcInsertLossScalingPass : Pass<"mpc-insert-loss-scaling", "mlir::ModuleOp"> {
  let summary = "Seed the backward pass with the loss scale, so that "
                "gradients come out scaled";
  let description = [{
    Runs directly after mpc-autodiff. Replaces the backward seed (d loss =
    1, which mpc-autodiff marks `mpc.gradient_seed`) with `mpc.loss_scale`,
    the scale the runtime's loss scaler holds for this step: the same as
    multiplying the loss by the scale before differentiating. Every
    gradient in mpc.output's `gradients(...)` is then scaled; the fused
    optimizer divides the scale out, checks for inf/NaN and updates the
    scaler on the device. The loss the step reports is not scaled.

    Records the configuration as `mpc.loss_scaling` on the model:
    - `dynamic`: torch.amp.GradScaler's algorithm and defaults (init-scale
      65536, growth-factor 2 after growth-interval 2000 clean steps,
      backoff-factor 0.5 on any inf/NaN, growth tracker reset on an
      overflow), with DeepSpeed's `hysteresis` (overflows tolerated before
      a backoff; 1 is none) and `min-scale` (0: none);
    - `static`: a fixed scale (init-scale; fastai's old default was 512);
      an overflowing step is still skipped;
    - `none`: no scaling (the seed stays 1).
    `auto` (the default) is `dynamic` when the model stores anything in
    f16 and `none` otherwise (bf16 has f32's range; f32 needs nothing).

    Before:
    ```mlir
    %one = mpc.constant {mpc.gradient_seed} dense<1.0> : tensor<f32>
    %g = mpc.cross_entropy_grad %one, %logits, %y ...
    ```
    After:
    ```mlir
    %seed = mpc.loss_scale : tensor<f32>
    %g = mpc.cross_entropy_grad %seed, %logits, %y ...
    ```
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"auto\"",
           "auto, dynamic, static or none">,
    Option<"initScale", "init-scale", "double", /*default=*/"65536.0",
           "The first scale (dynamic) or the scale (static)">,
    Option<"growthFactor", "growth-factor", "double", /*default=*/"2.0",
           "Scale multiplier after growth-interval clean steps (> 1)">,
    Option<"backoffFactor", "backoff-factor", "double", /*default=*/"0.5",
           "Scale multiplier on an overflow, in (0, 1)">,
    Option<"growthInterval", "growth-interval", "int64_t",
           /*default=*/"2000", "Consecutive clean steps before growth">,
    Option<"hysteresis", "hysteresis", "int64_t", /*default=*/"1",
           "Overflows before a backoff (DeepSpeed); 1 is GradScaler">,
    Option<"minScale", "min-scale", "double", /*default=*/"0.0",
           "The scale never backs off below this (0: no floor)">];
}

def MpcFuseOptimizerPass : Pass<"mpc-fuse-optimizer", "mlir::ModuleOp"> {
  let summary = "Choose the fused optimizer that updates the fp32 master "
                "weights after the backward pass";
  let description = [{
    Runs after mpc-autodiff (and mpc-insert-loss-scaling). Checks the
    hyper-parameters against the optimizer's rules (as torch.optim does)
    and that every parameter shares one storage type (the update runs over
    the flat gradient buffer), then records them as `mpc.optimizer` on the
    model. Code generation emits one update pass over the flat buffers
    from it: unscale the gradients, check them for inf/NaN (with loss
    scaling), clip them by their global norm (`clip-norm` > 0, on unscaled
    fp32 values), apply SGD (momentum, Nesterov, L2 weight decay), Adam (L2
    weight decay) or AdamW (decoupled weight decay) in fp32 to the master
    weights, and write the half copy that the next forward pass reads. A
    step whose gradients overflowed leaves everything, moments included,
    bit-identical. With `accumulate` = N, gradients of N micro-batches are
    summed (in the parameters' type) and the optimizer runs on their mean
    once every N steps. Adam's step counter and the built-in schedule count
    applied steps only, so a skipped step changes nothing. With
    `skip-nonfinite` (the default) a step whose gradients hold inf or NaN is
    skipped without a loss scaler too, at the cost of one read of the
    gradients where nothing else checks them; without it such a step is
    applied, as torch.optim does. With `data-parallel` the f32 gradients are
    summed over the ranks of a data-parallel session after the backward
    pass (in rank order, as accumulation sums micro-batches) and the update
    divides by ranks x `accumulate`. `shard-optimizer` (with `data-parallel`)
    shards the optimizer state over the ranks (ZeRO stage 1): each rank
    updates its 1/N of the flat buffers, then the parameters are gathered.
    `optimizer-state=bf16` stores the moments (Adam's exp_avg and
    exp_avg_sq, SGD's momentum buffer) in bf16: they are read into f32,
    updated there and rounded to nearest, as optimi and torchao's bf16
    optimizers keep them. `master-weights` must match
    mpc-assign-precision's: with `none` the parameters are bf16 and the
    update rounds the f32 result stochastically (up with the probability
    of its distance from the bf16 value below, from 16 counter-based random
    bits keyed by seed, step and element, as llm.c does), so no small
    update is lost on average and a run resumed from a checkpoint draws
    the same bits; `kahan` keeps a bf16 compensation slot that carries what
    rounding to nearest lost into the next step (optimi's Kahan summation);
    `nearest` rounds to nearest (O3's update, for comparison).
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let options = [
    Option<"kind", "kind", "mlir::mpc::OptimizerKind",
           /*default=*/"mlir::mpc::OptimizerKind::Sgd", "The optimizer",
           [{::llvm::cl::values(
               clEnumValN(mlir::mpc::OptimizerKind::Sgd, "sgd",
                          "SGD with momentum (torch.optim.SGD)"),
               clEnumValN(mlir::mpc::OptimizerKind::Adam, "adam",
                          "torch.optim.Adam"),
               clEnumValN(mlir::mpc::OptimizerKind::AdamW, "adamw",
                          "torch.optim.AdamW"))}]>,
    Option<"lr", "lr", "double", /*default=*/"0.01",
           "Default learning rate (a runtime value)">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum (default; a runtime value)">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD with Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0",
           "Weight decay (default; a runtime value)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9",
           "Adam's first-moment decay">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999",
           "Adam's second-moment decay">,
    Option<"eps", "eps", "double", /*default=*/"1e-8",
           "Adam's denominator term, added in fp32">,
    Option<"clipNorm", "clip-norm", "double", /*default=*/"0.0",
           "Clip gradients to this global norm (0: no clipping)">,
    Option<"accumulate", "accumulate", "int64_t", /*default=*/"1",
           "Micro-batches per optimizer step">,
    Option<"schedule", "schedule", "mlir::mpc::LrSchedule",
           /*default=*/"mlir::mpc::LrSchedule::Constant",
           "Built-in learning-rate schedule",
           [{::llvm::cl::values(
               clEnumValN(mlir::mpc::LrSchedule::Constant, "constant",
                          "the runtime's learning rate as set"),
               clEnumValN(mlir::mpc::LrSchedule::WarmupCosine,
                          "warmup_cosine",
                          "linear warmup, then cosine decay to min-lr"))}]>,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"0",
           "warmup_cosine: applied steps of linear warmup">,
    Option<"decaySteps", "decay-steps", "int64_t", /*default=*/"0",
           "warmup_cosine: applied steps of cosine decay after warmup">,
    Option<"minLr", "min-lr", "double", /*default=*/"0.0",
           "warmup_cosine: the rate at the end of the decay">,
    Option<"skipNonfinite", "skip-nonfinite", "bool", /*default=*/"true",
           "Skip a step whose gradients hold inf or NaN, with or without "
           "loss scaling">,
    Option<"dataParallel", "data-parallel", "bool", /*default=*/"false",
           "Sum the gradients over the ranks of a data-parallel session "
           "before the update">,
    Option<"shardOptimizer", "shard-optimizer", "bool", /*default=*/"false",
           "With data-parallel: each rank keeps and updates 1/N of the "
           "optimizer state (ZeRO stage 1)">,
    Option<"optimizerState", "optimizer-state", "mlir::mpc::OptimizerState",
           /*default=*/"mlir::mpc::OptimizerState::F32",
           "The moments' storage type (f32 parameters or master-weights: "
           "f32 unless bf16; O3: the parameters' type unless bf16)",
           [{::llvm::cl::values(
               clEnumValN(mlir::mpc::OptimizerState::F32, "f32", "f32"),
               clEnumValN(mlir::mpc::OptimizerState::BF16, "bf16",
                          "bf16, updated in f32"))}]>,
    Option<"masterWeights", "master-weights", "mlir::mpc::MasterWeights",
           /*default=*/"mlir::mpc::MasterWeights::F32",
           "How bf16 parameters (mpc-assign-precision's master-weights) "
           "are updated",
           [{::llvm::cl::values(
               clEnumValN(mlir::mpc::MasterWeights::F32, "f32",
                          "f32 master weights"),
               clEnumValN(mlir::mpc::MasterWeights::None, "none",
                          "bf16 parameters, updated with stochastic rounding"),
               clEnumValN(mlir::mpc::MasterWeights::Kahan, "kahan",
                          "bf16 parameters and a bf16 Kahan compensation"),
               clEnumValN(mlir::mpc::MasterWeights::Nearest, "nearest",
                          "bf16 parameters rounded to nearest (O3's update; "
                          "for comparison)"))}]>];
}

def MpcFormKernelsPass : Pass<"mpc-form-kernels", "mlir::ModuleOp"> {
  let summary = "Group the ops of each model into kernels (mpc.fusion)";
  let description = [{
    Decides what code generation emits as one kernel: every group of two or
    more ops becomes an `mpc.fusion` whose body holds the ops and whose
    results are exactly what the kernel writes to memory. Code generation
    runs the same formation and emits one kernel (or one GEMM call) per
    group; ops outside any group are one kernel each (a reshape outside a
    group is an alias: no kernel at all).

    Rules, each pinned by tests/Passes/form-kernels.mlir:
    1. GEMM epilogues (`gemm-epilogues`): a tanh GELU of a biased linear's
       output, where cuBLASLt's GELU_AUX_BIAS epilogue can apply it (the
       bias has the output's type, the output's width is a multiple of 8),
       joins the linear; so does a widening cast to f32 of a matmul's or
       batch_matmul's half product when the cast is its only reader (the
       GEMM writes f32 directly: one rounding fewer). The same cast of a
       reduce_sum's sum, or of an embedding gradient's table (accumulated
       in f32 by atomics), joins the reduction (a `reduce` group).
    2. Row kernels (`rows`): the loop ops that compute a softmax's (or
       log_softmax's, layer_norm's or quantize's) input, or a
       batch_norm_grad's incoming gradient, and are read only there, with
       one evaluation per element, join it (the attention's scale and causal
       mask: the scores are never stored); so does the elementwise op that
       computes a layer norm's, a quantize's or a batch_norm_grad's input
       and is read after it (the residual sum, which the layer norm's kernel
       stores; a residual block's gradient, which its shortcut reads too);
       so does the chain of elementwise ops of one shape applied to a
       batch_norm's result (its ReLU, the residual sum and the ReLU after
       it: what it normalised is never stored), a softmax gradient or a
       layer norm's input gradient (the residual gradient added to it), each
       the only reader of the one before. A max_pool2d_with_indices that
       alone reads a batch_norm's result or that chain's end joins it too,
       as the group's last op: the pool's loads normalise (the stem of a
       ResNet, batch norm, ReLU and max pool: what is pooled is never
       stored). Dropout never joins a row kernel. A current-scaling quantize of what a
       layer_norm's or a layer_norm_grad's kernel stores (with its bias
       sum) joins that
       kernel's group, which then runs where the quantize was, unless
       something before the quantize reads what the group stores: the
       norm's kernel finds the amax as it stores, and the quantize has no
       amax pass over the tensor of its own. A delayed-scaling quantize of
       a layer_norm's result joins it the same way:
       the norm's kernel casts y to FP8 with the scale the step starts
       with, and the quantize writes only the transposed copy, from the FP8
       bytes.
    3. Loop fusion, from each group's last op backwards: a producer that is
       elementwise or a view joins the group when
       - every reader of its result is in the group; an elementwise
         producer must also have as many elements as the group's results,
         so that fusion never recomputes it per element of a broadcast; or
       - its result has the shape of the group's results and every reader
         outside the group comes after the group (the value is then one
         more output of the kernel).
       With `views`, reshape, transpose, slice and slice_grad join as index
       arithmetic; without, only elementwise ops do. A parameter's half
       copy never joins: the fused optimizer writes it.
    4. Siblings (`siblings`): two loop groups whose results have one shape,
       that read a common value and do not depend on each other, are one
       kernel with both outputs (the q, k and v of an attention read from
       one qkv projection).
    5. Attention operands (`attention-views`): the chain of slices (without
       strides), reshapes and transposes that makes an mpc.attention's (or
       its gradient's) query, key or value from a stored tensor, read only
       by attentions, joins each of them as a copy (an `attention` group):
       the kernels read the stored tensor through strides (the QKV
       projection's output, split into heads, in place). Not where a
       reshape merges dims that are not contiguous, or the head dim would
       not be.
    6. Classifier (`classifier`): a cross_entropy and the cross_entropy_grad
       of the same logits and targets are one `classifier` group, placed at
       the gradient: one pass over each row of logits gives its loss and its
       gradient (the gradient's seed, the loss scale, is known before the
       backward pass starts), and code generation writes the gradient over
       the logits when nothing reads them after it (llm.c's fused
       classifier). Not when the loss is read before the gradient, nor
       when it is the gradient's seed.
       With `classifier-gemms`, a bias-free linear that computes the logits
       (read only by the classifier, through reshapes) and the two GEMMs of
       their gradient, dX = dlogits · W and dW = dlogitsᵀ · X (the linear's
       input, through reshapes), with dW's widening cast, join it as a
       `linear_classifier` group, placed at the later GEMM: code generation
       runs the five over chunks of rows, so that one chunk of logits
       exists at a time (Liger's fused linear cross-entropy), accumulating
       dW. Not where the logits and their gradient differ in type, nor
       where dX or dW is read before the later GEMM.
    A `gemm` or `reduce` group is placed where its GEMM or reduction was
    (its epilogue reads nothing else), so that the GEMM's operands are not
    kept alive until a late reader of the epilogue's result; every other
    group where its last op was. The rules above keep every value defined
    before it is read.
  }];
  let dependentDialects = ["mlir::mpc::MpcDialect"];
  let options = [
    Option<"views", "views", "bool", /*default=*/"true",
           "Fuse reshape, transpose, slice and slice_grad as index arithmetic">,
    Option<"gemmEpilogues", "gemm-epilogues", "bool", /*default=*/"true",
           "Fuse a GELU or a widening cast into the GEMM that produces its "
           "operand">,
    Option<"siblings", "siblings", "bool", /*default=*/"true",
           "Fuse loop groups of one shape that read a common value">,
    Option<"rows", "rows", "bool", /*default=*/"true",
           "Fuse loop ops into softmax kernels: those computing the input, "
           "those applied to a softmax gradient">,
    Option<"attentionViews", "attention-views", "bool", /*default=*/"true",
           "Let attention kernels read their operands in place through the "
           "views that make them">,
    Option<"classifier", "classifier", "bool", /*default=*/"true",
           "Compute a cross-entropy and its gradient in one pass over the "
           "logits">,
    Option<"classifierGemms", "classifier-gemms", "bool", /*default=*/"true",
           "Run the classifier's linear and its gradient's GEMMs with it "
           "(over row chunks)">,
    Option<"batchNormGradientPrologues", "batch-norm-gradient-prologues",
           "bool", /*default=*/"true",
           "Fuse what computes a batch_norm_grad's incoming gradient (the "
           "ReLU's gradient) into its kernels (the cpu target does not: "
           "there its passes over a channel evaluate it again and again on "
           "one thread, where the GPU's are bound by memory)">];
  let statistics = [
    Statistic<"numGroups", "num-groups", "Kernel groups formed">,
    Statistic<"numFusedOps", "num-fused-ops", "Ops placed in kernel groups">];
}

#endif // MPC_PASSES_PASSES_TD
