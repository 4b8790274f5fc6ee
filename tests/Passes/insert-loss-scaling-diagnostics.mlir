// RUN: mpc-opt %s --split-input-file --verify-diagnostics --mpc-insert-loss-scaling
// RUN: not mpc-opt %s --mpc-autodiff \
// RUN:   --mpc-insert-loss-scaling="mode=dynamic backoff-factor=1.5" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BACKOFF
// RUN: not mpc-opt %s --mpc-autodiff --mpc-insert-loss-scaling="mode=sometimes" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MODE
// RUN: not mpc-opt %s --mpc-autodiff \
// RUN:   --mpc-insert-loss-scaling="mode=dynamic min-scale=1e9" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MIN
// RUN: not mpc-opt %s --mpc-autodiff --mpc-insert-loss-scaling="hysteresis=0" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=HYSTERESIS
// RUN: not mpc-opt %s --mpc-autodiff --mpc-insert-loss-scaling="mode=static init-scale=0" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STATIC

// Options are checked as torch.amp.GradScaler checks its arguments, and
// reported at the model.
// BACKOFF: insert-loss-scaling-diagnostics.mlir:{{[0-9]+}}:1: error: mpc-insert-loss-scaling: backoff-factor must be in (0, 1), got 1.5
// MODE: error: mpc-insert-loss-scaling: unknown mode 'sometimes'; expected auto, dynamic, static or none
// MIN: error: mpc-insert-loss-scaling: min-scale must be in [0, init-scale 65536], got 1000000000
// HYSTERESIS: error: mpc-insert-loss-scaling: hysteresis must be >= 1 (1 is none), got 0
// STATIC: error: mpc-insert-loss-scaling: init-scale must be finite in f32 and > 0, got 0

// The pass needs the gradients mpc-autodiff derives (the first RUN line
// runs it alone).
// expected-error@+1 {{mpc-insert-loss-scaling runs after mpc-autodiff: model @no_gradients_yet returns no gradients}}
mpc.model @no_gradients_yet inputs(%x: tensor<4x3xf16>, %y: tensor<4xi32>)
    params(%w: tensor<5x3xf16> = zeros) {
  %h = mpc.linear %x, %w : tensor<4x3xf16>, tensor<5x3xf16>
  %l = mpc.cross_entropy %h, %y : tensor<4x5xf16>, tensor<4xi32>
  mpc.output loss(%l : tensor<f32>)
}
