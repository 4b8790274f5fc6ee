// RUN: mpc-opt %s --mlir-print-debuginfo --mlir-print-local-scope \
// RUN:   | FileCheck %s
// RUN: mpc-opt %s --mlir-print-debuginfo | mpc-opt --mlir-print-debuginfo \
// RUN:   --mlir-print-local-scope | FileCheck %s

// mpc.output keeps a printed location (mpc import writes one on every op):
// `loc(...)` ends the op rather than reading as an output named `loc`.
// not-trainable: four models in one file, which mpc compile refuses (each
// alone compiles; the printed form is the test).

// CHECK-LABEL: mpc.model @loss_only
//       CHECK:   mpc.output loss(%{{.*}} : tensor<f32>) loc("loss_node (ReduceMean)"("m.onnx":3:1))
mpc.model @loss_only inputs(%x: tensor<4xf32>) params(%w: tensor<4xf32> = zeros) {
  %0 = mpc.reduce_mean %x dims [0] : tensor<4xf32> loc("mean_node")
  mpc.output loss(%0 : tensor<f32>) loc("loss_node (ReduceMean)"("m.onnx":3:1))
}

// CHECK-LABEL: mpc.model @extra_outputs
//       CHECK:   mpc.output loss(%{{.*}} : tensor<f32>) y(%{{.*}} : tensor<4xf32>) loc("out")
mpc.model @extra_outputs inputs(%x: tensor<4xf32>) params(%w: tensor<4xf32> = zeros) {
  %0 = mpc.reduce_mean %x dims [0] : tensor<4xf32>
  mpc.output loss(%0 : tensor<f32>) y(%x : tensor<4xf32>) loc("out")
}
