//===- MpcOps.td - mpc dialect ops -------------------------*- tablegen -*-===//
//
// Ops of the mpc dialect. Each op's invariants are numbered (C1, C2, ...) in
// its description; the check in MpcOps.cpp and the test in
// tests/Dialect/invalid.mlir carry the same tag (`linear_c1`).
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_MPCOPS_TD
#define MPC_DIALECT_MPCOPS_TD

include "dialect/MpcBase.td"
include "dialect/MpcEnums.td"
include "dialect/MpcAttrs.td"
include "dialect/MpcInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Mpc_Float : AnyTypeOf<[F32, F16, BF16]>;
def Mpc_FloatTensor : StaticShapeTensorOf<[F32, F16, BF16]>;
def Mpc_IndexTensor : StaticShapeTensorOf<[I32, I64]>;
def Mpc_MaskTensor : StaticShapeTensorOf<[I1]>;
// A max pooling window's argmax, as its position in the window.
def Mpc_WindowIndexTensor : StaticShapeTensorOf<[I8]>;
def Mpc_ScalarFloatTensor : 0DTensorOf<[F32, F16, BF16]>;
def Mpc_InputTensor : StaticShapeTensorOf<[F32, F16, BF16, I32, I64]>;
// Reshape also flattens integer targets ([B, T] -> [B * T]).
def Mpc_ReshapeTensor : StaticShapeTensorOf<[F32, F16, BF16, I32, I64,
                                              F8E4M3FN, F8E5M2]>;
// FP8 (OCP e4m3 and e5m2): the operands of scaled GEMMs, which
// mpc-assign-precision alone writes (--fp8).
def Mpc_Fp8Tensor : StaticShapeTensorOf<[F8E4M3FN, F8E5M2]>;
// Transposes also copy FP8 tensors into the layout scaled_matmul reads.
def Mpc_ViewTensor : StaticShapeTensorOf<[F32, F16, BF16, F8E4M3FN, F8E5M2]>;
// An FP8 tensor's inverse scale.
def Mpc_ScaleTensor : 0DTensorOf<[F32]> {
  let builderCall = "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

/// Ops with a reverse-mode rule, implemented in MpcGradients.cpp.
defvar Differentiable = DeclareOpInterfaceMethods<DifferentiableOpInterface>;

/// An op with a precision category. The category is data in ODS, next to the
/// op, and reaches C++ through PrecisionPolicyOpInterface.
class Mpc_PolicyOp<string mnemonic, string precisionClass,
                   list<Trait> traits = []>
    : Mpc_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<PrecisionPolicyOpInterface,
                                  ["getPrecisionClass"]>])> {
  let extraClassDefinition = [{
    ::mlir::mpc::PrecisionClass $cppClass::getPrecisionClass() {
      return ::mlir::mpc::PrecisionClass::}] # precisionClass # [{;
    }
  }];
}

class Mpc_UnaryOp<string mnemonic, string precisionClass,
                  list<Trait> traits = []>
    : Mpc_PolicyOp<mnemonic, precisionClass,
                   !listconcat(traits, [Pure, SameOperandsAndResultType,
                                        Differentiable])> {
  let arguments = (ins Mpc_FloatTensor:$input);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

class Mpc_BinaryOp<string mnemonic, string expr>
    : Mpc_PolicyOp<mnemonic, "Promote",
                   [Pure, InferTypeOpAdaptor, Differentiable]> {
  let summary = "Elementwise `" # expr # "` with broadcasting";
  let description = [{
    Elementwise `}] # expr # [{` with NumPy broadcasting: shapes are aligned
    at the right, and each pair of dims must be equal or one of them 1.

    C1: `lhs` and `rhs` have the same element type.
    C2: the shapes broadcast.

    ```mlir
    %0 = mpc.}] # mnemonic # [{ %a, %b : tensor<4x8xf32>, tensor<8xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$lhs, Mpc_FloatTensor:$rhs);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

class Mpc_ReduceOp<string mnemonic, string precisionClass, string what>
    : Mpc_PolicyOp<mnemonic, precisionClass,
                   [Pure, InferTypeOpAdaptor, Differentiable]> {
  let summary = "Reduces to the " # what # " over the given dims";
  let description = [{
    The }] # what # [{ of `input` over `dims`. The reduced dims are dropped
    from the result, or kept with extent 1 under `keepdim`.

    C1: `dims` is not empty, and each dim is in `[0, rank)` and appears once.

    ```mlir
    %0 = mpc.}] # mnemonic # [{ %x dims [1] : tensor<4x8xf32>  // tensor<4xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keepdim);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `dims` $dims (`keepdim` $keepdim^)? attr-dict `:` type($input)
  }];
}

