//===- MpcAttrs.td - mpc attributes ------------------------*- tablegen -*-===//
//
// The parameter initialiser attribute, `#mpc.init<normal(0.02)>`. Inside
// `mpc.model` it is written bare: `%w: tensor<8x4xf32> = normal(0.02)`.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_DIALECT_MPCATTRS_TD
#define MPC_DIALECT_MPCATTRS_TD

include "dialect/MpcBase.td"
include "dialect/MpcEnums.td"

def Mpc_InitializerAttr : Mpc_Attr<"Initializer", "init"> {
  let summary = "How a parameter or state tensor is initialised";
  let description = [{
    `zeros`, `ones`, `constant(v)`, `normal(std)` or `normal(mean, std)`,
    `uniform(low, high)`, `kaiming_uniform` / `kaiming_normal` with an
    optional negative slope `a` (PyTorch's `kaiming_*_(a=...)`, fan-in mode),
    `xavier_uniform` / `xavier_normal` with an optional gain. Fans are
    computed as PyTorch does: dim 1 times the receptive field is fan-in, dim 0
    times the receptive field is fan-out. Arguments are finite numbers.
  }];
  let parameters = (ins "::mlir::mpc::InitKind":$kind,
                        "::mlir::DenseF64ArrayAttr":$args);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Parses `kind` or `kind(arg, ...)`, as written inside `mpc.model`.
    static ::mlir::Attribute parseBare(::mlir::AsmParser &parser);
    /// Prints `kind` or `kind(arg, ...)`.
    void printBare(::mlir::AsmPrinter &printer) const;
  }];
}

/// A double, printed so that it reads back exactly.
def Mpc_F64Parameter : APFloatParameter<"a double"> {
  let parser = "::mlir::mpc::parseF64($_parser)";
}

/// A bool parameter written `true` / `false`.
def Mpc_BoolParameter : AttrParameter<"bool", "true or false"> {
  let parser = "::mlir::mpc::parseBoolKeyword($_parser)";
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
}

/// A bool parameter that is `false` unless written.
def Mpc_OptionalBoolParameter : DefaultValuedParameter<"bool", "false",
                                                       "true or false"> {
  let parser = "::mlir::mpc::parseBoolKeyword($_parser)";
  let printer = "$_printer << ($_self ? \"true\" : \"false\")";
}

def Mpc_LossScalingAttr : Mpc_Attr<"LossScaling", "loss_scaling"> {
  let summary = "How the training step scales its loss (set by "
                "mpc-insert-loss-scaling)";
  let description = [{
    Attached to `mpc.model` as `mpc.loss_scaling`. `dynamic` is
    torch.amp.GradScaler's algorithm with its defaults (init_scale 65536,
    growth_factor 2 after growth_interval 2000 clean steps, backoff_factor
    0.5 on an overflow) plus DeepSpeed's hysteresis (overflows tolerated
    before a backoff; 1 is none) and min_scale (a floor; 0 is none).
    `static` keeps init_scale; `none` does not scale. The runtime keeps the
    scaler's state on the device; the fused optimizer updates it.

    ```mlir
    mpc.model @m ... attributes {mpc.loss_scaling = #mpc.loss_scaling<mode = dynamic,
        init_scale = 6.553600e+04, growth_factor = 2.000000e+00,
        backoff_factor = 5.000000e-01, growth_interval = 2000, hysteresis = 1,
        min_scale = 0.000000e+00>}
    ```
  }];
  let parameters = (ins EnumParameter<LossScaleMode>:$mode,
                        Mpc_F64Parameter:$init_scale, Mpc_F64Parameter:$growth_factor,
                        Mpc_F64Parameter:$backoff_factor, "int64_t":$growth_interval,
                        "int64_t":$hysteresis, Mpc_F64Parameter:$min_scale);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Mpc_OptimizerAttr : Mpc_Attr<"Optimizer", "optimizer"> {
  let summary = "The fused optimizer of the training step (set by "
                "mpc-fuse-optimizer)";
  let description = [{
    Attached to `mpc.model` as `mpc.optimizer`. `lr`, `momentum` and
    `weight_decay` are the defaults a session starts with (the runtime can
    change them every step); the rest is compiled into the update kernel.
    `sgd` is torch.optim.SGD (momentum, nesterov, L2 weight decay), `adam`
    torch.optim.Adam (L2 weight decay), `adamw` torch.optim.AdamW
    (decoupled decay). `clip_norm` > 0 clips the unscaled gradients by
    their global norm; `accumulate` is the number of micro-batches per
    optimizer step. `schedule = warmup_cosine` warms the rate up linearly
    over `warmup_steps` applied steps, then follows a cosine from `lr` to
    `min_lr` over `decay_steps`. `skip_nonfinite` skips a step whose
    gradients hold inf or NaN without a loss scaler too (a scaler skips
    them anyway): no update ever writes a non-finite value.
    `data_parallel` (printed only when true) sums the f32 gradients over the
    ranks of a data-parallel session after the backward pass, and the
    update divides by ranks x `accumulate`. `shard_optimizer` (printed only
    when true; needs `data_parallel`) is ZeRO stage 1: each rank keeps and
    updates its 1/N of the optimizer's moments and master weights, then the
    ranks gather the updated parameters.
    `state_type` (printed only when set) is the storage type of the
    moments and the momentum buffer; unset, they are in the parameters'
    type. `master_weights` (printed only when not `f32`) is how parameters
    stored in bf16 without f32 master weights are updated: `none` rounds
    the f32 result stochastically, `kahan` to nearest with a bf16
    compensation slot, `nearest` to nearest alone (O3's way).
  }];
  let parameters = (ins EnumParameter<OptimizerKind>:$kind, Mpc_F64Parameter:$lr,
                        Mpc_F64Parameter:$momentum, Mpc_BoolParameter:$nesterov,
                        Mpc_F64Parameter:$weight_decay, Mpc_F64Parameter:$beta1,
                        Mpc_F64Parameter:$beta2, Mpc_F64Parameter:$eps, Mpc_F64Parameter:$clip_norm,
                        "int64_t":$accumulate,
                        EnumParameter<LrSchedule>:$schedule,
                        "int64_t":$warmup_steps, "int64_t":$decay_steps,
                        Mpc_F64Parameter:$min_lr,
                        Mpc_BoolParameter:$skip_nonfinite,
                        Mpc_OptionalBoolParameter:$data_parallel,
                        Mpc_OptionalBoolParameter:$shard_optimizer,
                        OptionalParameter<"::mlir::Type">:$state_type,
                        DefaultValuedParameter<"MasterWeights",
                                               "MasterWeights::F32">:$master_weights);
  let assemblyFormat = "`<` struct(params) `>`";
  let extraClassDeclaration = [{
    /// Optimizer state tensors per parameter, in checkpoint order:
    /// momentum_buffer (sgd) or exp_avg, exp_avg_sq (adam, adamw), then the
    /// kahan_compensation (master_weights = kahan), then the gradient
    /// accumulator when accumulate > 1.
    ::llvm::SmallVector<::llvm::StringRef> getSlotNames() const;
    /// The storage type of each slot, in getSlotNames' order, for
    /// parameters (and gradients) of type `param`: the moments in
    /// state_type (when set), the rest in `param`.
    ::llvm::SmallVector<::mlir::Type> getSlotTypes(::mlir::Type param) const;
  }];
}

#endif // MPC_DIALECT_MPCATTRS_TD
