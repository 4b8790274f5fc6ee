//===- EmitDataParallel.cpp - gradient buckets of a data-parallel step ----===//
//
// With --data-parallel the training step sums its f32 gradients over the
// ranks (mpc_rt_reduce_gradients). The compiler knows where each gradient
// becomes final in the backward pass, so it cuts the gradient buffer into
// buckets and reduces each right after the step that finishes it: the
// earliest point, with no hooks and no unused-parameter surprises. Every
// element is still summed in rank order, so bucketing never changes a bit.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Emitter.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <numeric>

using namespace mlir;
using namespace mlir::mpc;

std::vector<GradientBucket>
mlir::mpc::planGradientBuckets(ModelOp train, const std::vector<Step> &steps,
                               const MemoryPlan &plan,
                               ArrayRef<Value> gradients, int64_t capBytes) {
  llvm::DenseMap<Operation *, size_t> stepOf;
  for (size_t s = 0; s < steps.size(); ++s)
    for (Operation *op : steps[s].ops)
      stepOf[op] = s;

  // When each parameter's gradient is final: after the step defining it,
  // when that step wrote it in place; after the body's closing copies when
  // the plan put it elsewhere first.
  size_t numParams = gradients.size();
  SmallVector<size_t> ready(numParams, steps.size());
  for (size_t i = 0; i < numParams; ++i) {
    const Buffer &target = plan.paramBuffers[i];
    const Buffer &actual = plan.lookup(gradients[i]);
    bool inPlace =
        actual.arena == MPC_ARENA_GRADS && actual.offset == target.offset;
    Operation *def = gradients[i].getDefiningOp();
    if (inPlace && def && stepOf.count(def))
      ready[i] = stepOf[def];
  }

  // In the order they become final; gradients final at the same step
  // (a weight and its bias from one GEMM) from the highest offset down:
  // backward finishes the parameters in reverse, so the bucket still open
  // lies above them, and taken top down each one is adjacent to it.
  SmallVector<size_t> order(numParams);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ready[a] != ready[b])
      return ready[a] < ready[b];
    return plan.paramBuffers[a].offset > plan.paramBuffers[b].offset;
  });

  ArrayRef<Attribute> names = train.getParamNames().getValue();
  std::vector<GradientBucket> buckets;
  for (size_t i : order) {
    const Buffer &buffer = plan.paramBuffers[i];
    std::string name = cast<StringAttr>(names[i]).str();
    if (!buckets.empty()) {
      GradientBucket &open = buckets.back();
      // Adjacent up to alignment padding, on either side.
      int64_t begin = std::min(open.offset, buffer.offset);
      int64_t end =
          std::max(open.offset + open.bytes, buffer.offset + buffer.bytes);
      int64_t gap = end - begin - open.bytes - buffer.bytes;
      if (gap >= 0 && gap < 64 && end - begin <= capBytes) {
        open.offset = begin;
        open.bytes = end - begin;
        open.params.push_back(name);
        open.readyStep = std::max(open.readyStep, ready[i]);
        continue;
      }
    }
    GradientBucket bucket;
    bucket.offset = buffer.offset;
    bucket.bytes = buffer.bytes;
    bucket.params.push_back(name);
    bucket.readyStep = ready[i];
    buckets.push_back(bucket);
  }
  // Each bucket names its parameters in the buffer's order.
  llvm::StringMap<int64_t> offsetOf;
  for (size_t i = 0; i < numParams; ++i)
    offsetOf[cast<StringAttr>(names[i]).getValue()] =
        plan.paramBuffers[i].offset;
  for (GradientBucket &bucket : buckets)
    llvm::stable_sort(bucket.params,
                      [&](const std::string &a, const std::string &b) {
                        return offsetOf[a] < offsetOf[b];
                      });
  // A bucket is reduced once all of it is final; keep them in that order.
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const GradientBucket &a, const GradientBucket &b) {
                     return a.readyStep < b.readyStep;
                   });
  return buckets;
}
