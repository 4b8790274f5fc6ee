// RUN: mpc-opt %s --split-input-file --mpc-autodiff --mpc-fuse-optimizer | FileCheck %s --check-prefix=SGD
// RUN: mpc-opt %s --split-input-file --mpc-autodiff \
// RUN:   --mpc-fuse-optimizer="kind=adamw lr=0.001 weight-decay=0.1 clip-norm=1 accumulate=4 schedule=warmup_cosine warmup-steps=100 decay-steps=900 min-lr=0.0001" \
// RUN:   | FileCheck %s --check-prefix=ADAMW
// RUN: mpc-opt %s --split-input-file --mpc-autodiff \
// RUN:   --mpc-fuse-optimizer="skip-nonfinite=false" \
// RUN:   | FileCheck %s --check-prefix=APPLY
// RUN: mpc-opt %s --split-input-file --mpc-autodiff \
// RUN:   --mpc-fuse-optimizer="data-parallel=true" \
// RUN:   | FileCheck %s --check-prefix=PARALLEL
// RUN: mpc-opt %s --split-input-file --mpc-autodiff --mpc-fuse-optimizer \
// RUN:   | mpc-opt --split-input-file | FileCheck %s --check-prefix=SGD
// RUN: mpc-opt %s --split-input-file --mpc-autodiff \
// RUN:   --mpc-fuse-optimizer="kind=adamw optimizer-state=bf16" \
// RUN:   | mpc-opt --split-input-file | FileCheck %s --check-prefix=STATE
// RUN: mpc-opt %s --split-input-file \
// RUN:   --mpc-assign-precision="level=O2 half=bf16 master-weights=kahan" \
// RUN:   --mpc-autodiff --mpc-fuse-optimizer="kind=adamw master-weights=kahan" \
// RUN:   | mpc-opt --split-input-file | FileCheck %s --check-prefix=KAHAN
// RUN: mpc-opt %s --split-input-file \
// RUN:   --mpc-assign-precision="level=O2 half=bf16 master-weights=none" \
// RUN:   --mpc-autodiff --mpc-fuse-optimizer="master-weights=none optimizer-state=bf16" \
// RUN:   | FileCheck %s --check-prefix=NONE

// The optimizer is recorded on the model for code generation; the body is
// not changed.
// SGD-LABEL: mpc.model @linear
//       SGD:   mpc.optimizer = #mpc.optimizer<kind = sgd, lr = 1.000000e-02, momentum = 0.000000e+00, nesterov = false, weight_decay = 0.000000e+00, beta1 = 9.000000e-01, beta2 = 0.99899999999999999, eps = 1.000000e-08, clip_norm = 0.000000e+00, accumulate = 1, schedule = constant, warmup_steps = 0, decay_steps = 0, min_lr = 0.000000e+00, skip_nonfinite = true>
//       SGD:   mpc.output loss
// ADAMW-LABEL: mpc.model @linear
//       ADAMW:   mpc.optimizer = #mpc.optimizer<kind = adamw, lr = 1.000000e-03, momentum = 0.000000e+00, nesterov = false, weight_decay = 1.000000e-01, beta1 = 9.000000e-01, beta2 = 0.99899999999999999, eps = 1.000000e-08, clip_norm = 1.000000e+00, accumulate = 4, schedule = warmup_cosine, warmup_steps = 100, decay_steps = 900, min_lr = 1.000000e-04, skip_nonfinite = true>
// APPLY-LABEL: mpc.model @linear
//       APPLY:   mpc.optimizer = #mpc.optimizer<{{.*}}, skip_nonfinite = false>
// data_parallel is printed only when true (SGD's line ends without it).
// PARALLEL-LABEL: mpc.model @linear
//       PARALLEL:   mpc.optimizer = #mpc.optimizer<{{.*}}, skip_nonfinite = true, data_parallel = true>
// The moments' type and the master weights are printed when not the
// defaults (and read back). Without master weights the moments are f32
// unless optimizer-state says bf16.
// STATE-LABEL: mpc.model @linear
//       STATE:   mpc.optimizer = #mpc.optimizer<kind = adamw, {{.*}}, skip_nonfinite = true, state_type = bf16>
// KAHAN-LABEL: mpc.model @linear
//       KAHAN:   params(%w: tensor<5x3xbf16> = zeros,
//       KAHAN:   mpc.optimizer = #mpc.optimizer<kind = adamw, {{.*}}, skip_nonfinite = true, state_type = f32, master_weights = kahan>
// NONE-LABEL: mpc.model @linear
//       NONE:   mpc.optimizer = #mpc.optimizer<kind = sgd, {{.*}}, skip_nonfinite = true, state_type = bf16, master_weights = none>
mpc.model @linear inputs(%x: tensor<4x3xf32>, %y: tensor<4xi32>)
    params(%w: tensor<5x3xf32> = zeros, %b: tensor<5xf32> = zeros) {
  %h = mpc.linear %x, %w, %b : tensor<4x3xf32>, tensor<5x3xf32>, tensor<5xf32>
  %l = mpc.cross_entropy %h, %y : tensor<4x5xf32>, tensor<4xi32>
  mpc.output loss(%l : tensor<f32>)
}
