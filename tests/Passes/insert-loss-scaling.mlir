// RUN: mpc-opt %s --split-input-file --mpc-autodiff --mpc-insert-loss-scaling | FileCheck %s --check-prefix=AUTO
// RUN: mpc-opt %s --split-input-file --mpc-autodiff \
// RUN:   --mpc-insert-loss-scaling="mode=static init-scale=512" | FileCheck %s --check-prefix=STATIC
// RUN: mpc-opt %s --split-input-file --mpc-autodiff \
// RUN:   --mpc-insert-loss-scaling="mode=dynamic hysteresis=3 min-scale=128 growth-interval=100" \
// RUN:   | FileCheck %s --check-prefix=DYNAMIC

// The backward seed (d loss = 1) becomes the loss scale; the loss the step
// reports is not scaled. A model with f16 values gets GradScaler's dynamic
// scaling by default.
// AUTO-LABEL: mpc.model @f16_model
//       AUTO:   attributes {mpc.loss_scaling = #mpc.loss_scaling<mode = dynamic, init_scale = 6.553600e+04, growth_factor = 2.000000e+00, backoff_factor = 5.000000e-01, growth_interval = 2000, hysteresis = 1, min_scale = 0.000000e+00>}
//       AUTO:   %[[LOSS:.*]] = mpc.cross_entropy
//   AUTO-NOT:   mpc.constant
//       AUTO:   %[[SEED:.*]] = mpc.loss_scale : tensor<f32>
//  AUTO-NEXT:   mpc.cross_entropy_grad %[[SEED]],
//       AUTO:   mpc.output loss(%[[LOSS]] : tensor<f32>)
// STATIC-LABEL: mpc.model @f16_model
//       STATIC:   #mpc.loss_scaling<mode = static, init_scale = 5.120000e+02, growth_factor = 2.000000e+00, backoff_factor = 5.000000e-01, growth_interval = 0, hysteresis = 0, min_scale = 0.000000e+00>
//       STATIC:   mpc.loss_scale : tensor<f32>
// DYNAMIC-LABEL: mpc.model @f16_model
//       DYNAMIC:   #mpc.loss_scaling<mode = dynamic, init_scale = 6.553600e+04, growth_factor = 2.000000e+00, backoff_factor = 5.000000e-01, growth_interval = 100, hysteresis = 3, min_scale = 1.280000e+02>
mpc.model @f16_model inputs(%x: tensor<4x3xf32>, %y: tensor<4xi32>)
    params(%w: tensor<5x3xf32> = zeros) {
  %x16 = mpc.cast %x : tensor<4x3xf32> to tensor<4x3xf16>
  %w16 = mpc.cast %w : tensor<5x3xf32> to tensor<5x3xf16>
  %h = mpc.linear %x16, %w16 : tensor<4x3xf16>, tensor<5x3xf16>
  %l = mpc.cross_entropy %h, %y : tensor<4x5xf16>, tensor<4xi32>
  mpc.output loss(%l : tensor<f32>)
}

// -----

// bf16 (f32's range) and f32 need no scaling by default: the seed stays 1
// and loses its mark.
// AUTO-LABEL: mpc.model @bf16_model
//       AUTO:   attributes {mpc.loss_scaling = #mpc.loss_scaling<mode = none, init_scale = 1.000000e+00,
//       AUTO:   %[[ONE:.*]] = mpc.constant dense<1.000000e+00> : tensor<f32>
//  AUTO-NEXT:   mpc.cross_entropy_grad %[[ONE]],
//   AUTO-NOT:   mpc.loss_scale
// STATIC-LABEL: mpc.model @bf16_model
//       STATIC:   mpc.loss_scale : tensor<f32>
mpc.model @bf16_model inputs(%x: tensor<4x3xf32>, %y: tensor<4xi32>)
    params(%w: tensor<5x3xf32> = zeros) {
  %x16 = mpc.cast %x : tensor<4x3xf32> to tensor<4x3xbf16>
  %w16 = mpc.cast %w : tensor<5x3xf32> to tensor<5x3xbf16>
  %h = mpc.linear %x16, %w16 : tensor<4x3xbf16>, tensor<5x3xbf16>
  %l = mpc.cross_entropy %h, %y : tensor<4x5xbf16>, tensor<4xi32>
  mpc.output loss(%l : tensor<f32>)
}
