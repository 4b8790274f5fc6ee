//===- EmitDebug.cpp - `mpc compile --debug-nonfinite` checks -----*- C++
//-*-===//
//
// This file implements the instrumentation of --debug-nonfinite: after every
// step, one check kernel per float value the step materialises counts its
// NaNs and infs and its largest finite magnitude (and, for a cast to half,
// the source values beyond the half type's range). The first check of a
// step that finds a non-finite value claims the record in the step context
// with an atomic exchange and fills it; every later check of the step
// returns at once. Builds without the flag emit none of this.
//
// Infinities can be intended: a causal mask writes -inf where softmax must
// give 0. A value computed elementwise (or by a cast, broadcast, reshape or
// transpose) from a constant that holds inf or NaN may hold infinities by
// design; its check reports NaN only (its inf count is still recorded).
//
// Under delayed FP8 scaling a quantization clips finite values that outgrew
// its scale: after each, a check counts them (emitFp8SaturationCheck) and
// the step's first claims the record's FP8 part, naming the first FP8 GEMM
// that reads the tensor.
//
// A check is one block (threads stride over the tensor and combine with
// mpc_block_reduce_*), so it is correct for any block size; counts are
// float sums, exact up to 2^24 elements.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::mpc;

std::string mlir::mpc::nonfiniteKernelPrelude() {
  // The layout of mpc_nonfinite_record (runtime/mpc_model.h), which kernels
  // cannot include (NVRTC has no <stdint.h>).
  return "struct mpc_nonfinite_record_dev {\n"
         "  int found;\n"
         "  int site;\n"
         "  long long num_elements;\n"
         "  long long nan_count;\n"
         "  long long inf_count;\n"
         "  long long outside_half_range;\n"
         "  float max_abs_finite;\n"
         "  int fp8_found;\n"
         "  int fp8_gemm_site;\n"
         "  int fp8_quantize_site;\n"
         "  int fp8_operand;\n"
         "  int fp8_format;\n"
         "  float fp8_amax;\n"
         "  float fp8_scale;\n"
         "  long long fp8_num_elements;\n"
         "  long long fp8_saturated;\n"
         "};\n\n";
}

std::string mlir::mpc::nonfiniteHostChecks() {
  std::string checks =
      "static_assert(sizeof(mpc_nonfinite_record_dev) == "
      "sizeof(mpc_nonfinite_record), \"nonfinite record layout\");\n";
  for (const char *field :
       {"found", "site", "num_elements", "nan_count", "inf_count",
        "outside_half_range", "max_abs_finite", "fp8_found", "fp8_gemm_site",
        "fp8_quantize_site", "fp8_operand", "fp8_format", "fp8_amax",
        "fp8_scale", "fp8_num_elements", "fp8_saturated"})
    checks += llvm::formatv("static_assert(offsetof(mpc_nonfinite_record_dev, "
                            "{0}) == offsetof(mpc_nonfinite_record, {0}), "
                            "\"nonfinite record layout\");\n",
                            field)
                  .str();
  return checks + "\n";
}

/// The smallest magnitude that rounds to inf in `half` (round to nearest
/// even): the largest finite value plus half of its ulp.
static std::string halfOverflowThreshold(Type half) {
  return half.isF16() ? "65520.0f" : "3.39617752923046e38f";
}

/// Whether `value` may hold infinities by design: a constant with a
/// non-finite element, or an elementwise or data-movement result of one.
static bool isInfiniteByDesign(Value value, NonfiniteSites &sites) {
  auto cached = sites.infiniteByDesign.find(value);
  if (cached != sites.infiniteByDesign.end())
    return cached->second;
  bool byDesign = false;
  Operation *def = value.getDefiningOp();
  if (auto constant = dyn_cast_or_null<ConstantOp>(def)) {
    if (auto floats = dyn_cast<DenseFPElementsAttr>(constant.getValue()))
      byDesign = llvm::any_of(floats.getValues<APFloat>(),
                              [](APFloat v) { return !v.isFinite(); });
  } else if (def &&
             (isElementwise(def) || isAlias(def) || isa<TransposeOp>(def))) {
    byDesign = llvm::any_of(def->getOperands(), [&](Value operand) {
      return isInfiniteByDesign(operand, sites);
    });
  }
  sites.infiniteByDesign[value] = byDesign;
  return byDesign;
}

/// The first mpc.scaled_matmul in program order that reads `quantize`'s
/// FP8 tensor (or its transposed copy, or a transpose of either), and
/// whether as its lhs (0) or rhs (1); null where none does.
static std::pair<ScaledMatmulOp, int> firstFp8Gemm(QuantizeOp quantize) {
  ScaledMatmulOp first;
  int operand = 0;
  SmallVector<Value> pending{quantize.getResult()};
  if (Value transposed = quantize.getTransposed())
    pending.push_back(transposed);
  while (!pending.empty()) {
    Value value = pending.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (isa<TransposeOp>(user) || isAlias(user)) {
        llvm::append_range(pending, user->getResults());
        continue;
      }
      auto gemm = dyn_cast<ScaledMatmulOp>(user);
      if (!gemm || (use.get() != gemm.getLhs() && use.get() != gemm.getRhs()))
        continue;
      if (!first || (gemm->getBlock() == first->getBlock() &&
                     gemm->isBeforeInBlock(first))) {
        first = gemm;
        operand = use.get() == gemm.getLhs() ? 0 : 1;
      }
    }
  }
  return {first, operand};
}

