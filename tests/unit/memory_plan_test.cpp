//===- memory_plan_test.cpp - code generation's memory plan -----*- C++ -*-===//
//
// What IR cannot reach: a value that code generation reads without a place
// in the memory plan is an internal error at the value's location, not a
// read past the plan's table (issue 36).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"
#include "dialect/Register.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using namespace mlir::mpc;

namespace {

// After mpc-form-kernels: %h lives only in the loop group's registers.
constexpr const char *fusedModel = R"mlir(
mpc.model @fused inputs(%x: tensor<8xf32>) params() {
  %l = mpc.fusion loop {
    %h = mpc.relu %x : tensor<8xf32> loc("model.mlir":3:10)
    %n = mpc.neg %h : tensor<8xf32>
    mpc.yield %n : tensor<8xf32>
  } : tensor<8xf32>
  %s = mpc.reduce_sum %l dims [0] : tensor<8xf32>
  mpc.output loss(%s : tensor<f32>)
}
)mlir";

TEST(MemoryPlan, UnplannedValueIsALocatedInternalError) {
  DialectRegistry registry;
  registerAllDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(fusedModel, &context);
  ASSERT_TRUE(module);
  auto model = *module->getOps<ModelOp>().begin();
  std::vector<Step> steps = formSteps(model);
  MemoryPlan plan(model, steps, {});

  Operation *relu = nullptr;
  Operation *neg = nullptr;
  model.walk([&](Operation *op) {
    if (isa<ReluOp>(op))
      relu = op;
    if (isa<NegOp>(op))
      neg = op;
  });
  ASSERT_TRUE(relu && neg);
  ASSERT_FALSE(plan.isMaterialised(relu->getResult(0)));

  std::string messages;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diagnostic) {
    messages += diagnostic.str() + "|";
    for (const Diagnostic &note : diagnostic.getNotes())
      messages += "note: " + note.str() + "|";
    if (auto loc = dyn_cast<FileLineColLoc>(diagnostic.getLocation()))
      messages += loc.getFilename().str() + ":" +
                  std::to_string(loc.getLine()) + ":" +
                  std::to_string(loc.getColumn()) + "|";
  });
  EXPECT_FALSE(plan.failed());
  (void)plan.lookup(relu->getResult(0), neg);
  EXPECT_TRUE(plan.failed());
  EXPECT_NE(messages.find("internal error: code generation reads this value, "
                          "which has no place in the memory plan"),
            std::string::npos)
      << messages;
  EXPECT_NE(messages.find("model.mlir:3:10"), std::string::npos) << messages;
  EXPECT_NE(messages.find("note: read by the code of 'mpc.neg'"),
            std::string::npos)
      << messages;
}

} // namespace
