// The whole step, as `mpc compile` builds it: each f32 weight is cast to
// half once per step, however many ops (forward and backward) use it.
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O1 half=f16" \
// RUN:   --mpc-fold-casts --canonicalize --cse --mpc-autodiff --canonicalize --cse \
// RUN:   | FileCheck %s --check-prefix=O1
// RUN: mpc-opt %s --split-input-file --mpc-assign-precision="level=O2 half=bf16" \
// RUN:   --mpc-fold-casts --canonicalize --cse --mpc-autodiff --canonicalize --cse \
// RUN:   | FileCheck %s --check-prefix=O2

// A weight shared by two GEMMs: one cast, read by both forward GEMMs and by
// the backward GEMMs that need it; its gradient is cast back to f32 once.
// O1-LABEL: mpc.model @shared_weight
//       O1:   %[[W16:.*]] = mpc.cast %w : tensor<8x8xf32> to tensor<8x8xf16>
//   O1-NOT:   mpc.cast %w :
//       O1:   mpc.linear %{{.*}}, %[[W16]]
//   O1-NOT:   mpc.cast %w :
//       O1:   mpc.linear %{{.*}}, %[[W16]]
//   O1-NOT:   mpc.cast %w :
//       O1:   mpc.output
// O2-LABEL: mpc.model @shared_weight
//       O2:   %[[W16:.*]] = mpc.cast %w : tensor<8x8xf32> to tensor<8x8xbf16>
//   O2-NOT:   mpc.cast %w :
//       O2:   mpc.output
mpc.model @shared_weight
    inputs(%x: tensor<4x8xf32>, %y: tensor<4xi32>)
    params(%w: tensor<8x8xf32> = normal(0.02)) {
  %h = mpc.linear %x, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %a = mpc.relu %h : tensor<4x8xf32>
  %l = mpc.linear %a, %w : tensor<4x8xf32>, tensor<8x8xf32>
  %loss = mpc.cross_entropy %l, %y : tensor<4x8xf32>, tensor<4xi32>
  mpc.output loss(%loss : tensor<f32>)
}

// -----

// Tied embedding and output projection (GPT-2's wte = lm_head): at O2 the
// table is cast once, at the top, for the lookup and the GEMM.
// O2-LABEL: mpc.model @tied_embedding
//       O2:   %[[T16:.*]] = mpc.cast %wte : tensor<16x8xf32> to tensor<16x8xbf16>
//   O2-NOT:   mpc.cast %wte :
//       O2:   mpc.embedding %[[T16]]
//   O2-NOT:   mpc.cast %wte :
//       O2:   mpc.linear %{{.*}}, %[[T16]]
//   O2-NOT:   mpc.cast %wte :
//       O2:   mpc.output
// O1-LABEL: mpc.model @tied_embedding
//       O1:   %[[T16:.*]] = mpc.cast %wte : tensor<16x8xf32> to tensor<16x8xf16>
//   O1-NOT:   mpc.cast %wte :
//       O1:   mpc.output
mpc.model @tied_embedding
    inputs(%idx: tensor<2x4xi32>, %y: tensor<8xi32>)
    params(%wte: tensor<16x8xf32> = normal(0.02)) {
  %e = mpc.embedding %wte, %idx : tensor<16x8xf32>, tensor<2x4xi32>
  %f = mpc.reshape %e : tensor<2x4x8xf32> to tensor<8x8xf32>
  %l = mpc.linear %f, %wte : tensor<8x8xf32>, tensor<16x8xf32>
  %loss = mpc.cross_entropy %l, %y : tensor<8x16xf32>, tensor<8xi32>
  mpc.output loss(%loss : tensor<f32>)
}
