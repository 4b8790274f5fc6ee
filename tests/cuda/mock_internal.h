//===- mock_internal.h - what the mock's parts share ------------*- C++ -*-===//
//
// The mock driver (mock_cuda.cpp) and the mock cuDNN (mock_cudnn.cpp) are
// one library: cuDNN's work goes onto the driver's streams and captures,
// and into its log of operations.
//
//===----------------------------------------------------------------------===//

#ifndef MPC_TESTS_CUDA_MOCK_INTERNAL_H
#define MPC_TESTS_CUDA_MOCK_INTERNAL_H

#include "tests/cuda/mock_cuda.h"

#include <cstddef>
#include <functional>

namespace mock_internal {

/// Runs `work` now, or records it where `stream` is being captured.
void submit(std::function<void()> work, void *stream);
/// Whether work on `stream` goes into the capture under way.
bool captures(void *stream);
/// Appends to the log tests read with mock_cuda_get_op.
void logOp(mock_cuda_op op);
/// 1, 2, ... in creation order; 0 for the null stream.
int streamId(void *stream);
/// Whether [pointer, pointer + bytes) lies inside one cuMemAlloc'd block.
bool inOneAllocation(const void *pointer, size_t bytes);

} // namespace mock_internal

#endif // MPC_TESTS_CUDA_MOCK_INTERNAL_H
