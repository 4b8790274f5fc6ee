//===- MpcGradOps.td - backward ops made by mpc-autodiff ---*- tablegen -*-===//
//
// Ops that only appear in a training step: the pieces of vector-Jacobian
// products that existing ops cannot express. mpc-autodiff creates them; they
// are not differentiable themselves. Included from MpcOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_MPCGRADOPS_TD
#define MPC_DIALECT_MPCGRADOPS_TD

/// dx from dy and a forward value (input or output) of one shape.
class Mpc_ElementwiseGradOp<string mnemonic, string forward, string what>
    : Mpc_PolicyOp<mnemonic, "Follow", [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of `mpc." # forward # "`";
  let description = [{
    `}] # what # [{`, elementwise.

    ```mlir
    %dx = mpc.}] # mnemonic # [{ %dy, %v : tensor<4x8xf32>
    ```
  }];
}

def Mpc_ReluGradOp : Mpc_ElementwiseGradOp<"relu_grad", "relu",
    "dx = v > 0 ? dy : 0, where v is the ReLU's input or its output (both "
    "are positive at the same elements; autodiff passes the output)"> {
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$input);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($grad)";
}

def Mpc_GeluGradOp : Mpc_ElementwiseGradOp<"gelu_grad", "gelu",
                                           "dx = dy * gelu'(input)"> {
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$input,
                       DefaultValuedAttr<GeluApproximation,
                           "::mlir::mpc::GeluApproximation::Erf">:$approximate);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input (`approximate` $approximate^)? attr-dict `:` type($grad)
  }];
}

def Mpc_TanhGradOp : Mpc_ElementwiseGradOp<"tanh_grad", "tanh",
                                           "dx = dy * (1 - output^2)"> {
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$output);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($grad)";
}

def Mpc_SigmoidGradOp : Mpc_ElementwiseGradOp<"sigmoid_grad", "sigmoid",
                                              "dx = dy * output * (1 - output)"> {
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$output);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $output attr-dict `:` type($grad)";
}

def Mpc_SiluGradOp : Mpc_ElementwiseGradOp<"silu_grad", "silu",
    "dx = dy * s * (1 + input * (1 - s)), s = sigmoid(input)"> {
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$input);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($grad)";
}

def Mpc_ClampGradOp : Mpc_ElementwiseGradOp<"clamp_grad", "clamp",
    "dx = min < input < max ? dy : 0 (a bound left out always holds)"> {
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$input,
                       OptionalAttr<F64Attr>:$min, OptionalAttr<F64Attr>:$max);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input (`min` $min^)? (`max` $max^)? attr-dict `:` type($grad)
  }];
}

def Mpc_SoftmaxGradOp : Mpc_PolicyOp<"softmax_grad", "KeepF32",
                                     [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of `mpc.softmax`: y * (dy - sum(dy * y))";
  let description = [{
    C1: `dim` is in `[0, rank)`.
  }];
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$output,
                       I64Attr:$dim);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $output `dim` $dim attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
}

def Mpc_LogSoftmaxGradOp : Mpc_PolicyOp<"log_softmax_grad", "KeepF32",
                                        [Pure, SameOperandsAndResultType]> {
  let summary = "Gradient of `mpc.log_softmax`: dy - exp(y) * sum(dy)";
  let description = [{
    C1: `dim` is in `[0, rank)`.
  }];
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$output,
                       I64Attr:$dim);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $output `dim` $dim attr-dict `:` type($grad)
  }];
  let hasVerifier = 1;
}

def Mpc_CrossEntropyGradOp : Mpc_PolicyOp<"cross_entropy_grad", "KeepF32",
    [Pure, AllTypesMatch<["logits", "result"]>]> {
  let summary = "Gradient of `mpc.cross_entropy` with respect to the logits";
  let description = [{
    `(softmax(logits) - onehot(targets)) * grad / count`, where count is the
    number of targets that are not `ignore_index`; ignored rows get 0.

    C1: `grad` is a scalar f32 tensor.
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$grad, Mpc_FloatTensor:$logits,
                       Mpc_IndexTensor:$targets,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $logits `,` $targets (`ignore_index` $ignore_index^)? attr-dict
    `:` type($grad) `,` type($logits) `,` type($targets)
  }];
}

def Mpc_LayerNormGradOp : Mpc_PolicyOp<"layer_norm_grad", "KeepF32",
    [Pure, AllTypesMatch<["grad", "input", "input_grad"]>,
     AllTypesMatch<["gamma", "gamma_grad", "beta_grad"]>]> {
  let summary = "Gradients of `mpc.layer_norm` (statistics recomputed)";
  let description = [{
    Recomputes the mean and inverse standard deviation of each normalised row
    of `input`, then returns the gradients with respect to the input, gamma
    and beta.
  }];
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$input,
                       Mpc_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Mpc_FloatTensor:$input_grad, Mpc_FloatTensor:$gamma_grad,
                      Mpc_FloatTensor:$beta_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $gamma (`eps` $eps^)? attr-dict `:` type($input) `,`
    type($gamma)
  }];
}