class Mpc_Pool2dOp<string mnemonic, string what>
    : Mpc_PolicyOp<mnemonic, "Follow",
                   [Pure, InferTypeOpAdaptor, Differentiable]> {
  let summary = what # " pooling over the spatial dims of NCHW";
  let description = [{
    }] # what # [{ pooling of an NCHW tensor over windows of `kernel`
    (height, width), moved by `stride` (default: the kernel), with `padding`
    zeros on each side (default 0).}] # !if(!eq(mnemonic, "avg_pool2d"), [{
    Padding counts towards the divisor (PyTorch's `count_include_pad=True`).}],
    [{ Padding never wins the maximum.}]) # [{
    Each output extent is `(H + 2 * padding - kernel) / stride + 1`, rounded
    down, or with `ceil_mode` rounded up as PyTorch does: the last window may
    run past the padding, but must start within the input or the leading
    padding; }] # !if(!eq(mnemonic, "avg_pool2d"), [{its divisor counts only
    what lies within input and padding.}], [{what lies past the input is
    ignored.}]) # [{

    C1: `input` has rank 4.
    C2: `kernel`, `stride` and `padding` have two entries; kernel and stride
        are positive, padding is non-negative and at most half the kernel.
    C3: each output extent is positive.

    ```mlir
    %0 = mpc.}] # mnemonic # [{ %x kernel [2, 2] : tensor<8x16x32x32xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       OptionalAttr<DenseI64ArrayAttr>:$stride,
                       OptionalAttr<DenseI64ArrayAttr>:$padding,
                       UnitAttr:$ceil_mode);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `kernel` $kernel (`stride` $stride^)? (`padding` $padding^)?
    (`ceil_mode` $ceil_mode^)? attr-dict `:` type($input)
  }];
  let extraClassDeclaration = [{
    /// The stride, defaulting to the kernel.
    ::llvm::SmallVector<int64_t, 2> getStrideOrDefault();
    /// The padding, defaulting to zero.
    ::llvm::SmallVector<int64_t, 2> getPaddingOrDefault();
  }];
}

//===----------------------------------------------------------------------===//
// Model structure
//===----------------------------------------------------------------------===//

def Mpc_ModelOp : Mpc_Op<"model", [IsolatedFromAbove, Symbol, SingleBlock,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "A model: named inputs, parameters, state and a forward body";
  let description = [{
    The block arguments are, in order, the inputs, the trainable parameters
    and the non-trainable state. Their names are the names a user sees in
    checkpoints and in the runtime API. Parameters and state carry an
    initialiser (see `#mpc.init`).

    ```mlir
    mpc.model @mlp
        inputs(%x: tensor<64x784xf32>, %y: tensor<64xi32>)
        params(%w: tensor<10x784xf32> = kaiming_uniform,
               %b: tensor<10xf32> = zeros) {
      %logits = mpc.linear %x, %w, %b
          : tensor<64x784xf32>, tensor<10x784xf32>, tensor<10xf32>
      %loss = mpc.cross_entropy %logits, %y : tensor<64x10xf32>, tensor<64xi32>
      mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<64x10xf32>)
    }
    ```

    C1: there is one name per input, parameter and state argument, and one
        initialiser per parameter and state argument.
    C2: names are of the form `[A-Za-z_][A-Za-z0-9_.-]*` and unique.
    C3: inputs are tensors of f32, f16, bf16, i32 or i64; parameters and
        state are float tensors; all have static shapes, no extent 0, a
        byte count that fits in 64 bits and rank at most 8 (the runtime's
        tensor descriptors).
    C4: each initialiser suits its tensor (`kaiming_*` and `xavier_*` need
        rank >= 2 to have fans).
    C5: state is used only as the running statistics (`running_mean`,
        `running_var`) of `mpc.batch_norm`, each by one operand of one op
        only, or as the delayed-scaling table of `mpc.quantize` ops, each
        of which uses its own column.
    C6: the model's name is a C identifier (`[A-Za-z_][A-Za-z0-9_]*`): it
        names the library, its header, its C functions and its kernels.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$input_names,
                       StrArrayAttr:$param_names,
                       TypedArrayAttrBase<Mpc_InitializerAttr,
                                          "initialiser array">:$param_inits,
                       StrArrayAttr:$state_names,
                       TypedArrayAttrBase<Mpc_InitializerAttr,
                                          "initialiser array">:$state_inits);
  let regions = (region SizedRegion<1>:$body);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    unsigned getNumInputs() { return getInputNames().size(); }
    unsigned getNumParams() { return getParamNames().size(); }
    unsigned getNumStates() { return getStateNames().size(); }
    ::mlir::Block::BlockArgListType getInputs() {
      return getBody().front().getArguments().take_front(getNumInputs());
    }
    ::mlir::Block::BlockArgListType getParams() {
      return getBody().front().getArguments().slice(getNumInputs(),
                                                    getNumParams());
    }
    ::mlir::Block::BlockArgListType getStates() {
      return getBody().front().getArguments().take_back(getNumStates());
    }
    /// The name of a block argument, whichever group it is in.
    ::llvm::StringRef getArgName(::mlir::BlockArgument arg);
    /// Appends a state tensor (the last block argument).
    ::mlir::BlockArgument addState(::llvm::StringRef name, ::mlir::Type type,
                                   InitializerAttr init, ::mlir::Location loc);
    /// The terminator; null while the body is malformed.
    class OutputOp getOutputOp();
  }];
}

