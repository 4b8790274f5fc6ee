// RUN: mpc-opt %s --split-input-file --verify-diagnostics --mpc-autodiff --mpc-fuse-optimizer
// RUN: not mpc-opt %s --split-input-file --mpc-autodiff --mpc-fuse-optimizer="nesterov=true" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NESTEROV
// RUN: not mpc-opt %s --split-input-file --mpc-autodiff --mpc-fuse-optimizer="kind=adam beta2=1" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BETA
// RUN: not mpc-opt %s --split-input-file --mpc-autodiff --mpc-fuse-optimizer="accumulate=0" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ACCUMULATE
// RUN: not mpc-opt %s --split-input-file --mpc-autodiff --mpc-fuse-optimizer="schedule=warmup_cosine" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SCHEDULE
// RUN: not mpc-opt %s --split-input-file --mpc-autodiff --mpc-fuse-optimizer="lr=1e39" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=LR-F32
// RUN: not mpc-opt %s --split-input-file --mpc-autodiff --mpc-fuse-optimizer="shard-optimizer=true" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SHARD
// RUN: not mpc-opt %s --split-input-file --mpc-autodiff --mpc-fuse-optimizer="master-weights=none" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MASTER-F32
// RUN: not mpc-opt %s --split-input-file --mpc-autodiff --mpc-fuse-optimizer="master-weights=kahan data-parallel=true" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MASTER-PARALLEL

// Hyper-parameters are checked as torch.optim checks them.
// NESTEROV: error: mpc-fuse-optimizer: nesterov needs a momentum > 0 (as torch.optim.SGD)
// BETA: error: mpc-fuse-optimizer: beta2 must be in [0, 1), got 1
// ACCUMULATE: error: mpc-fuse-optimizer: accumulate must be in [1, 2^31), got 0
// SCHEDULE: error: mpc-fuse-optimizer: the warmup_cosine schedule needs warmup-steps or decay-steps
// The optimizer computes in f32, where 1e39 is inf.
// LR-F32: error: mpc-fuse-optimizer: lr must be finite in f32 and >= 0, got 1.0e+39
// SHARD: error: mpc-fuse-optimizer: shard-optimizer shards the state over the ranks of data-parallel
// Without master weights the parameters must be bf16 (mpc-assign-precision
// stores them so), and their gradients are bf16, which data-parallel does
// not sum.
// MASTER-F32: error: mpc-fuse-optimizer: master-weights=none updates bf16 parameters, but they are 'f32' (mpc-assign-precision's master-weights stores them in bf16)
// MASTER-PARALLEL: error: mpc-fuse-optimizer: data-parallel sums f32 gradients; master-weights=kahan has bf16 ones (not supported yet)

// One fused update runs over the flat parameters: they share a type.
// expected-error@+1 {{mpc-fuse-optimizer: the fused update needs every parameter in one storage type, but %w is 'f32' and %b is 'f16'}}
mpc.model @mixed_types inputs(%x: tensor<4x3xf32>, %y: tensor<4xi32>)
    params(%w: tensor<5x3xf32> = zeros, %b: tensor<5xf16> = zeros) {
  %b32 = mpc.cast %b : tensor<5xf16> to tensor<5xf32>
  %h = mpc.linear %x, %w, %b32 : tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>
  %l = mpc.cross_entropy %h, %y : tensor<4x5xf32>, tensor<4xi32>
  mpc.output loss(%l : tensor<f32>)
}