def Mpc_RmsNormGradOp : Mpc_PolicyOp<"rms_norm_grad", "KeepF32",
    [Pure, AllTypesMatch<["grad", "input", "input_grad"]>,
     AllTypesMatch<["gamma", "gamma_grad"]>]> {
  let summary = "Gradients of `mpc.rms_norm` (statistics recomputed)";
  let description = [{
    Recomputes each row's inverse root mean square from `input`, then
    returns the gradients with respect to the input and gamma.
  }];
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$input,
                       Mpc_FloatTensor:$gamma,
                       DefaultValuedAttr<F64Attr, "1.0e-6">:$eps);
  let results = (outs Mpc_FloatTensor:$input_grad, Mpc_FloatTensor:$gamma_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $gamma (`eps` $eps^)? attr-dict `:` type($input) `,`
    type($gamma)
  }];
}

def Mpc_BatchNormGradOp : Mpc_PolicyOp<"batch_norm_grad", "KeepF32",
    [Pure, AttrSizedOperandSegments,
     AllTypesMatch<["grad", "input", "input_grad"]>,
     AllTypesMatch<["gamma", "gamma_grad", "beta_grad"]>]> {
  let summary = "Gradients of `mpc.batch_norm` in training mode";
  let description = [{
    Returns the gradients with respect to the input, gamma and beta. With
    `stats` (the forward op's `[2, C]` mean and inverse standard deviation)
    it normalises with those; without, it computes each channel's batch mean
    and biased variance from `input` again.

    With `relu` (the forward op's beta; mpc-save-batch-norm-statistics adds
    it), `grad` is the gradient of a ReLU of the batch norm's output, taken
    before the ReLU's mask: each element's gradient is zeroed where the
    forward's output, `(x - mean) * rstd * gamma + beta` from `stats` and
    rounded to the input's element type as the forward stored it, is not
    positive. The mask comes from `input`, which the gradient reads anyway,
    instead of from the ReLU's output.

    C1: `stats`, when present, is `[2, C]` f32.
    C2: `relu` needs `stats` and has gamma's type.

    ```mlir
    %dx, %dg, %db = mpc.batch_norm_grad %dy, %x, %g stats %s : tensor<2x16xf32>
        relu %b : tensor<16xf32> : tensor<8x16x4x4xbf16>, tensor<16xf32>
    ```
  }];
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$input,
                       Mpc_FloatTensor:$gamma, Optional<F32Tensor>:$stats,
                       Optional<Mpc_FloatTensor>:$relu_beta,
                       DefaultValuedAttr<F64Attr, "1.0e-5">:$eps);
  let results = (outs Mpc_FloatTensor:$input_grad, Mpc_FloatTensor:$gamma_grad,
                      Mpc_FloatTensor:$beta_grad);
  let assemblyFormat = [{
    $grad `,` $input `,` $gamma (`stats` $stats^ `:` type($stats))?
    (`relu` $relu_beta^ `:` type($relu_beta))? (`eps` $eps^)? attr-dict `:`
    type($input) `,` type($gamma)
  }];
  let hasVerifier = 1;
}

def Mpc_EmbeddingGradOp : Mpc_PolicyOp<"embedding_grad", "KeepF32", [Pure]> {
  let summary = "Gradient of `mpc.embedding` with respect to the table";
  let description = [{
    Scatter-adds each row of `grad` into the table row its index names.

    C1: `grad`'s shape is the shape of `indices` followed by the table's D,
        and the result is `[V, D]`.
  }];
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_IndexTensor:$indices);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices attr-dict `:` type($grad) `,` type($indices) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Mpc_ReduceMaxGradOp : Mpc_PolicyOp<"reduce_max_grad", "Follow", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Gradient of `mpc.reduce_max`";
  let description = [{
    Splits each output's gradient evenly among the input elements equal to
    the maximum, as torch.amax does.
  }];
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$input,
                       Mpc_FloatTensor:$output, DenseI64ArrayAttr:$dims,
                       UnitAttr:$keepdim);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input `,` $output `dims` $dims (`keepdim` $keepdim^)? attr-dict
    `:` type($grad) `,` type($input) `,` type($output)
  }];
}

def Mpc_SliceGradOp : Mpc_PolicyOp<"slice_grad", "Follow", [Pure]> {
  let summary = "Gradient of `mpc.slice`: the slice's gradient in zeros";
  let arguments = (ins Mpc_FloatTensor:$grad, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$strides);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `starts` $starts `strides` $strides attr-dict `:` type($grad) `->`
    type($result)
  }];
}

