// examples/mlp.mlir parses, verifies and round-trips through the custom and
// the generic form; `mpc compile --emit=mlir` prints the same model; and the
// precision policy puts exactly its two linears in `lower` and its loss in
// `keep_f32`.

// RUN: mpc-opt %examples/mlp.mlir | mpc-opt | FileCheck %s
// RUN: mpc-opt --mlir-print-op-generic %examples/mlp.mlir | mpc-opt | FileCheck %s
// RUN: mpc compile %examples/mlp.mlir --emit=mlir | FileCheck %s
// RUN: mpc-opt --mlir-print-op-generic %examples/mlp.mlir \
// RUN:   | FileCheck %s --check-prefix=GENERIC
// RUN: mpc-opt --mpc-test-precision-policy --mlir-print-op-on-diagnostic=false \
// RUN:     %examples/mlp.mlir -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=POLICY \
// RUN:       --implicit-check-not="precision: lower" \
// RUN:       --implicit-check-not="precision: keep_f32"

// CHECK-LABEL: mpc.model @mlp
//  CHECK-NEXT:   inputs(%x: tensor<64x784xf32>, %y: tensor<64xi32>)
//  CHECK-NEXT:   params(%fc1.weight: tensor<256x784xf32> = kaiming_uniform(2.23606797749979),
//  CHECK-NEXT:          %fc1.bias: tensor<256xf32> = uniform(-0.0357, 0.0357),
//  CHECK-NEXT:          %fc2.weight: tensor<10x256xf32> = kaiming_uniform(2.23606797749979),
//  CHECK-NEXT:          %fc2.bias: tensor<10xf32> = uniform(-0.0625, 0.0625)) {
//  CHECK-NEXT:   %[[H:.*]] = mpc.linear %x, %fc1.weight, %fc1.bias : tensor<64x784xf32>, tensor<256x784xf32>, tensor<256xf32>
//  CHECK-NEXT:   %[[A:.*]] = mpc.relu %[[H]] : tensor<64x256xf32>
//  CHECK-NEXT:   %[[LOGITS:.*]] = mpc.linear %[[A]], %fc2.weight, %fc2.bias : tensor<64x256xf32>, tensor<10x256xf32>, tensor<10xf32>
//  CHECK-NEXT:   %[[LOSS:.*]] = mpc.cross_entropy %[[LOGITS]], %y : tensor<64x10xf32>, tensor<64xi32>
//  CHECK-NEXT:   mpc.output loss(%[[LOSS]] : tensor<f32>) logits(%[[LOGITS]] : tensor<64x10xf32>)
//  CHECK-NEXT: }

// GENERIC-LABEL: "mpc.model"()
// GENERIC-SAME:    input_names = ["x", "y"]
// GENERIC-SAME:    param_names = ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
// GENERIC-SAME:    sym_name = "mlp"
//      GENERIC:  "mpc.linear"({{.*}}) : (tensor<64x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<64x256xf32>
//      GENERIC:  "mpc.linear"({{.*}}) : (tensor<64x256xf32>, tensor<10x256xf32>, tensor<10xf32>) -> tensor<64x10xf32>
//      GENERIC:  "mpc.cross_entropy"({{.*}}) : (tensor<64x10xf32>, tensor<64xi32>) -> tensor<f32>

//      POLICY: remark: precision: lower, accumulate: 'f32'
// POLICY-NEXT:   %h = mpc.linear
//      POLICY: remark: precision: follow, accumulate: 'f16'
// POLICY-NEXT:   %a = mpc.relu
//      POLICY: remark: precision: lower, accumulate: 'f32'
// POLICY-NEXT:   %logits = mpc.linear
//      POLICY: remark: precision: keep_f32, accumulate: 'f32'
// POLICY-NEXT:   %loss = mpc.cross_entropy