int64_t mlir::mpc::NonfiniteSites::add(Operation *op) {
  sites.push_back({op->getName().getStringRef().str(),
                   fileLineCol(op->getLoc()),
                   forwardOps && !forwardOps->contains(op)});
  return static_cast<int64_t>(sites.size() - 1);
}

void mlir::mpc::emitNonfiniteChecks(const Step &step, StepEmitter &emitter,
                                    NonfiniteSites &sites) {
  for (Operation *op : step.ops) {
    // Under delayed scaling a quantization can clip (saturate) finite
    // values: named by the GEMM that reads them.
    if (auto quantize = dyn_cast<QuantizeOp>(op);
        quantize && quantize.getScaling()) {
      if (auto [gemm, operand] = firstFp8Gemm(quantize); gemm) {
        int64_t gemmSite = sites.add(gemm), quantizeSite = sites.add(quantize);
        std::string description = llvm::formatv(
            "mpc.quantize at {0}, the {1} of mpc.scaled_matmul at {2}",
            sites.sites[quantizeSite].location, operand ? "rhs" : "lhs",
            sites.sites[gemmSite].location);
        emitFp8SaturationCheck(emitter, quantize, gemmSite, quantizeSite,
                               operand, description);
      }
    }
    // Constants hold what the model declared; an alias is its source.
    if (isa<ConstantOp>(op) || isAlias(op))
      continue;
    for (Value result : op->getResults()) {
      auto type = cast<RankedTensorType>(result.getType());
      Type element = type.getElementType();
      if (!isa<FloatType>(element) || !emitter.getPlan().isMaterialised(result))
        continue;
      // A cast to half also counts its source values beyond the half range.
      Value source;
      if (auto castOp = dyn_cast<CastOp>(op);
          castOp && (element.isF16() || element.isBF16()) &&
          castOp.getInput().getType().getElementType().isF32() &&
          emitter.getPlan().isMaterialised(castOp.getInput()))
        source = castOp.getInput();

      int64_t site = sites.add(op);

      int64_t n = type.getNumElements();
      bool infiniteByDesign = isInfiniteByDesign(result, sites);
      std::string name = emitter.kernelName("check_nonfinite");
      std::string sourceParameter, sourceCount;
      if (source) {
        sourceParameter =
            "const " + elementCType(source) + " *__restrict__ source, ";
        sourceCount = llvm::formatv("    float s = fabsf(mpc_load(source + "
                                    "i));\n"
                                    "    if (s >= {0} && s != INFINITY) "
                                    "outside += 1.0f;\n",
                                    halfOverflowThreshold(element))
                          .str();
      }
      emitter.addKernel(llvm::formatv(
          "// --debug-nonfinite: {0} at {1}{9}\n"
          "__global__ void {2}(const {3} *__restrict__ x, {4}"
          "mpc_nonfinite_record_dev *record) {{\n"
          "  if (record->found) return; // an earlier value was first\n"
          "  float nans = 0.0f, infs = 0.0f, largest = 0.0f, outside = "
          "0.0f;\n"
          "  MPC_FOR_THREAD(i, {5}LL) {{\n"
          "    float v = mpc_load(x + i);\n"
          "    if (v != v) nans += 1.0f;\n"
          "    else if (fabsf(v) == INFINITY) infs += 1.0f;\n"
          "    else largest = fmaxf(largest, fabsf(v));\n{6}"
          "  }\n"
          "  nans = mpc_block_reduce_sum(nans);\n"
          "  infs = mpc_block_reduce_sum(infs);\n"
          "  largest = mpc_block_reduce_max(largest);\n"
          "  outside = mpc_block_reduce_sum(outside);\n"
          "  if (threadIdx.x == 0 && {10} > 0.0f &&\n"
          "      atomicExch(&record->found, 1) == 0) {{\n"
          "    record->site = {7};\n"
          "    record->num_elements = {5}LL;\n"
          "    record->nan_count = (long long)nans;\n"
          "    record->inf_count = (long long)infs;\n"
          "    record->outside_half_range = {8};\n"
          "    record->max_abs_finite = largest;\n"
          "  }\n"
          "}\n",
          op->getName(), sites.sites.back().location, name,
          elementCType(result), sourceParameter, n, sourceCount, site,
          source ? "(long long)outside" : "-1LL",
          infiniteByDesign ? " (infinities by design: NaN only)" : "",
          infiniteByDesign ? "nans" : "nans + infs"));

      SmallVector<std::string> args{emitter.constPointer(result)};
      // Reads the value (and a cast's source) once; it only compares.
      KernelCost cost;
      cost.reads(result);
      if (source) {
        args.push_back(emitter.constPointer(source));
        cost.reads(source);
      }
      args.push_back("(mpc_nonfinite_record_dev *)ctx->nonfinite");
      emitter.launch(name, 1, rowBlockSize, args, cost);
    }
  }
}