def Mpc_MaxPool2dGradOp : Mpc_PolicyOp<"max_pool2d_grad", "Follow", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Gradient of `mpc.max_pool2d`";
  let description = [{
    Routes each window's gradient to the first maximum of the window, as
    PyTorch does.
  }];
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$input,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input `kernel` $kernel `stride` $stride `padding` $padding
    attr-dict `:` type($grad) `,` type($input)
  }];
}

def Mpc_MaxPool2dIndicesGradOp
    : Mpc_PolicyOp<"max_pool2d_indices_grad", "Follow", [Pure]> {
  let summary = "Gradient of `mpc.max_pool2d_with_indices`";
  let description = [{
    Routes each window's gradient to the element `indices` names in it (a
    position in the window, as `mpc.max_pool2d_with_indices` returns them;
    none for -1). The result has the pooled input's type.

    C1: `indices` has the shape of `grad`; `kernel`, `stride` and `padding`
        have two entries.
    C2: the result has rank 4, `grad`'s batch and channels and element
        type, and spatial extents that pool (rounded down or up) to
        `grad`'s.
  }];
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_WindowIndexTensor:$indices,
                       DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$stride,
                       DenseI64ArrayAttr:$padding);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $indices `kernel` $kernel `stride` $stride `padding` $padding
    attr-dict `:` type($grad) `,` type($indices) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Mpc_AvgPool2dGradOp : Mpc_PolicyOp<"avg_pool2d_grad", "Follow", [Pure]> {
  let summary = "Gradient of `mpc.avg_pool2d`";
  let arguments = (ins Mpc_FloatTensor:$grad, DenseI64ArrayAttr:$kernel,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `kernel` $kernel `stride` $stride `padding` $padding attr-dict `:`
    type($grad) `->` type($result)
  }];
}

def Mpc_Conv2dGradInputOp : Mpc_PolicyOp<"conv2d_grad_input", "Lower",
                                         [Pure]> {
  let summary = "Gradient of `mpc.conv2d` with respect to its input";
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$weight,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $weight `stride` $stride `padding` $padding `dilation` $dilation
    `groups` $groups attr-dict `:` type($grad) `,` type($weight) `->`
    type($result)
  }];
}

def Mpc_Conv2dGradWeightOp : Mpc_PolicyOp<"conv2d_grad_weight", "Lower",
                                          [Pure]> {
  let summary = "Gradient of `mpc.conv2d` with respect to its weight";
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$input,
                       DenseI64ArrayAttr:$stride, DenseI64ArrayAttr:$padding,
                       DenseI64ArrayAttr:$dilation, I64Attr:$groups);
  let results = (outs Mpc_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $input `stride` $stride `padding` $padding `dilation` $dilation
    `groups` $groups attr-dict `:` type($grad) `,` type($input) `->`
    type($result)
  }];
}

def Mpc_AttentionGradOp : Mpc_PolicyOp<"attention_grad", "Lower",
    [Pure, AllTypesMatch<["query", "query_grad"]>,
     AllTypesMatch<["key", "key_grad"]>, AllTypesMatch<["value", "value_grad"]>,
     AllTypesMatch<["grad", "output"]>]> {
  let summary = "Gradients of `mpc.attention` (probabilities recomputed)";
  let description = [{
    The gradients with respect to query, key and value, from the output's
    gradient, the forward output and its logsumexp: FlashAttention-2's
    backward, which recomputes each block of probabilities from `lse`
    rather than reading them. Attributes and `mask` are the forward op's.
  }];
  let arguments = (ins Mpc_FloatTensor:$grad, Mpc_FloatTensor:$query,
                       Mpc_FloatTensor:$key, Mpc_FloatTensor:$value,
                       Mpc_FloatTensor:$output, F32Tensor:$lse,
                       Optional<Mpc_MaskTensor>:$mask, F64Attr:$scale,
                       UnitAttr:$causal,
                       DefaultValuedAttr<AttentionLayout,
                           "::mlir::mpc::AttentionLayout::BHTD">:$layout);
  let results = (outs Mpc_FloatTensor:$query_grad, Mpc_FloatTensor:$key_grad,
                      Mpc_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $grad `,` $query `,` $key `,` $value `,` $output `,` $lse
    (`mask` $mask^ `:` type($mask))? `scale` $scale (`causal` $causal^)?
    (`layout` $layout^)? attr-dict `:` type($grad) `,` type($query) `,`
    type($key) `,` type($value) `,` type($lse)
  }];
  let extraClassDeclaration = [{
    ::mlir::mpc::AttentionShape getShape();
  }];
}

#endif // MPC_DIALECT_MPCGRADOPS_TD
