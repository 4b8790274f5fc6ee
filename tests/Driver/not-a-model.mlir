// Only mpc.model may appear at the top level of a model file.

// RUN: not mpc compile %s --emit=mlir 2>&1 | FileCheck %s -DFILE=%s

// CHECK: [[FILE]]:[[@LINE+1]]:1: error: expects only mpc.model at the top level of a model file, got 'func.func'
func.func @forward() {
  return
}