def Mpc_OutputOp : Mpc_Op<"output", [Pure, Terminator, HasParent<"ModelOp">,
                                     AttrSizedOperandSegments]> {
  let summary = "The model's scalar loss and named extra outputs";
  let description = [{
    Ends a model. `loss` is what training minimises; the other outputs are
    returned by evaluation (logits, for example).

    ```mlir
    mpc.output loss(%loss : tensor<f32>) logits(%logits : tensor<64x10xf32>)
    ```

    After mpc-autodiff, a `gradients(...)` group holds the gradient of the
    loss with respect to each parameter, in parameter order:

    ```mlir
    mpc.output loss(%loss : tensor<f32>) gradients(%dw : tensor<10x784xf32>)
    ```

    C1: there is one name per extra output; names are identifiers, unique,
        and not `loss` or `gradients`.
    C2: `gradients`, when present, has one value per parameter of the model,
        of the parameter's type.
    C3: extra outputs have rank at most 8 (the runtime's tensor
        descriptors).
  }];
  let arguments = (ins Mpc_ScalarFloatTensor:$loss,
                       Variadic<AnyStaticShapeTensor>:$outputs,
                       Variadic<Mpc_FloatTensor>:$gradients,
                       StrArrayAttr:$output_names);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Kernel groups (mpc-form-kernels)
//===----------------------------------------------------------------------===//

def Mpc_FusionOp : Mpc_Op<"fusion", [HasParent<"ModelOp">, SingleBlock,
    RecursiveMemoryEffects]> {
  let summary = "One kernel of the step: the ops it computes, what it writes";
  let description = [{
    Made by mpc-form-kernels, in the spirit of XLA's fusion computations:
    code generation emits one kernel (or one GEMM call with its epilogue)
    per `mpc.fusion`, and knows nothing of which ops fuse. The body reads
    values defined before the group, which the kernel loads from memory;
    the values it yields are the group's results, the only ones the kernel
    stores. Every other value of the body stays in registers.

    - `loop`: elementwise ops and views (reshape, transpose, slice,
      slice_grad, broadcast) evaluated per element of the results, which all
      have one shape; a view is index arithmetic, never a copy.
    - `gemm`: a GEMM-like op followed by what its epilogue applies (a tanh
      GELU, a widening cast of the product).
    - `reduce`: a reduce_sum (or an embedding gradient, a scatter-add)
      whose f32 accumulator is stored as f32 by the widening cast that
      follows it.
    - `row`: a softmax, log_softmax or layer_norm with the loop ops that
      compute its input (the attention's scale and causal mask, the
      residual sum before a layer norm, which the kernel also stores), or
      their gradient with the loop ops applied to its (first) result (the
      residual gradient added to a layer norm's input gradient); a
      batch_norm with the loop ops applied to its result (the ReLU, the
      residual sum), then possibly a max_pool2d_with_indices of what they
      compute, whose loads apply them (nothing before the pool is stored),
      or its gradient with those computing its incoming
      gradient (the ReLU's gradient); a quantize with those computing its
      input (with current scaling both its kernels, the amax pass and the
      cast, evaluate them); the row kernel evaluates them per element. A
      quantize that writes a transposed copy may also sum its input over
      rows, the bias gradient of the FP8 weight gradient that reads the
      copy (a reduce_sum over dim 0 of the input or of its reshape to 2-d,
      and the cast of the sum to f32): each tile it reads gives the sum's
      partials.
    - `attention`: an mpc.attention or mpc.attention_grad after the views
      (slice, reshape, transpose) that make its operands from a stored
      tensor: the kernels read that tensor in place, through strides (the
      QKV projection's output split into heads); a gradient's group also
      holds the reshapes, slice_grads and adds that put dq, dk and dv side
      by side, which its kernels write in place.
    - `classifier`: a cross_entropy and its gradient over the same logits
      and targets (llm.c's fused classifier): one pass over each row gives
      its loss and its gradient, which code generation writes over the
      logits when nothing reads them after the group.
    - `linear_classifier`: a classifier with the bias-free linear that
      computes its logits and the two GEMMs of their gradient (dX and dW,
      with dW's widening cast): code generation runs them over chunks of
      rows, so that one chunk of logits exists at a time.

    ```mlir
    %q = mpc.fusion loop {
      %s = mpc.slice %qkv starts [0, 0, 0] limits [4, 16, 64] : tensor<4x16x192xf32>
      %r = mpc.reshape %s : tensor<4x16x64xf32> to tensor<4x16x2x32xf32>
      %t = mpc.transpose %r perm [0, 2, 1, 3] : tensor<4x16x2x32xf32>
      mpc.yield %t : tensor<4x2x16x32xf32>
    } : tensor<4x2x16x32xf32>
    ```

    C1: the body is one block ending in `mpc.yield`, whose operands have the
        types of the results, one each, and are defined in the body.
    C2: the body holds at least one op besides the terminator, and no
        `mpc.fusion`.
    C3: `loop`: every op of the body is elementwise or a view, and the
        results all have one shape.
    C4: `gemm`: the first op is linear, matmul or batch_matmul, and every
        other op reads the product.
    C5: `reduce`: the body is a reduce_sum or an embedding_grad and a cast
        of its result to f32.
    C6: `row`: the body holds one softmax, log_softmax, layer_norm,
        batch_norm, softmax_grad, log_softmax_grad, layer_norm_grad,
        batch_norm_grad or quantize; every other op is elementwise or a
        view, but for a transposing quantize's one reduce_sum over dim 0
        of a 2-d value, after it. Two only where a layer_norm or
        layer_norm_grad comes first and a current-scaling quantize of a
        value computed after it in the body (what its kernel stores) second:
        the norm's kernel finds the quantize's amax.
    C7: `attention`: one attention or its gradient; every op before it is
        a reshape, transpose or slice, and every op after it (a gradient's
        only) a reshape, slice_grad or add, up to a current-scaling
        quantize of what the kernels store (the attention's result, or the
        add its gradient is scattered into), if any, which only a
        transposing quantize's reshape, reduce_sum and cast (its bias sum)
        follow.
    C8: `classifier`: a cross_entropy and a cross_entropy_grad of the same
        logits, targets and ignore_index.
    C9: `linear_classifier`: a bias-free linear first, then a classifier's
        two ops, two matmuls reading its gradient, at most one cast, and
        reshapes.
  }];
  let arguments = (ins FusionKind:$kind);
  let results = (outs Variadic<AnyStaticShapeTensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$kind attr-dict-with-keyword $body `:` type($results)";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The ops of the group in program order, the terminator excluded.
    ::llvm::SmallVector<::mlir::Operation *> getGroupOps();
    /// The terminator; null while the body is malformed.
    class YieldOp getYieldOp();
  }];
}

def Mpc_YieldOp : Mpc_Op<"yield", [Pure, Terminator, HasParent<"FusionOp">]> {
  let summary = "The values an `mpc.fusion` writes to memory";
  let arguments = (ins Variadic<AnyStaticShapeTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

//===----------------------------------------------------------------------===//
// GEMM-like ops (lower)
//===----------------------------------------------------------------------===//

def Mpc_LinearOp : Mpc_PolicyOp<"linear", "Lower", [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "x · Wᵀ + b, as torch.nn.functional.linear";
  let description = [{
    `input` is `[..., K]`, `weight` is `[N, K]`, the optional `bias` is `[N]`;
    the result is `[..., N]`.

    C1: `input` has rank >= 1 and `weight` has rank 2.
    C2: the last dim of `input` equals dim 1 of `weight`.
    C3: `bias`, when present, has shape `[N]`.
    C4: all operands have the same element type.

    ```mlir
    %h = mpc.linear %x, %w, %b : tensor<64x784xf32>, tensor<256x784xf32>, tensor<256xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, Mpc_FloatTensor:$weight,
                       Optional<Mpc_FloatTensor>:$bias);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,`
    type($weight) (`,` type($bias)^)?
  }];
}

def Mpc_MatmulOp : Mpc_PolicyOp<"matmul", "Lower", [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "Matrix product of two rank-2 tensors";
  let description = [{
    `op(lhs) · op(rhs)` where `op` transposes under `transpose_lhs` /
    `transpose_rhs`.

    C1: both operands have rank 2.
    C2: the contracted dims agree.
    C3: the operands have the same element type.

    ```mlir
    %c = mpc.matmul %a, %b transpose_rhs : tensor<4x8xf32>, tensor<2x8xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$lhs, Mpc_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

def Mpc_BatchMatmulOp : Mpc_PolicyOp<"batch_matmul", "Lower",
                                     [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "Batched matrix product over the leading dims";
  let description = [{
    Matrix products of the two trailing dims, batched over equal leading dims:
    `[B..., M, K] · [B..., K, N] -> [B..., M, N]`, with optional transposes of
    each operand's two trailing dims.

    C1: both operands have the same rank, at least 3.
    C2: the batch dims are equal.
    C3: the contracted dims agree.
    C4: the operands have the same element type.

    ```mlir
    %s = mpc.batch_matmul %q, %k transpose_rhs
        : tensor<4x2x16x32xf32>, tensor<4x2x16x32xf32>  // tensor<4x2x16x16xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$lhs, Mpc_FloatTensor:$rhs,
                       UnitAttr:$transpose_lhs, UnitAttr:$transpose_rhs);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`transpose_lhs` $transpose_lhs^)?
    (`transpose_rhs` $transpose_rhs^)? attr-dict `:` type($lhs) `,` type($rhs)
  }];
}

def Mpc_Conv2dOp : Mpc_PolicyOp<"conv2d", "Lower", [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "2-d convolution of NCHW input with OIHW weights";
  let description = [{
    As torch.nn.functional.conv2d: `input` `[N, C, H, W]`, `weight`
    `[O, C/groups, KH, KW]`, optional `bias` `[O]`. `stride` and `dilation`
    default to 1, `padding` (zeros on both sides) to 0, `groups` to 1.

    C1: `input` and `weight` have rank 4.
    C2: `stride`, `padding` and `dilation` have two entries; stride and
        dilation are positive, padding non-negative; `groups` is positive.
    C3: `groups` divides C and O, and dim 1 of `weight` is C / groups.
    C4: `bias`, when present, has shape `[O]`.
    C5: each output extent is positive, and the kernel is at least 1x1.
    C6: all operands have the same element type.

    ```mlir
    %y = mpc.conv2d %x, %w stride [2, 2] padding [1, 1]
        : tensor<8x3x32x32xf32>, tensor<16x3x3x3xf32>  // tensor<8x16x16x16xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, Mpc_FloatTensor:$weight,
                       Optional<Mpc_FloatTensor>:$bias,
                       OptionalAttr<DenseI64ArrayAttr>:$stride,
                       OptionalAttr<DenseI64ArrayAttr>:$padding,
                       OptionalAttr<DenseI64ArrayAttr>:$dilation,
                       OptionalAttr<I64Attr>:$groups);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? (`stride` $stride^)?
    (`padding` $padding^)? (`dilation` $dilation^)? (`groups` $groups^)?
    attr-dict `:` type($input) `,` type($weight) (`,` type($bias)^)?
  }];
  let extraClassDeclaration = [{
    ::llvm::SmallVector<int64_t, 2> getStrideOrDefault();
    ::llvm::SmallVector<int64_t, 2> getPaddingOrDefault();
    ::llvm::SmallVector<int64_t, 2> getDilationOrDefault();
    int64_t getGroupsOrDefault() { return getGroups().value_or(1); }
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise ops
//===----------------------------------------------------------------------===//

def Mpc_AddOp : Mpc_BinaryOp<"add", "lhs + rhs">;
def Mpc_SubOp : Mpc_BinaryOp<"sub", "lhs - rhs">;
def Mpc_MulOp : Mpc_BinaryOp<"mul", "lhs * rhs">;
def Mpc_DivOp : Mpc_BinaryOp<"div", "lhs / rhs">;

def Mpc_NegOp : Mpc_UnaryOp<"neg", "Follow"> {
  let summary = "Elementwise negation";
}
def Mpc_ReluOp : Mpc_UnaryOp<"relu", "Follow"> {
  let summary = "Elementwise max(x, 0)";
}
def Mpc_TanhOp : Mpc_UnaryOp<"tanh", "Follow"> {
  let summary = "Elementwise hyperbolic tangent";
}
def Mpc_SigmoidOp : Mpc_UnaryOp<"sigmoid", "Follow"> {
  let summary = "Elementwise 1 / (1 + exp(-x))";
}
def Mpc_SiluOp : Mpc_UnaryOp<"silu", "Follow"> {
  let summary = "Elementwise x * sigmoid(x) (SiLU, swish; Llama's gated MLP)";
}
def Mpc_ExpOp : Mpc_UnaryOp<"exp", "KeepF32"> {
  let summary = "Elementwise exponential (overflows half above 11.09)";
}
def Mpc_LogOp : Mpc_UnaryOp<"log", "KeepF32"> {
  let summary = "Elementwise natural logarithm";
}
def Mpc_SqrtOp : Mpc_UnaryOp<"sqrt", "Follow"> {
  let summary = "Elementwise square root";
}
def Mpc_RsqrtOp : Mpc_UnaryOp<"rsqrt", "KeepF32"> {
  let summary = "Elementwise 1 / sqrt(x) (kept in f32, as torch.autocast does)";
}

def Mpc_GeluOp : Mpc_PolicyOp<"gelu", "Follow",
                              [Differentiable, Pure, SameOperandsAndResultType]> {
  let summary = "Gaussian error linear unit, exact (erf) or tanh-approximated";
  let description = [{
    `x * Φ(x)`, where Φ is the normal CDF computed with `erf` (default) or with
    the tanh approximation of GPT-2 (`approximate tanh`).

    ```mlir
    %0 = mpc.gelu %x approximate tanh : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input,
                       DefaultValuedAttr<GeluApproximation,
                           "::mlir::mpc::GeluApproximation::Erf">:$approximate);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`approximate` $approximate^)? attr-dict `:` type($input)
  }];
}

def Mpc_ScaleOp : Mpc_PolicyOp<"scale", "Follow",
                               [Differentiable, Pure, SameOperandsAndResultType]> {
  let summary = "Multiplies by a compile-time constant";
  let description = [{
    `input * factor`, with `factor` kept as f64 so that the numerics lint can
    tell whether it survives in the precision the op runs in.

    C1: `factor` is finite in f32 (kernels multiply in f32).

    ```mlir
    %0 = mpc.scale %x by 0.125 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Mpc_ClampOp : Mpc_PolicyOp<"clamp", "Follow",
                               [Differentiable, Pure, SameOperandsAndResultType]> {
  let summary = "Elementwise clamp into [min, max] (ReLU6, hardtanh, ONNX Clip)";
  let description = [{
    `min(max(input, min), max)`, with either bound left out meaning none on
    that side. A NaN input stays NaN, as `torch.clamp` keeps it. The gradient
    passes where `min < input < max` and is 0 elsewhere, as PyTorch's
    hardtanh (ReLU6) and `mpc.relu` at their kinks. The bounds are f64 so
    that the numerics lint can see whether they survive in half precision.

    C1: at least one of `min` and `max` is given.
    C2: each bound is finite in f32 (kernels compare in f32), and
        `min <= max`.

    ```mlir
    %0 = mpc.clamp %x min 0.0 max 6.0 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, OptionalAttr<F64Attr>:$min,
                       OptionalAttr<F64Attr>:$max);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`min` $min^)? (`max` $max^)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Mpc_WhereOp : Mpc_PolicyOp<"where", "Promote", [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "Selects `on_true` where `condition` holds, else `on_false`";
  let description = [{
    Elementwise select with NumPy broadcasting of all three operands. With
    `mpc.causal_mask` it writes out masked attention.

    C1: `on_true` and `on_false` have the same element type.
    C2: the three shapes broadcast.

    ```mlir
    %m = mpc.where %mask, %scores, %neg_inf
        : tensor<16x16xi1>, tensor<4x2x16x16xf32>, tensor<f32>
    ```
  }];
  let arguments = (ins Mpc_MaskTensor:$condition, Mpc_FloatTensor:$on_true,
                       Mpc_FloatTensor:$on_false);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $condition `,` $on_true `,` $on_false attr-dict `:` type($condition) `,`
    type($on_true) `,` type($on_false)
  }];
}

def Mpc_DropoutOp : Mpc_PolicyOp<"dropout", "Follow", [Differentiable, SameOperandsAndResultType]> {
  let summary = "Zeroes elements with probability `rate`, scales the rest";
  let description = [{
    In training, each element is kept with probability `1 - rate` and scaled by
    `1 / (1 - rate)`; in evaluation it is the identity. The mask is a function
    of the session seed, the op's `seed`, the step and the element's index, so
    the backward pass regenerates the same mask. Not `Pure`: two dropouts of
    the same value draw different masks and must not be merged.

    C1: `0 <= rate < 1`, also as f32.

    ```mlir
    %0 = mpc.dropout %x rate 0.1 seed 7 : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, F64Attr:$rate,
                       DefaultValuedAttr<I64Attr, "0">:$seed);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `rate` $rate (`seed` $seed^)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Mpc_CastOp : Mpc_PolicyOp<"cast", "Follow", [Differentiable, Pure]> {
  let summary = "Converts between float types, rounding to nearest even";
  let description = [{
    Changes the element type, rounding to nearest even; values beyond the
    target's range become infinities.

    C1: `input` and `result` have the same shape.

    Folds (none changes a value; mpc-fold-casts applies them): a cast to the
    same type is its input; a cast of a cast whose first step is exact (a
    widening, such as f16 to f32) is one cast from the original value, or the
    value itself when the types meet again (f16 to f32 to f16); a cast of a
    splat constant is a constant of the new type, rounded to nearest even.
    A rounding is never dropped: f32 to f16 to f32 stays.

    ```mlir
    %0 = mpc.cast %x : tensor<4x8xf32> to tensor<4x8xf16>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Mpc_ConstantOp : Mpc_PolicyOp<"constant", "Follow",
    [ConstantLike, Pure, AllTypesMatch<["value", "result"]>]> {
  let summary = "A constant float tensor";
  let description = [{
    ```mlir
    %neg_inf = mpc.constant dense<0xFF800000> : tensor<f32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

def Mpc_LossScaleOp : Mpc_Op<"loss_scale", [MemoryEffects<[MemRead]>]> {
  let summary = "The loss scale of this step, from the runtime's loss scaler";
  let description = [{
    mpc-insert-loss-scaling seeds the backward pass with this value instead
    of 1, so that every gradient comes out multiplied by the scale; the fused
    optimizer divides it out. The value lives in the session's loss-scaler
    state on the device (mpc.model's `mpc.loss_scaling` configures it), and
    the op records it as the scale of the step, which is what the runtime
    divides by when it hands out gradients.

    ```mlir
    %seed = mpc.loss_scale : tensor<f32>
    ```
  }];
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// FP8 (mpc-assign-precision's --fp8)
//===----------------------------------------------------------------------===//

def Mpc_QuantizeOp : Mpc_Op<"quantize",
    [DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "A tensor in FP8 with one scale, current or delayed";
  let description = [{
    The FP8 copy of `input` that a scaled GEMM reads, and the inverse of its
    scale. Each element is `input · s` rounded to the format (nearest even;
    e4m3 saturates, e5m2 overflows to inf) and `scale_inv` is 1 / s. s is a
    power of two, so the scaling is exact: every element is rounded once,
    and dequantizing (`scale_inv · q`) is exact.

    Current scaling (the default): amax is the largest magnitude of the
    input (NaN ignored) and s the largest power of two with amax · s at
    most the format's largest finite value (e4m3: 448, e5m2: 57344), or 1
    where amax is 0 or not finite. With `unscaled`, s is 1 (a plain cast,
    for comparison).

    Delayed scaling (`delayed`): s comes from earlier steps, kept in a
    model state table `[4 + L, T]` of f32 shared by the step's T delayed
    quantizations, of which this one is column `index`:
    - row 0 holds e, s = 2^e;
    - row 1 is this step's amax, which the op raises to its input's
      (NaN ignored);
    - row 2 counts this step's saturated elements (below), row 3 those of
      the last optimizer step (each at most 2^24, where f32 still counts
      one by one);
    - rows 4 .. 4 + L are the last L applied steps' amaxes, newest first.
    At the end of each optimizer step one kernel moves row 2 to row 3 and
    zeroes rows 1 and 2; when the step applies its update, it first moves
    each column's row 1 (its maximum over data-parallel ranks) into the
    history, and sets e to the exponent of the largest power of two p with
    max(history) · p at most the format's largest value, less `margin`
    (e = 0 while the history's maximum is 0 or not finite). A skipped
    step leaves e and the history. The columns of e4m3 quantizations come
    before those of e5m2 ones. A finite element that outgrew the history
    saturates to the format's largest value (clipped for one step, as
    Transformer Engine's casts clip, where e5m2 would overflow to inf and
    the step be skipped with its amax unrecorded, again and again) and is
    counted; inf and NaN stay non-finite (NaN in e4m3, which has no inf),
    so that a loss scaler still sees them.

    With `transposed`, the op also returns the FP8 copy transposed, the
    input read as a matrix of its last dim's columns (`[rows, cols]` ->
    `[cols, rows]`), written by the same pass: the layout a scaled GEMM
    that contracts over the rows reads.

    C1: `result` has the shape of `input`; `transposed` is
        `[cols, rows]` of its element type.
    C2: `delayed` has a rank-2 f32 table with at least 5 rows and a column
        `index` within it, a `margin` in [0, 32], and no `unscaled`.

    ```mlir
    %q, %q_scale_inv = mpc.quantize %x : tensor<64x32xbf16> to tensor<64x32xf8E4M3FN>
    %d, %d_scale_inv = mpc.quantize %x delayed(%fp8.scaling[0] margin 0 :
        tensor<20x3xf32>) : tensor<64x32xbf16> to tensor<64x32xf8E4M3FN>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input,
                       Optional<Mpc_FloatTensor>:$scaling,
                       OptionalAttr<I64Attr>:$index,
                       OptionalAttr<I64Attr>:$margin, UnitAttr:$unscaled);
  let results = (outs Mpc_Fp8Tensor:$result, Mpc_ScaleTensor:$scale_inv,
                      Optional<Mpc_Fp8Tensor>:$transposed);
  let assemblyFormat = [{
    $input (`unscaled` $unscaled^)?
    (`delayed` `(` $scaling^ `[` $index `]` `margin` $margin `:`
     type($scaling) `)`)? attr-dict `:` type($input) `to` type($result)
    (`transposed` type($transposed)^)?
  }];
  let builders = [OpBuilder<(ins "Value":$input, "Type":$format,
                                 "bool":$unscaled)>,
                  OpBuilder<(ins "Value":$input, "Type":$format,
                                 "Value":$scaling, "int64_t":$index,
                                 "int64_t":$margin)>];
  let hasVerifier = 1;
}

def Mpc_ScaledMatmulOp : Mpc_Op<"scaled_matmul", [Pure]> {
  let summary = "lhs · rhsᵀ of two FP8 tensors, dequantized by their scales";
  let description = [{
    `lhs · rhsᵀ · lhs_scale_inv · rhs_scale_inv (+ bias)`, the products
    accumulated in f32 and the result rounded once to its type, as
    cuBLASLt's FP8 matmul with A and B scale pointers computes it. `lhs` is
    `[M, K]` and `rhs` `[N, K]`: both contracted along their contiguous
    dim, the one layout FP8 tensor cores take (cuBLASLt's "TN"), so a
    product of another layout reads a transposed copy (`mpc.transpose` of
    the FP8 tensor). The optional `bias` (one value per column) is added
    before the rounding.

    C1: both operands have rank 2.
    C2: the contracted dims (dim 1 of each) agree.
    C3: the result is `[M, N]`.
    C4: not both operands are e5m2 (no FP8 tensor core multiplies two).
    C5: `bias`, when present, is `[N]` of the result's element type.

    ```mlir
    %y = mpc.scaled_matmul %x[%sx], %w[%sw]
        : tensor<64x32xf8E4M3FN>, tensor<96x32xf8E4M3FN> -> tensor<64x96xbf16>
    ```
  }];
  let arguments = (ins Mpc_Fp8Tensor:$lhs, Mpc_ScaleTensor:$lhs_scale_inv,
                       Mpc_Fp8Tensor:$rhs, Mpc_ScaleTensor:$rhs_scale_inv,
                       Optional<Mpc_FloatTensor>:$bias);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `[` $lhs_scale_inv `]` `,` $rhs `[` $rhs_scale_inv `]`
    (`bias` $bias^)? attr-dict `:` type($lhs) `,` type($rhs)
    (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Mpc_CausalMaskOp : Mpc_PolicyOp<"causal_mask", "Follow", [Pure]> {
  let summary = "Lower-triangular mask: true where key index <= query index";
  let description = [{
    Element `[..., i, j]` is true iff `j <= i`.

    C1: the result has rank >= 2 and its last two dims are equal.

    ```mlir
    %mask = mpc.causal_mask : tensor<16x16xi1>
    ```
  }];
  let results = (outs Mpc_MaskTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Mpc_AttentionOp : Mpc_PolicyOp<"attention", "Lower",
    [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "Scaled dot-product attention, with the softmax's logsumexp";
  let description = [{
    `softmax(scale * q kᵀ masked) v` per batch and head, never storing the
    `Tq x Tk` scores: kernels run FlashAttention-2's blockwise online
    softmax. In `bhtd` layout the operands are `[B, H, T, D]`; in `bthd`
    they are `[B, T, H, D]`, as a QKV projection writes them, so no head
    transpose is needed. `result` has `query`'s layout and `value`'s head
    dim; `lse` is the f32 `[B, H, Tq]` log-sum-exp of each query's scaled,
    masked scores, which the backward pass reuses instead of the scores.
    `causal` hides key `j` from query `i` where `j > i`; a `mask` (true:
    visible, as `mpc.where`'s condition) hides the keys it is false for. A
    query that sees no key gets NaN, as the written-out softmax does.

    C1: `query`, `key` and `value` have rank 4.
    C2: they have the same element type.
    C3: their batch and head extents are equal, `key` and `value` have the
        same sequence length, and `query` and `key` the same head dim.
    C4: `mask` has shape `[Tq, Tk]`.
    C5: `causal` needs `Tq == Tk`, and is not combined with a `mask`.
    C6: `scale` is positive and finite in f32.

    ```mlir
    %y, %lse = mpc.attention %q, %k, %v scale 0.125 causal
        : tensor<4x2x16x64xf16>, tensor<4x2x16x64xf16>, tensor<4x2x16x64xf16>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$query, Mpc_FloatTensor:$key,
                       Mpc_FloatTensor:$value, Optional<Mpc_MaskTensor>:$mask,
                       F64Attr:$scale, UnitAttr:$causal,
                       DefaultValuedAttr<AttentionLayout,
                           "::mlir::mpc::AttentionLayout::BHTD">:$layout);
  let results = (outs Mpc_FloatTensor:$result, F32Tensor:$lse);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` $mask^ `:` type($mask))?
    `scale` $scale (`causal` $causal^)? (`layout` $layout^)? attr-dict `:`
    type($query) `,` type($key) `,` type($value)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The extents of the operands, whatever their layout.
    ::mlir::mpc::AttentionShape getShape();
  }];
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

def Mpc_ReduceSumOp : Mpc_ReduceOp<"reduce_sum", "KeepF32", "sum">;
def Mpc_ReduceMeanOp : Mpc_ReduceOp<"reduce_mean", "KeepF32", "mean">;
def Mpc_ReduceMaxOp : Mpc_ReduceOp<"reduce_max", "Follow", "maximum">;

def Mpc_SoftmaxOp : Mpc_PolicyOp<"softmax", "KeepF32",
                                 [Differentiable, Pure, SameOperandsAndResultType]> {
  let summary = "Softmax over one dim";
  let description = [{
    C1: `dim` is in `[0, rank)`.

    ```mlir
    %p = mpc.softmax %s dim 3 : tensor<4x2x16x16xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Mpc_LogSoftmaxOp : Mpc_PolicyOp<"log_softmax", "KeepF32",
                                    [Differentiable, Pure, SameOperandsAndResultType]> {
  let summary = "Log-softmax over one dim";
  let description = [{
    C1: `dim` is in `[0, rank)`.

    ```mlir
    %p = mpc.log_softmax %s dim 1 : tensor<64x10xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Mpc_LayerNormOp : Mpc_PolicyOp<"layer_norm", "KeepF32",
    [Differentiable, Pure, AllTypesMatch<["input", "result"]>,
     AllTypesMatch<["gamma", "beta"]>]> {
  let summary = "Affine layer normalisation over the trailing dims";
  let description = [{
    Normalises over the trailing dims of `input` that `gamma` spans (as
    torch's `normalized_shape`), then scales by `gamma` and shifts by `beta`.

    C1: `gamma`'s shape equals the trailing dims of `input`.
    C2: `gamma` has the element type of `input`, or f32 (norm parameters
        kept in f32 under mixed precision).
    C3: `eps` is positive, finite and not 0 in f32.

    ```mlir
    %y = mpc.layer_norm %x, %g, %b eps 1.0e-05 : tensor<4x16x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, Mpc_FloatTensor:$gamma,
                       Mpc_FloatTensor:$beta,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta (`eps` $eps^)? attr-dict `:` type($input) `,`
    type($gamma)
  }];
  let hasVerifier = 1;
}

def Mpc_RmsNormOp : Mpc_PolicyOp<"rms_norm", "KeepF32",
    [Differentiable, Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "Root-mean-square normalisation over the trailing dims";
  let description = [{
    `x * rsqrt(mean(x^2) + eps) * gamma` over the trailing dims of `input`
    that `gamma` spans, as torch.nn.RMSNorm and Llama's RMSNorm (no mean
    subtracted, no shift).

    C1: `gamma`'s shape equals the trailing dims of `input`.
    C2: `gamma` has the element type of `input`, or f32 (norm parameters
        kept in f32 under mixed precision).
    C3: `eps` is positive, finite and not 0 in f32.

    ```mlir
    %y = mpc.rms_norm %x, %g eps 1.0e-06 : tensor<4x16x64xf32>, tensor<64xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, Mpc_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1.0e-6">:$eps);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma (`eps` $eps^)? attr-dict `:` type($input) `,`
    type($gamma)
  }];
  let hasVerifier = 1;
}

def Mpc_BatchNormOp : Mpc_PolicyOp<"batch_norm", "KeepF32",
    [Differentiable, AllTypesMatch<["input", "result"]>,
     AllTypesMatch<["gamma", "beta"]>,
     AllTypesMatch<["running_mean", "running_var"]>]> {
  let summary = "Batch normalisation with running statistics";
  let description = [{
    In training, normalises each channel (dim 1) with the batch's mean and
    biased variance over all other dims, and updates the running statistics
    (model state) as PyTorch does:
    `running = (1 - momentum) * running + momentum * batch_stat`, with the
    unbiased variance. In evaluation it uses the running statistics. The
    running statistics are updated, not differentiated.

    C1: `input` has rank 2 (`[N, C]`) or 4 (`[N, C, H, W]`).
    C2: `gamma` has shape `[C]`.
    C3: `gamma` has the element type of `input`, or f32 (norm parameters
        kept in f32 under mixed precision).
    C5: the running statistics have gamma's shape, and gamma's element type
        or f32 (bf16 parameters without master weights keep f32 state).
    C4: `0 <= momentum <= 1` and `eps > 0`, finite and not 0 in f32.
    C6: `stats`, when present, is `[2, C]` f32.

    With the optional result `stats` (added by
    mpc-save-batch-norm-statistics for the step's `mpc.batch_norm_grad`) it
    also returns the batch mean of each channel (row 0) and the inverse
    standard deviation `rsqrt(var + eps)` it normalised with (row 1), as
    PyTorch's `save_mean` and `save_invstd`.

    The running statistics' type is written after gamma's when it differs:

    ```mlir
    %y = mpc.batch_norm %x, %g, %b, %mean, %var
        : tensor<8x16x32x32xf32>, tensor<16xf32>
    %z = mpc.batch_norm %h, %g16, %b16, %mean, %var
        : tensor<8x16x32x32xbf16>, tensor<16xbf16> running tensor<16xf32>
    %n, %stats = mpc.batch_norm %x, %g, %b, %mean, %var
        : tensor<8x16x32x32xf32>, tensor<16xf32> stats tensor<2x16xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, Mpc_FloatTensor:$gamma,
                       Mpc_FloatTensor:$beta, Mpc_FloatTensor:$running_mean,
                       Mpc_FloatTensor:$running_var,
                       DefaultValuedAttr<F64Attr, "0.1">:$momentum,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Mpc_FloatTensor:$result, Optional<F32Tensor>:$stats);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta `,` $running_mean `,` $running_var
    (`momentum` $momentum^)? (`eps` $eps^)? attr-dict `:` type($input) `,`
    type($gamma) custom<NormTypes>(type($running_mean), type($stats),
                                   ref(type($gamma)))
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Embedding and loss
//===----------------------------------------------------------------------===//

def Mpc_EmbeddingOp : Mpc_PolicyOp<"embedding", "Follow",
                                   [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "Looks up rows of a table by integer index";
  let description = [{
    `table` is `[V, D]`; the result has the shape of `indices` followed by D.
    An index outside `[0, V)` is a runtime error.

    C1: `table` has rank 2.

    ```mlir
    %e = mpc.embedding %wte, %tokens : tensor<64x32xf32>, tensor<4x16xi32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$table, Mpc_IndexTensor:$indices);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $indices attr-dict `:` type($table) `,` type($indices)
  }];
}

def Mpc_CrossEntropyOp : Mpc_PolicyOp<"cross_entropy", "KeepF32",
                                      [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "Mean softmax cross-entropy against integer class targets";
  let description = [{
    `logits` is `[..., C]` and `targets` the leading dims `[...]`. The result
    is the f32 scalar mean over targets that are not `ignore_index`, as
    torch.nn.functional.cross_entropy with `reduction='mean'`. A target
    outside `[0, C)` other than `ignore_index` is a runtime error.

    C1: `logits` has rank >= 2.
    C2: the shape of `targets` is the shape of `logits` without its last dim.

    ```mlir
    %loss = mpc.cross_entropy %logits, %y ignore_index -100
        : tensor<64x10xf32>, tensor<64xi32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$logits, Mpc_IndexTensor:$targets,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $logits `,` $targets (`ignore_index` $ignore_index^)? attr-dict `:`
    type($logits) `,` type($targets)
  }];
}

def Mpc_MseLossOp : Mpc_PolicyOp<"mse_loss", "KeepF32",
                                 [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "Mean squared error between two tensors";
  let description = [{
    The f32 scalar mean of `(input - target)^2` over every element, as
    torch.nn.functional.mse_loss with `reduction='mean'`. Both operands are
    differentiable (a target computed from parameters gets a gradient too).

    C1: `input` and `target` have one type.

    ```mlir
    %loss = mpc.mse_loss %y, %t : tensor<64x1xf32>, tensor<64x1xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, Mpc_FloatTensor:$target);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $input `,` $target attr-dict `:` type($input) `,` type($target)
  }];
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Mpc_ReshapeOp : Mpc_PolicyOp<"reshape", "Follow", [Differentiable, Pure]> {
  let summary = "Reinterprets the elements, in row-major order, as a new shape";
  let description = [{
    C1: `input` and `result` have the same number of elements.
    C2: `input` and `result` have the same element type.

    ```mlir
    %0 = mpc.reshape %x : tensor<4x16x64xf32> to tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Mpc_ReshapeTensor:$input);
  let results = (outs Mpc_ReshapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Mpc_TransposeOp : Mpc_PolicyOp<"transpose", "Follow",
                                   [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "Permutes the dims";
  let description = [{
    Result dim `i` is input dim `permutation[i]`.

    C1: `permutation` is a permutation of `[0, rank)`.

    Float tensors of every type, FP8 too (the copy scaled_matmul reads).

    ```mlir
    %0 = mpc.transpose %x perm [0, 2, 1, 3] : tensor<4x16x2x32xf32>
    ```
  }];
  let arguments = (ins Mpc_ViewTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Mpc_ViewTensor:$result);
  let assemblyFormat = "$input `perm` $permutation attr-dict `:` type($input)";
}

def Mpc_BroadcastOp : Mpc_PolicyOp<"broadcast", "Follow", [Differentiable, Pure]> {
  let summary = "Broadcasts to a larger shape, NumPy style";
  let description = [{
    Shapes are aligned at the right; each input dim is 1 or equals the result
    dim, and missing leading dims are added.

    C1: the result has at least the input's rank and the input broadcasts to it.
    C2: `input` and `result` have the same element type.

    ```mlir
    %0 = mpc.broadcast %b : tensor<64xf32> to tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
  let hasVerifier = 1;
}

def Mpc_SliceOp : Mpc_PolicyOp<"slice", "Follow", [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "Takes `[start, limit)` with a stride in every dim";
  let description = [{
    Result dim `i` has `ceil((limits[i] - starts[i]) / strides[i])` elements;
    `strides` defaults to all ones.

    C1: `starts`, `limits` and `strides` have one entry per dim.
    C2: `0 <= start <= limit <= dim` and strides are positive.

    ```mlir
    %q = mpc.slice %qkv starts [0, 0, 0] limits [4, 16, 64] : tensor<4x16x192xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $input `starts` $starts `limits` $limits (`strides` $strides^)? attr-dict
    `:` type($input)
  }];
  let extraClassDeclaration = [{
    ::llvm::SmallVector<int64_t> getStridesOrDefault();
  }];
}

def Mpc_ConcatOp : Mpc_PolicyOp<"concat", "Promote", [Differentiable, Pure, InferTypeOpAdaptor]> {
  let summary = "Joins tensors along one dim";
  let description = [{
    C1: there is at least one input, and all inputs have the same rank and
        element type.
    C2: `dim` is in `[0, rank)`.
    C3: the inputs agree in every dim but `dim`.

    ```mlir
    %0 = mpc.concat %a, %b dim 1 : tensor<4x8xf32>, tensor<4x2xf32>
    ```
  }];
  let arguments = (ins Variadic<Mpc_FloatTensor>:$inputs, I64Attr:$dim);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$inputs `dim` $dim attr-dict `:` type($inputs)";
}

//===----------------------------------------------------------------------===//
// Convolutional networks
//===----------------------------------------------------------------------===//

def Mpc_MaxPool2dOp : Mpc_Pool2dOp<"max_pool2d", "Max">;
def Mpc_AvgPool2dOp : Mpc_Pool2dOp<"avg_pool2d", "Average">;

def Mpc_MaxPool2dWithIndicesOp
    : Mpc_PolicyOp<"max_pool2d_with_indices", "Follow",
                   [Pure, InferTypeOpAdaptor]> {
  let summary = "Max pooling that also returns each window's argmax";
  let description = [{
    `mpc.max_pool2d`'s result, and in `indices` the position in its window
    of the element each window took (`ky * kernel[1] + kx`: the first
    maximum, or the last NaN, which wins; -1 for a window that holds no
    input), so that `mpc.max_pool2d_indices_grad` routes the gradient
    without reading the input again, as PyTorch's `max_pool2d_with_indices`
    keeps its indices for the backward pass (into the plane, 8 bytes each;
    a position in the window fits a byte). mpc-save-max-pool-indices
    creates it in the training step.

    C1: as `mpc.max_pool2d`'s C1 to C3.
    C2: the kernel has at most 127 elements.

    ```mlir
    %y, %i = mpc.max_pool2d_with_indices %x kernel [3, 3] stride [2, 2]
        padding [1, 1] : tensor<8x16x32x32xf32>
    // tensor<8x16x16x16xf32>, tensor<8x16x16x16xi8>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
                       OptionalAttr<DenseI64ArrayAttr>:$stride,
                       OptionalAttr<DenseI64ArrayAttr>:$padding,
                       UnitAttr:$ceil_mode);
  let results = (outs Mpc_FloatTensor:$result,
                      Mpc_WindowIndexTensor:$indices);
  let assemblyFormat = [{
    $input `kernel` $kernel (`stride` $stride^)? (`padding` $padding^)?
    (`ceil_mode` $ceil_mode^)? attr-dict `:` type($input)
  }];
  let extraClassDeclaration = [{
    /// The stride, defaulting to the kernel.
    ::llvm::SmallVector<int64_t, 2> getStrideOrDefault();
    /// The padding, defaulting to zero.
    ::llvm::SmallVector<int64_t, 2> getPaddingOrDefault();
  }];
}

include "dialect/MpcGradOps.td"

#endif // MPC_DIALECT_MPCOPS_TD
